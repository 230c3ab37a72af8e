//! The gate's profile: the hostile body as a check of a mutation would run
//! (a fresh checkout, loopback only, nothing of the individual), and the
//! ordinary tools a check needs, working inside.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use teneral::confine::{self, Profile};

use super::*;

/// The doors every profile closes with seccomp, capabilities and Landlock's
/// scopes.
pub fn syscall_table() -> Vec<(&'static str, Want)> {
    use Want::*;
    vec![
        ("kernel.ptrace", Errno(EPERM)),
        ("kernel.signal", Errno(EPERM)),
        ("kernel.vm_read", Errno(EPERM)),
        ("mount", Errno(EPERM)),
        ("bpf", Errno(EPERM)),
        ("userns.unshare", Errno(EPERM)),
        ("userns.clone", Errno(EPERM)),
        ("clone3", Errno(ENOSYS)),
        ("keyctl", Errno(EPERM)),
        ("io_uring", Errno(EPERM)),
        ("userfaultfd", Errno(EPERM)),
        ("perf_event_open", Errno(EPERM)),
        ("tiocsti", Errno(EPERM)),
        ("tiocsti.high_bits", Errno(EPERM)),
        ("tioclinux", Errno(EPERM)),
        ("raw_socket", Errno(EPERM)),
    ]
}

/// Runs `argv` confined by `profile` in `cwd`, with a check's bare
/// environment; its output.
pub fn run_confined(
    profile: &Profile,
    argv: Vec<OsString>,
    cwd: &Path,
    tmp: &Path,
) -> std::io::Result<Output> {
    let argv = confine::wrap_with(profile, &options(), argv)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(cwd).env_clear().env("TMPDIR", tmp);
    for k in ["PATH", "HOME", "LANG", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.output_within(SLOW)
}

/// Options naming the `teneral` under test as the helper.
pub fn options() -> confine::Options {
    confine::Options { exe: Some(teneral()), ..confine::Options::default() }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fresh checkout holding the hostile body, with its own temp dir.
fn checkout() -> Result<(tempfile::TempDir, PathBuf, PathBuf), Box<dyn std::error::Error>> {
    let dir = tempfile::Builder::new().prefix("tnl-gate").tempdir()?;
    for (path, content) in hostile_body() {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
        std::fs::write(p, content)?;
    }
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let checkout = dir.path().to_owned();
    Ok((dir, checkout, tmp))
}

#[test]
fn a_hostile_gate_check_finds_every_door_shut() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    // The door kernel.signal is tried on this test's pid, which must name no
    // process in the check's PID namespace, whose few pids are the first
    // ones. A container's first process is pid 1 there too: the cage's own
    // first process, which Landlock's signal scope shields (EPERM).
    let me = std::process::id();
    if me < 100 {
        return Err(format!(
            "the test is pid {me}, which the check's own PID namespace has too, so kernel.signal \
             and /proc cannot tell the test from the cage: run the suite as a later process \
             (not as a container's first one; scripts/test-container starts it after 300 others)"
        )
        .into());
    }
    let ind = hostile_individual(&format!("TENERAL_PROVIDER=standin\nTENERAL_API_KEY={SECRET}\n"))?;
    let (_dir, checkout, tmp) = checkout()?;
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let build = run_confined(
        &profile,
        ["cargo", "build", "--offline", "--locked", "--quiet"].map(OsString::from).to_vec(),
        &checkout.join("body"),
        &tmp,
    )?;
    assert!(build.status.success(), "cargo builds inside the gate:\n{}", text(&build));
    let binary = checkout.join("body/target/debug/teneral-body");
    let argv = vec![
        binary.into_os_string(),
        "gate".into(),
        ind.path().into(),
        std::process::id().to_string().into(),
    ];
    let _agent = Agent::start(ind.path())?;
    let out = run_confined(&profile, argv, &checkout, &tmp)?;
    assert!(out.status.success(), "{}", text(&out));
    let doors: Doors = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| Some((v["door"].as_str()?.to_owned(), v)))
        .collect();
    use Want::*;
    let mut table = vec![
        ("checkout.write", Pass),
        ("loopback", Pass),
        ("net.ipv4", Errno(ENETUNREACH)),
        ("net.ipv6", Errno(ENETUNREACH)),
        ("net.dns", Errno(ENETUNREACH)),
        // The individual is not in a check's tree at all.
        ("individual.env", Errno(ENOENT)),
        ("individual.soul", Errno(ENOENT)),
        ("individual.write", Errno(ENOENT)),
        ("individual.list", Errno(ENOENT)),
        ("ssh_agent", Errno(ENOENT)),
        ("journald", Errno(ENOENT)),
        ("proc.count", Pass),
    ];
    table.extend(syscall_table());
    // The test's pid names no process in the check's PID namespace.
    for row in table.iter_mut().filter(|(door, _)| *door == "kernel.signal") {
        row.1 = Errno(ESRCH);
    }
    check(&doors, &table)?;
    check_proc(&doors)?;
    let resolve = &doors["net.resolve"];
    assert_eq!(resolve["ok"], false, "no name resolves in a check: {resolve}");
    assert!(!ind.path().join("gate-was-here").exists());
    Ok(())
}

/// The tools a check runs, inside the gate's cage: cargo build and test, git,
/// curl to a server on loopback, and Python's asyncio with AF_UNIX sendto.
#[test]
fn ordinary_tools_work_inside_the_cage() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-tools").tempdir()?;
    let root = dir.path();
    std::fs::create_dir_all(root.join("proj/src"))?;
    std::fs::create_dir_all(root.join("tmp"))?;
    std::fs::write(
        root.join("proj/Cargo.toml"),
        "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )?;
    std::fs::write(
        root.join("proj/src/main.rs"),
        "fn main() { println!(\"built\"); }\n#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    )?;
    std::fs::write(root.join("aio.py"), ASYNCIO)?;
    let script = r#"set -e
cd proj && cargo build --offline --quiet && cargo test --offline --quiet 2>&1 | grep -q "1 passed" && echo CARGO-OK && cd ..
git init -q repo && git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m one && git -C repo log --format=GIT-%s
/usr/bin/python3 aio.py
/usr/bin/python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 &
server=$!
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18765/ && break; sleep 0.1; done
curl -sS -o /dev/null -w "CURL-%{http_code}\n" http://127.0.0.1:18765/
kill $server
"#;
    let profile = Profile::Gate { checkout: root.to_owned(), writable: vec![] };
    let out = run_confined(
        &profile,
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        root,
        &root.join("tmp"),
    )?;
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for want in ["CARGO-OK", "GIT-one", "ASYNCIO-OK hello 5", "CURL-200"] {
        assert!(all.contains(want), "{want} missing:\n{all}");
    }
    Ok(())
}

const ASYNCIO: &str = r#"import asyncio, os, socket
async def main():
    path = os.path.join(os.environ["TMPDIR"], "d.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    server.setblocking(False)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sent = client.sendto(b"hello", path)
    data = await asyncio.get_running_loop().sock_recv(server, 16)
    print("ASYNCIO-OK", data.decode(), sent)
asyncio.run(main())
"#;

/// The smoke run's profile: the stand-in model the kernel serves on its own
/// loopback is relayed in at the same address; another port of the
/// kernel's loopback is not.
#[test]
fn the_smoke_run_reaches_the_stand_in_model_and_nothing_else() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-smoke").tempdir()?;
    let (checkout, individual, tmp) =
        (dir.path().join("checkout"), dir.path().join("individual"), dir.path().join("tmp"));
    for d in [&checkout, &individual, &tmp] {
        std::fs::create_dir_all(d)?;
    }
    let upstream = Upstream::start(dir.path())?;
    let port: u16 = upstream
        .base_url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .ok_or("no port")?
        .parse()?;
    let other = std::net::TcpListener::bind("127.0.0.1:0")?;
    let other_port = other.local_addr()?.port();
    let script = format!(
        r#"curl -sS -m 10 -H "Authorization: Bearer {SECRET}" -H "Content-Type: application/json" \
  -d '{{"model":"standin","messages":[{{"role":"user","content":"hi"}}]}}' {url}/chat/completions
echo
curl -sS -m 3 http://127.0.0.1:{other_port}/ >/dev/null 2>&1
echo "other port: curl exit $?"
/usr/bin/python3 -c 'import errno, socket; print("other port: errno", errno.errorcode[socket.socket().connect_ex(("127.0.0.1", {other_port}))])'
"#,
        url = upstream.base_url
    );
    let profile = Profile::Smoke {
        checkout: checkout.clone(),
        individual,
        writable: vec![],
        forward: vec![],
    };
    let argv = confine::wrap_with(
        &profile,
        &confine::Options { forward: vec![port], ..options() },
        vec!["/bin/sh".into(), "-c".into(), script.into()],
    )?;
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&checkout)
        .env("TMPDIR", &tmp)
        .output_within(SLOW)?;
    let all = text(&out);
    assert!(all.contains("model reached"), "the stand-in answers inside:\n{all}");
    // curl's exit status 7 is "failed to connect"; its wording changes
    // between versions, its exit status does not.
    assert!(all.contains("other port: curl exit 7"), "another port is not reachable:\n{all}");
    assert!(all.contains("other port: errno ECONNREFUSED"), "another port is refused:\n{all}");
    Ok(())
}

/// The old root is detached, and the new one read-only, before the program
/// runs: the cage's first process finishes the root while the program's
/// process applies its own steps, and the program's process waits for it.
#[test]
fn the_old_root_is_gone_before_the_program_runs() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let (_dir, checkout, tmp) = checkout()?;
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let script = "cat /proc/self/mountinfo; ls -d /.old-root 2>&1; touch /new-file 2>&1; true";
    let argv = ["/bin/sh", "-c", script].map(OsString::from).to_vec();
    for _ in 0..20 {
        let out = run_confined(&profile, argv.clone(), &checkout, &tmp)?;
        let all = text(&out);
        assert!(out.status.success(), "{all}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("old-root /"), "the old root is still mounted:\n{all}");
        assert!(stdout.contains("/.old-root': No such file or directory"), "{all}");
        assert!(stdout.contains("/new-file': Read-only file system"), "{all}");
        let root = stdout.lines().find(|l| l.split(' ').nth(4) == Some("/"));
        let root_options = root.and_then(|l| l.split(' ').nth(5)).unwrap_or_default();
        assert!(root_options.split(',').any(|o| o == "ro"), "the root is read-only:\n{all}");
        // Without noatime, the program's first walk through a link of the
        // root (an access time written) can make that remount fail (EBUSY).
        assert!(root_options.split(',').any(|o| o == "noatime"), "no access times:\n{all}");
    }
    Ok(())
}
