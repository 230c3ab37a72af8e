//! The cage's zygote (`teneral-confine zygote`): the same walls as the
//! executed helper, a network namespace made ahead of need used by one
//! launch only, and no launch outliving the thread (the kernel) that
//! started the zygote.

use std::ffi::OsString;
use std::io::{Read, Seek};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitOptions};
use serde_json::Value;
use teneral::confine::{self, Profile};
use teneral_cage::zygote::{Request, Zygote};

use super::*;

fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_teneral-confine"))
}

pub(super) fn zygote() -> std::io::Result<Zygote> {
    teneral::spawn::start_zygote(&helper(), teneral_cage::SOURCE_ID)
}

/// A launch's output files and pid.
struct Launched {
    pid: u32,
    /// The cage's first process, when a spare made it ahead.
    first: Option<u32>,
    stdout: std::fs::File,
    stderr: std::fs::File,
}

impl Launched {
    fn read(file: &mut std::fs::File) -> String {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        text
    }

    fn stdout(&mut self) -> String {
        Self::read(&mut self.stdout)
    }

    /// Waits for its end: the exit status (or 128 + signal), and output.
    fn wait(mut self) -> (i32, String, String) {
        let pid = Pid::from_raw(self.pid as i32).expect("a pid");
        let status = rustix::process::waitpid(Some(pid), WaitOptions::empty())
            .expect("the launch is this process's child")
            .map(|(_, s)| s.exit_status().or(s.terminating_signal().map(|s| 128 + s)))
            .and_then(|c| c)
            .unwrap_or(-1);
        let out = self.stdout();
        (status, out, Self::read(&mut self.stderr))
    }
}

/// Has `zygote` run `argv` confined by `profile` in `cwd`, with a check's
/// bare environment.
fn launch(
    zygote: &Zygote,
    profile: &Profile,
    argv: Vec<OsString>,
    cwd: &Path,
    tmp: &Path,
) -> Result<Launched, Box<dyn std::error::Error>> {
    launch_forwarding(zygote, profile, &[], argv, cwd, tmp)
}

/// [`launch`], with the kernel's loopback ports `forward` relayed in.
fn launch_forwarding(
    zygote: &Zygote,
    profile: &Profile,
    forward: &[u16],
    argv: Vec<OsString>,
    cwd: &Path,
    tmp: &Path,
) -> Result<Launched, Box<dyn std::error::Error>> {
    launch_with(zygote, profile, forward, argv, cwd, tmp, vec![])
}

/// [`launch_forwarding`], the request carrying `more` descriptors too.
fn launch_with(
    zygote: &Zygote,
    profile: &Profile,
    forward: &[u16],
    argv: Vec<OsString>,
    cwd: &Path,
    tmp: &Path,
    more: Vec<(i32, OwnedFd)>,
) -> Result<Launched, Box<dyn std::error::Error>> {
    let options = confine::Options {
        exe: Some(helper()),
        forward: forward.to_vec(),
        ..confine::Options::default()
    };
    let mut args = confine::wrap_with(profile, &options, argv)?;
    assert_eq!(Path::new(&args.remove(0)), helper(), "the lean helper is the program");
    let mut env: Vec<(OsString, OsString)> = vec![("TMPDIR".into(), tmp.into())];
    for k in ["PATH", "HOME", "LANG", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"] {
        if let Some(v) = std::env::var_os(k) {
            env.push((k.into(), v));
        }
    }
    let stdout = tempfile::tempfile()?;
    let stderr = tempfile::tempfile()?;
    let null = std::fs::File::open("/dev/null")?;
    let mut fds = vec![
        (0, OwnedFd::from(null)),
        (1, OwnedFd::from(stdout.try_clone()?)),
        (2, OwnedFd::from(stderr.try_clone()?)),
    ];
    fds.extend(more);
    let request = Request { args, cwd: cwd.to_owned(), env, fds };
    let teneral_cage::zygote::Launched { pid, first } = zygote.launch(&request)?;
    Ok(Launched { pid, first, stdout, stderr })
}

pub(super) fn checkout() -> Result<(tempfile::TempDir, PathBuf, PathBuf), Box<dyn std::error::Error>>
{
    let dir = tempfile::Builder::new().prefix("tnl-zygote").tempdir()?;
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let checkout = dir.path().to_owned();
    Ok((dir, checkout, tmp))
}

const PYTHON: &str = "/usr/bin/python3";

/// A launch that listens on loopback (TCP and an abstract Unix socket),
/// proves it can reach both itself, and stays until killed.
const LISTENER: &str = "
import os, socket, time
print('ns', os.readlink('/proc/self/ns/net'), flush=True)
s = socket.socket(); s.bind(('127.0.0.1', 47613)); s.listen()
u = socket.socket(socket.AF_UNIX); u.bind('\\0tnl-zygote-test'); u.listen()
socket.create_connection(('127.0.0.1', 47613)).close()
c = socket.socket(socket.AF_UNIX); c.connect('\\0tnl-zygote-test'); c.close()
print('listening', flush=True)
time.sleep(60)
";

/// A launch that tries to reach the listener's sockets.
const PROBE: &str = "
import os, socket
print('ns', os.readlink('/proc/self/ns/net'))
print('tcp', socket.socket().connect_ex(('127.0.0.1', 47613)))
print('abstract', socket.socket(socket.AF_UNIX).connect_ex('\\0tnl-zygote-test'))
";

fn ns_of(out: &str) -> String {
    out.lines().find_map(|l| l.strip_prefix("ns ")).unwrap_or_default().to_owned()
}

/// Two launches of the zygote, each taking a spare's network namespace,
/// see different namespaces, and neither reaches the other's loopback
/// listener nor its abstract socket (ECONNREFUSED: nothing listens in its
/// own namespace; the same namespace would have connected, or met
/// Landlock's scope with EPERM).
#[test]
fn each_launch_of_the_zygote_has_a_network_namespace_of_its_own() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    const ECONNREFUSED: &str = "111";
    let zygote = zygote()?;
    let (_dir, checkout, tmp) = checkout()?;
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let python = |code: &str| vec![OsString::from(PYTHON), "-c".into(), code.into()];
    let mut listener = launch(&zygote, &profile, python(LISTENER), &checkout, &tmp)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listener.stdout().contains("listening") {
        let pid = Pid::from_raw(listener.pid as i32).ok_or("no pid")?;
        if Instant::now() > deadline
            || rustix::process::waitpid(Some(pid), WaitOptions::NOHANG)?.is_some()
        {
            return Err(format!(
                "the listener never listened: {}{}",
                listener.stdout(),
                Launched::read(&mut listener.stderr)
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut seen = vec![ns_of(&listener.stdout())];
    for _ in 0..2 {
        let (status, out, err) = launch(&zygote, &profile, python(PROBE), &checkout, &tmp)?.wait();
        assert_eq!(status, 0, "{out}{err}");
        assert!(out.contains(&format!("tcp {ECONNREFUSED}\n")), "{out}");
        assert!(out.contains(&format!("abstract {ECONNREFUSED}\n")), "{out}");
        seen.push(ns_of(&out));
    }
    rustix::process::kill_process_group(
        Pid::from_raw(listener.pid as i32).ok_or("no pid")?,
        rustix::process::Signal::KILL,
    )?;
    let _ = listener.wait();
    let own = std::fs::read_link("/proc/self/ns/net")?.to_string_lossy().into_owned();
    assert!(seen.iter().all(|ns| ns.starts_with("net:[")), "{seen:?}");
    let mut distinct = seen.clone();
    distinct.push(own);
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "three live launches and the test: {seen:?}");
    Ok(())
}

/// The hostile gate check, launched by the zygote (cargo builds it there
/// too), finds every door shut exactly as under the executed helper.
#[test]
fn a_hostile_gate_check_launched_by_the_zygote_finds_every_door_shut() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let me = std::process::id();
    if me < 100 {
        return Err(format!("the test is pid {me}; see gate.rs for why it must not be").into());
    }
    let zygote = zygote()?;
    let ind = hostile_individual(&format!("TENERAL_PROVIDER=standin\nTENERAL_API_KEY={SECRET}\n"))?;
    let (_dir, checkout, tmp) = checkout()?;
    for (path, content) in hostile_body() {
        let p = checkout.join(path);
        std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
        std::fs::write(p, content)?;
    }
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let build = ["cargo", "build", "--offline", "--locked", "--quiet"].map(OsString::from);
    let (status, out, err) =
        launch(&zygote, &profile, build.to_vec(), &checkout.join("body"), &tmp)?.wait();
    assert_eq!(status, 0, "cargo builds inside the gate:\n{out}{err}");
    let binary = checkout.join("body/target/debug/teneral-body");
    let argv =
        vec![binary.into_os_string(), "gate".into(), ind.path().into(), me.to_string().into()];
    let _agent = Agent::start(ind.path())?;
    let (status, out, err) = launch(&zygote, &profile, argv, &checkout, &tmp)?.wait();
    assert_eq!(status, 0, "{out}{err}");
    let doors: Doors = out
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
        ("individual.env", Errno(ENOENT)),
        ("individual.soul", Errno(ENOENT)),
        ("individual.write", Errno(ENOENT)),
        ("individual.list", Errno(ENOENT)),
        ("ssh_agent", Errno(ENOENT)),
        ("journald", Errno(ENOENT)),
        ("proc.count", Pass),
    ];
    table.extend(gate::syscall_table());
    for row in table.iter_mut().filter(|(door, _)| *door == "kernel.signal") {
        row.1 = Errno(ESRCH);
    }
    check(&doors, &table)?;
    check_proc(&doors)?;
    assert!(!ind.path().join("gate-was-here").exists());
    Ok(())
}

/// The zygote and its launches die with the thread that started the
/// zygote, as the executed helper dies with the kernel: when that thread
/// ends, the launch is killed and its whole process group is gone.
#[test]
fn no_launch_of_the_zygote_outlives_its_kernel() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let (_dir, checkout, tmp) = checkout()?;
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let (c, t) = (checkout.clone(), tmp.clone());
    // The "kernel": a thread that starts the zygote, launches a long
    // program and ends.
    let kernel = std::thread::spawn(move || -> Result<(u32, u32), String> {
        let zygote = zygote().map_err(|e| e.to_string())?;
        let argv = ["/bin/sh", "-c", "echo started; exec sleep 600"].map(OsString::from).to_vec();
        let mut launched = launch(&zygote, &profile, argv, &c, &t).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !launched.stdout().contains("started") {
            if Instant::now() > deadline {
                return Err("the launch never started".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The zygote is not dropped (that would close its socket): only
        // the thread's end is left to end it.
        let zygote_pid = zygote.pid();
        std::mem::forget(zygote);
        Ok((launched.pid, zygote_pid))
    });
    let (pid, zygote_pid) = kernel.join().map_err(|_| "the kernel thread panicked")??;
    let deadline = Instant::now() + Duration::from_secs(10);
    for (name, pid) in [("the launch", pid), ("the zygote", zygote_pid)] {
        let p = Pid::from_raw(pid as i32).ok_or("no pid")?;
        let status = loop {
            if let Some((_, status)) = rustix::process::waitpid(Some(p), WaitOptions::NOHANG)? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
                return Err(format!("{name} outlived its kernel by 10 s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.terminating_signal(), Some(libc::SIGKILL), "{name}: {status:?}");
    }
    let group = Pid::from_raw(pid as i32).ok_or("no pid")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match rustix::process::test_kill_process_group(group) {
            Err(rustix::io::Errno::SRCH) => break,
            _ if Instant::now() > deadline => {
                return Err(format!("process group {pid} still has members").into())
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    drop(tmp);
    Ok(())
}

/// A launch that fits a spare goes from the kernel straight to the spare
/// the zygote handed over: with the zygote killed it still starts, and
/// only the launch after it finds the zygote gone.
#[test]
fn a_launch_that_fits_goes_straight_to_the_spare_the_kernel_holds() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let (_dir, checkout, tmp) = checkout()?;
    let zygote = zygote()?;
    let gate = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let sh = |text: &str| vec![OsString::from("/bin/sh"), "-c".into(), text.into()];
    // A forwarded port fits no spare: the zygote forks this launch, while
    // the kernel takes the spare handed over at the start and keeps it.
    let fresh = launch_forwarding(&zygote, &gate, &[47614], sh("echo fresh"), &checkout, &tmp)?;
    let (status, out, err) = fresh.wait();
    assert_eq!((status, out.as_str()), (0, "fresh\n"), "{err}");
    let pid = Pid::from_raw(zygote.pid() as i32).ok_or("no pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::KILL)?;
    rustix::process::waitpid(Some(pid), WaitOptions::empty())?;
    let straight = launch(&zygote, &gate, sh("echo straight"), &checkout, &tmp)?;
    let (status, out, err) = straight.wait();
    assert_eq!((status, out.as_str()), (0, "straight\n"), "the spare took it: {err}");
    let after = launch(&zygote, &gate, sh("echo after"), &checkout, &tmp);
    let kind = after.err().and_then(|e| e.downcast::<std::io::Error>().ok()).map(|e| e.kind());
    assert_eq!(kind, Some(std::io::ErrorKind::BrokenPipe), "the next launch finds the zygote gone");
    Ok(())
}

/// A launch held on a pipe (`zygote::HOLD`, as the systemd runner holds one
/// until its scope has adopted it) runs nothing until the kernel writes to
/// the pipe and closes it; one whose pipe is closed with nothing written
/// ends without running its program, with the namespaces step's status. A
/// spare's launch names its first process (the helper's child, pid 1 of the
/// cage's PID namespace), which waits with its root built and nothing
/// forked; a fresh launch names none, and waits before it forks the cage.
#[test]
fn a_held_launch_runs_only_once_let_go() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let (_dir, checkout, tmp) = checkout()?;
    let zygote = zygote()?;
    let gate = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
    let sh = |text: &str| vec![OsString::from("/bin/sh"), "-c".into(), text.into()];
    let held =
        |text: &str, forward: &[u16]| -> Result<(Launched, OwnedFd), Box<dyn std::error::Error>> {
            let (hold, release) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
            let hold = vec![(teneral_cage::zygote::HOLD, hold)];
            Ok((launch_with(&zygote, &gate, forward, sh(text), &checkout, &tmp, hold)?, release))
        };
    let status_of = |pid: u32, field: &str| -> String {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or("");
        line.split_once(':')
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    for forward in [&[][..], &[47615][..]] {
        let (mut waiting, release) = held("echo ran", forward)?;
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(waiting.stdout(), "", "nothing runs while it is held");
        match (forward.is_empty(), waiting.first) {
            (true, Some(first)) => {
                assert_eq!(status_of(first, "PPid"), waiting.pid.to_string(), "the helper's child");
                let nspid = status_of(first, "NSpid");
                assert!(nspid.ends_with(" 1"), "pid 1 of the cage's namespace: {nspid}");
                let children = format!("/proc/{first}/task/{first}/children");
                let children = std::fs::read_to_string(children)?;
                assert_eq!(children.trim(), "", "the program's process is not forked yet");
                let mnt = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt"));
                assert_ne!(
                    mnt(&first.to_string())?,
                    mnt("self")?,
                    "its cage is made while it waits"
                );
            }
            (false, None) => {
                let children = format!("/proc/{0}/task/{0}/children", waiting.pid);
                let children = std::fs::read_to_string(children)?;
                assert_eq!(children.trim(), "", "a fresh launch forks nothing while held");
            }
            (spare, first) => {
                panic!("a spare's launch ({spare}) names its first process: {first:?}")
            }
        }
        rustix::io::write(&release, b"adopted\n")?;
        drop(release);
        let (status, out, err) = waiting.wait();
        assert_eq!((status, out.as_str()), (0, "ran\n"), "{err}");
    }

    let (given_up, release) = held("echo ran anyway", &[])?;
    drop(release);
    let (status, out, err) = given_up.wait();
    assert_eq!(status, teneral_cage::EXIT_NAMESPACES, "{out}{err}");
    assert_eq!(out, "", "the program never ran");
    assert!(err.contains("gave this launch up"), "{err}");
    Ok(())
}
