//! The cage, proven by a hostile body (a real crate, `tests/cage/hostile/`)
//! that tries every door of the design's section 3: as a generation under
//! `teneral run` (here), as a gate check under `teneral confine --profile
//! gate` ([`gate`]), and where a feature is missing ([`missing`]).
//!
//! Every refusal is asserted by its errno, every rule's positive case by
//! its success. These tests need Landlock ABI 6, seccomp and namespaces;
//! [`require_cage`] fails them where Linux should have those and skips them,
//! saying why, only where it truly has not.

mod auth;
mod gate;
mod grants;
mod identity;
mod missing;
mod offer;
mod privilege;
mod seams;
mod targets;
mod unprivileged;
mod zygote;
mod zygote_kernel;
mod zygote_runner;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
pub use targets::{Agent, Credentials, Upstream};

pub const LONG: Duration = Duration::from_secs(400);
pub const SECRET: &str = "sk-cagetest-real-7f3a9c1e5b";
pub const DECOY: &str = "sk-cagetest-decoy";

pub const EPERM: i64 = 1;
pub const EBADF: i64 = 9;
pub const EAGAIN: i64 = 11;
pub const ENOENT: i64 = 2;
pub const ESRCH: i64 = 3;
pub const EACCES: i64 = 13;
pub const EXDEV: i64 = 18;
pub const EBUSY: i64 = 16;
pub const EROFS: i64 = 30;
pub const ENOSYS: i64 = 38;
pub const ENETUNREACH: i64 = 101;

/// The hostile body's files, as a test individual's `body/`.
pub fn hostile_body() -> Vec<(&'static str, &'static str)> {
    vec![
        ("body/Cargo.toml", include_str!("cage/hostile/Cargo.toml")),
        ("body/Cargo.lock", include_str!("cage/hostile/Cargo.lock")),
        ("body/src/main.rs", include_str!("cage/hostile/src/main.rs")),
        ("body/src/tools.rs", include_str!("cage/hostile/src/tools.rs")),
        ("body/build.rs", include_str!("cage/hostile/build.rs")),
    ]
}

/// Whether this Linux can build the cage. `Err` when it lacks a feature,
/// which fails the test unless `TENERAL_TEST_NO_CAGE` says this machine is
/// known to lack it (then the caller skips, printing why). A gate check
/// that runs these tests inside its own cage sets it: a cage does not nest
/// (its seccomp profile denies new user namespaces), and the test harness
/// then starts every test's body with `TENERAL_UNSAFE_UNCONFINED=1`.
pub fn require_cage() -> Result<bool, String> {
    let missing = teneral_cage::missing(&[]);
    if missing.is_empty() {
        return Ok(true);
    }
    let why = format!("this Linux lacks {}", missing.join("; "));
    if std::env::var_os("TENERAL_TEST_NO_CAGE").is_some() {
        crate::common::skip(&format!("{why} (TENERAL_TEST_NO_CAGE is set)"));
        return Ok(false);
    }
    Err(format!("{why}; set TENERAL_TEST_NO_CAGE=1 only on a machine known to lack it"))
}

/// What each door gave, by name.
pub type Doors = HashMap<String, Value>;

/// What a door must give: success, or failure with this errno.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    Pass,
    Errno(i64),
}

/// Checks every row of `table` against `doors`; all failures in one message.
pub fn check(doors: &Doors, table: &[(&str, Want)]) -> Result<(), String> {
    let mut wrong = Vec::new();
    for (door, want) in table {
        let Some(got) = doors.get(*door) else {
            wrong.push(format!("{door}: not tried"));
            continue;
        };
        let fine = match want {
            Want::Pass => got["ok"] == true,
            Want::Errno(n) => got["ok"] == false && got["errno"].as_i64() == Some(*n),
        };
        if !fine {
            wrong.push(format!("{door}: wanted {want:?}, got {got}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// Checks the doors of the host's processes: `/proc` lists a few of the
/// cage's own, never the test's.
pub fn check_proc(doors: &Doors) -> Result<(), String> {
    let listed = doors["proc.count"]["detail"].as_str().unwrap_or_default().to_owned();
    let pids: Vec<&str> = listed.split_whitespace().collect();
    let me = std::process::id().to_string();
    if pids.contains(&me.as_str()) || pids.is_empty() || pids.len() > 50 {
        return Err(format!("/proc in the cage lists {listed:?}; the test is {me}"));
    }
    Ok(())
}

/// A test individual with the hostile body, the owner's secrets in place
/// and a decoy that any scan must find.
pub fn hostile_individual(env: &str) -> Result<Individual, Box<dyn std::error::Error>> {
    let ind = Individual::with_body(&hostile_body(), "", &[])?;
    let home = ind.path();
    std::fs::write(home.join(".env"), format!("{env}TENERAL_WARM_GATE=off\n"))?;
    std::fs::write(home.join("BACKLOG.md"), "# Backlog\n")?;
    std::fs::create_dir_all(home.join(".teneral/auth"))?;
    std::fs::write(home.join(".teneral/auth/token"), format!("{SECRET}\n"))?;
    std::fs::create_dir_all(home.join("soul"))?;
    std::fs::write(home.join("soul/decoy.txt"), format!("{DECOY}\n"))?;
    std::fs::create_dir_all(home.join(".teneral/owner"))?;
    std::fs::write(home.join(".teneral/owner/read-me.note"), "for the body to read\n")?;
    std::fs::write(home.join(".teneral/owner/consume-me.note"), "for the body to remove\n")?;
    Ok(ind)
}

/// The `.env` of a hostile individual whose model is `upstream`, behind the
/// kernel's proxy, with the real key.
pub fn proxied_env(upstream: &Upstream, extra: &str) -> String {
    format!(
        "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={SECRET}\n\
         TENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=0\nTENERAL_TEST_BACKOFF_MS=50\n\
         TENERAL_TEST_STOP_GRACE_SECONDS=2\n{extra}",
        upstream.base_url
    )
}

/// Starts `teneral run` on `ind` as a shell holding descriptor 7 on a 0600
/// file below a 0700 directory would (`7<secret`, not close-on-exec):
/// nothing the kernel runs may find it open.
pub fn start_holding_a_descriptor(ind: &Individual) -> Result<Kernel, Box<dyn std::error::Error>> {
    use std::os::unix::fs::PermissionsExt;
    let closed = ind.path().join(".teneral/auth/closed");
    std::fs::create_dir_all(&closed)?;
    let secret = closed.join("inherited");
    std::fs::write(&secret, format!("{SECRET}\n"))?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700))?;
    let log = ind.path().join("kernel.log");
    let out = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
    let child = Command::new("/bin/sh")
        .args(["-c", "exec 7<\"$0\" && exec \"$@\""])
        .arg(&secret)
        .arg(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()?;
    Ok(Kernel { child: Some(child), log })
}

/// Runs the hostile generation until it has tried every door; its reports.
/// The kernel holds an inherited descriptor ([`start_holding_a_descriptor`]).
pub fn run_generation(ind: &Individual) -> Result<(Kernel, Doors), Box<dyn std::error::Error>> {
    let kernel = start_holding_a_descriptor(ind)?;
    ind.wait_for("the hostile body's last report", LONG, |e| {
        e["type"] == "reply" && e["text"] == "every door tried"
    })?;
    let doors = ind
        .events("note")
        .into_iter()
        .filter(|e| e["kind"] == "door")
        .filter_map(|e| Some((e["data"]["door"].as_str()?.to_owned(), e["data"].clone())))
        .collect();
    Ok((kernel, doors))
}

#[test]
fn a_hostile_generation_finds_every_door_shut() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let upstream_dir = tempfile::tempdir()?;
    let upstream = Upstream::start(upstream_dir.path())?;
    let ind = hostile_individual(&proxied_env(&upstream, ""))?;
    let _agent = Agent::start(ind.path())?;
    let _credentials = Credentials::plant(ind.path())?;
    // The owner's evaluations (untracked: the kernel refuses to start when
    // git tracks them, since the agent's workspace is a clone): no body may
    // read or write them.
    std::fs::create_dir_all(ind.path().join("evals"))?;
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n[[check]]\nreply_contains = \"hello\"\n",
    )?;
    let install = std::fs::read(ind.path().join("body/src/main.rs"))?;
    let git_config = std::fs::read(ind.path().join(".git/config"))?;
    let (kernel, doors) = run_generation(&ind)?;
    use Want::*;
    // Writing an existing file of a read-only grant: refused by its mode
    // first when the body is its individual's identity (the kernel is
    // root), else by the read-only mount.
    let root = rustix::process::getuid().is_root();
    let denied = if root { EACCES } else { EROFS };
    let table = [
        ("workspace.write", Pass),
        ("soul.write", Pass),
        ("memory.write", Pass),
        ("inbox.write", Pass),
        ("tmp.write", Pass),
        ("journal.read", Pass),
        ("live.read", Pass),
        ("install.read", Pass),
        ("owner.read", Pass),
        ("owner.consume", Pass),
        ("model", Pass),
        ("cargo", Pass),
        ("install.write", Errno(denied)),
        ("install.create", Errno(EROFS)),
        ("live.write", Errno(denied)),
        // The kernel's journal and count stay root's files in the body's
        // own memory/: refused by their mode first, as the install's.
        ("journal.append", Errno(denied)),
        ("journal.truncate", Errno(denied)),
        ("fd.inherited", Errno(EBADF)),
        ("journal.replace", Errno(EBUSY)),
        ("journal.remove", Errno(EBUSY)),
        ("scorecard.read", Pass),
        ("scorecard.write", Errno(denied)),
        ("scorecard.replace", Errno(EBUSY)),
        ("evals_results.read", Pass),
        ("evals_results.write", Errno(denied)),
        ("evals_results.replace", Errno(EBUSY)),
        ("backlog.append", Errno(denied)),
        ("backlog.read", Pass),
        ("state.read", Errno(ENOENT)),
        ("evals.read", Errno(ENOENT)),
        ("evals.write", Errno(ENOENT)),
        ("state.write", Errno(ENOENT)),
        ("git.config", Errno(denied)),
        ("git.hook", Errno(EROFS)),
        ("git.ref", Errno(EROFS)),
        ("env.read", Errno(ENOENT)),
        ("auth.read", Errno(ENOENT)),
        ("auth.list", Errno(ENOENT)),
        ("kernel.environ", Errno(EACCES)),
        ("kernel.mem", Errno(EACCES)),
        ("owner.line", Errno(EACCES)),
        ("owner.accept", Errno(EACCES)),
        ("owner.dot_accept", Errno(EACCES)),
        ("owner.approve", Errno(EACCES)),
        ("owner.interrupt", Errno(EACCES)),
        ("owner.rename_in", Errno(EXDEV)),
        ("symlink.env", Errno(ENOENT)),
        ("symlink.state", Errno(ENOENT)),
        ("hardlink.env", Errno(ENOENT)),
        ("build.env_read", Errno(ENOENT)),
        ("build.network", Errno(ENETUNREACH)),
        ("build.ssh_agent", Errno(ENOENT)),
        ("build.journald", Errno(ENOENT)),
        // Of the cargo home only what a build reads is there, whoever runs.
        ("cargo.credentials", Errno(ENOENT)),
        ("build.cargo_credentials", Errno(ENOENT)),
        ("home.list", Pass),
        ("env.name", Errno(ENOENT)),
        ("ssh_agent", Errno(ENOENT)),
        ("journald", Errno(ENOENT)),
        ("proc.count", Pass),
    ];
    let mut table = table.to_vec();
    table.extend(gate::syscall_table());
    if root {
        // Root's body is not root: root's files refuse it by their modes.
        table.extend([("shadow.read", Errno(EACCES))]);
    }
    check(&doors, &table)?;
    check_proc(&doors)?;
    let listed = doors["home.list"]["detail"].as_str().unwrap_or_default().to_owned();
    let names: Vec<&str> = listed.split_whitespace().collect();
    for want in ["body", "memory", "soul", ".teneral"] {
        assert!(names.contains(&want), "{want} is listed at the root: {listed}");
    }
    for never in [".env", "kernel.log", "script.jsonl"] {
        assert!(!names.contains(&never), "{never} is not in the cage: {listed}");
    }

    let found = doors["secret.search"]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(found.contains(&format!("soul/decoy.txt: {DECOY}")), "the scan works: {found}");
    // The prefix alone is in the body's own source; the real key nowhere.
    assert!(!found.contains("sk-cagetest-real"), "the real key was found: {found}");
    let status = doors["self.status"]["detail"].as_str().unwrap_or_default().to_owned();
    for want in
        ["CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"]
    {
        assert!(status.contains(want), "{want} in {status}");
    }
    if root {
        // The individual's own identity, recorded machine-wide: neither
        // root nor nobody.
        let id = teneral::confine::identity::of(ind.path())?;
        assert!(id.uid != 0 && id.uid != teneral_cage::BODY_ID, "{id:?}");
        let uid = format!("Uid:\t{0}\t{0}\t{0}\t{0}", id.uid);
        assert!(status.contains(&uid), "root's body runs as its individual's identity: {status}");
    }
    let journal = std::fs::read_to_string(ind.path().join("memory/journal.jsonl"))?;
    assert!(!journal.contains(SECRET), "no secret reached the journal");
    // The kernel's count, written before the body started, and unchanged by it.
    let card: Value =
        serde_json::from_slice(&std::fs::read(ind.path().join("memory/scorecard.json"))?)?;
    assert!(card["generations"].is_array(), "{card}");
    assert_eq!(std::fs::read(ind.path().join("body/src/main.rs"))?, install);
    assert_eq!(std::fs::read(ind.path().join(".git/config"))?, git_config);
    let forged: Vec<String> =
        ind.owner_files().into_iter().filter(|f| f.contains("forged")).collect();
    assert!(forged.is_empty(), "no owner file was forged: {forged:?}");
    drop(kernel);
    Ok(())
}

/// `teneral-confine` confines only for a kernel built from its own sources:
/// one left behind by a build of `--bin teneral` alone is refused, loudly,
/// before anything runs (the kernel's own plans ask for what it has).
#[test]
fn a_helper_from_other_sources_confines_nothing() {
    let helper = env!("CARGO_BIN_EXE_teneral-confine");
    let marker = tempfile::tempdir().expect("a temporary directory");
    let ran = marker.path().join("ran");
    let out = Command::new(helper)
        .args(["confine", "--source", "0000000000000000", "--", "/bin/touch"])
        .arg(&ran)
        .output_within(SLOW)
        .expect("teneral-confine starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(teneral_cage::EXIT_USAGE), "{stderr}");
    assert!(stderr.contains("built from other sources"), "{stderr}");
    assert!(!ran.exists(), "the program ran");
    let argv = teneral::confine::host::helper_argv(
        Path::new(helper),
        vec!["--profile".into()],
        vec!["/bin/true".into()],
    );
    let source = [std::ffi::OsString::from("--source"), teneral_cage::SOURCE_ID.into()];
    assert_eq!(argv[2..4], source);
}
