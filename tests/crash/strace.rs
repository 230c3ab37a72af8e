//! The system-call mode's kill: a program of the individual's (the kernel,
//! the launcher with its kernel in process, or the owner's `teneralctl`)
//! under `strace`, which sends it SIGKILL at the Nth invocation of one
//! durability call (`-e inject=<call>:signal=KILL:when=N`), or only records
//! those calls for the dry run. `-f` follows its threads (strace counts each
//! thread's calls apart); `-b execve` lets go of every child at its exec, so
//! the body, cargo, git, the keeper, a generation's own kernel and the
//! clients are neither counted nor killed. Writes count only on the journal
//! and the state (`-P`, matched on the file a descriptor names).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use teneral::launcher::contract;

use crate::common::*;

/// The durability calls the mode kills at, in the order its table lists them.
pub const CALLS: [&str; 7] =
    ["rename", "renameat2", "fsync", "fdatasync", "unlink", "unlinkat", "write"];

/// The files whose writes count.
fn written_files(home: &Path) -> [std::path::PathBuf; 2] {
    [home.join("memory/journal.jsonl"), home.join(".teneral/state.json")]
}

/// What `strace` does to the program it runs.
#[derive(Clone, Debug)]
pub enum Strace {
    /// Kill it at the `n`th invocation of `call` in any one of its threads.
    Kill { call: String, n: u32 },
    /// Record every durability call to `file`.
    Record { file: PathBuf },
}

/// The program a round runs under `strace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traced {
    /// `teneral kernel`, as the launcher starts the install's kernel.
    Kernel,
    /// `teneral run`: the launcher, with the install's kernel in its process.
    Launcher,
    /// `teneralctl back`, the owner's client that changes state.
    Back,
}

/// `strace` set up as `how` says for a program on the individual at `home`,
/// before the program or the process it attaches to. With `only` named, every call counts
/// only on those paths; else writes count on the journal and the state.
fn strace(home: &Path, how: &Strace, only: &[PathBuf]) -> Command {
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-b", "execve", "-qq"]);
    for path in only {
        cmd.arg("-P").arg(path);
    }
    match how {
        Strace::Kill { call, n } => {
            if call == "write" && only.is_empty() {
                for file in written_files(home) {
                    cmd.arg("-P").arg(file);
                }
            }
            cmd.args(["-o", "/dev/null", "-e"]).arg(format!("trace={call}"));
            cmd.arg("-e").arg(format!("inject={call}:signal=KILL:when={n}"));
        }
        Strace::Record { file } => {
            cmd.args(["-y", "-o"]).arg(file);
            cmd.arg("-e").arg(format!("trace={}", CALLS.join(",")));
        }
    }
    cmd
}

/// Starts the kernel on `ind` under `strace`: as the launcher starts it
/// (`teneral kernel`, with the launcher's version and the install's kernel
/// named), so that the calls counted are the kernel's own, or the launcher
/// itself (`teneral run`). The child (strace) and the traced process's pid.
pub fn start(
    ind: &Individual,
    how: &Strace,
    traced: Traced,
    only: &[PathBuf],
) -> Result<(Kernel, u32), Box<dyn std::error::Error>> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ind.path().join("kernel.log"))?;
    let mut cmd = strace(ind.path(), how, only);
    cmd.arg("--").arg(teneral());
    match traced {
        Traced::Kernel => {
            cmd.arg("kernel")
                .env(contract::VERSION_VARIABLE, contract::LAUNCHER_VERSION.to_string())
                .env(contract::KERNEL_VARIABLE, "install");
        }
        Traced::Launcher => {
            cmd.arg("run");
        }
        Traced::Back => return Err("the client is run with `back`, not started".into()),
    }
    let child = cmd
        .arg("--dir")
        .arg(ind.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    traced_kernel(child, ind)
}

/// The kernel that `child`, a `strace` just started on `ind`, runs: the
/// child and the kernel's pid. strace forks children of its own to probe
/// ptrace first: the kernel is the child that runs the kernel's binary.
pub fn traced_kernel(
    child: Child,
    ind: &Individual,
) -> Result<(Kernel, u32), Box<dyn std::error::Error>> {
    let tracer = child.id();
    let kernel = Kernel { child: Some(child), log: ind.path().join("kernel.log") };
    let exe = std::fs::canonicalize(teneral())?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let path = format!("/proc/{tracer}/task/{tracer}/children");
        let children = std::fs::read_to_string(path).unwrap_or_default();
        let kernel_pid = children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe));
        if let Some(pid) = kernel_pid {
            return Ok((kernel, pid));
        }
        if Instant::now() > end {
            return Err("strace started no kernel within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts the kernel on `ind` as [`start`] does, but plainly, and then
/// attaches `strace` to it (`-p`, all its threads), counting only the calls
/// on the paths `only` names for the kernel's pid (a staging name holds
/// it; strace matches a rename on its first path only). The kernel (the
/// child), its pid and the tracer, attached before this returns.
pub fn attach(
    ind: &Individual,
    how: &Strace,
    only: &dyn Fn(u32) -> Vec<PathBuf>,
) -> Result<(Kernel, u32, Child), Box<dyn std::error::Error>> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ind.path().join("kernel.log"))?;
    let child = Command::new(teneral())
        .arg("kernel")
        .arg("--dir")
        .arg(ind.path())
        .env(contract::VERSION_VARIABLE, contract::LAUNCHER_VERSION.to_string())
        .env(contract::KERNEL_VARIABLE, "install")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .spawn()?;
    let pid = child.id();
    let kernel = Kernel { child: Some(child), log: ind.path().join("kernel.log") };
    let tracer = strace(ind.path(), how, &only(pid))
        .arg("-p")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let traced = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .is_some_and(|t| t.trim() != "0");
        if traced {
            return Ok((kernel, pid, tracer));
        }
        if Instant::now() > end {
            return Err("strace did not attach to the kernel within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `teneralctl back --wait <wait> [<to>]` on the individual at `home`, under
/// `strace` as `how` says (plainly when `None`), in a process group of its
/// own (with strace's, when traced) so that [`finish`] can end it whole.
/// Its words go to the individual's `kernel.log`.
pub fn back(
    home: &Path,
    how: Option<&Strace>,
    to: Option<&str>,
    wait: u64,
) -> std::io::Result<Child> {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(home.join("kernel.log"))?;
    let mut cmd = match how {
        Some(how) => {
            let mut cmd = strace(home, how, &[]);
            cmd.arg("--").arg(teneralctl());
            cmd
        }
        None => Command::new(teneralctl()),
    };
    cmd.args(["back", "--wait", &wait.to_string(), "--dir"]).arg(home).args(to);
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).process_group(0).spawn()
}

/// Waits at most `limit` for a child started by [`back`]; how it ended
/// (under strace, as the client did: SIGKILL only at the injected call),
/// or `None` when its group had to be killed at the limit.
pub fn finish(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break,
        }
    }
    let group = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let _ = child.wait();
    None
}

/// From a record: for each call, the most any one thread made (strace's
/// `when=N` counts each thread apart). Writes count on the journal and the
/// state only, unless the record was made on `only` those paths.
pub fn most_per_thread(record: &str, home: &Path, only: &[PathBuf]) -> BTreeMap<String, u32> {
    let files: Vec<String> =
        if only.is_empty() { written_files(home).to_vec() } else { only.to_vec() }
            .iter()
            .map(|f| format!("<{}>", f.display()))
            .collect();
    let mut per: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for line in record.lines() {
        // A line starts with the thread's id once strace traces more
        // than one; a program that never made a second has none.
        let (tid, rest) = match line.split_once(' ') {
            Some((tid, rest)) if tid.bytes().all(|b| b.is_ascii_digit()) => (tid, rest),
            _ => ("", line),
        };
        let rest = rest.trim_start();
        let Some(call) = CALLS.iter().find(|c| rest.starts_with(&format!("{c}("))) else {
            continue;
        };
        if *call == "write" && !files.iter().any(|f| rest.contains(f.as_str())) {
            continue;
        }
        *per.entry((call, tid)).or_default() += 1;
    }
    let mut most: BTreeMap<String, u32> = BTreeMap::new();
    for ((call, _), n) in per {
        let m = most.entry(call.to_owned()).or_default();
        *m = (*m).max(n);
    }
    most
}
