//! Every child process of the kernel starts here, and is reaped here.
//!
//! [`spawn`] clears the environment and passes only what the caller lists,
//! gives the child an empty stdin (or the descriptor [`Spec::stdin`] names), no descriptor but its standard three
//! (whatever the kernel inherited without close-on-exec stays behind), its
//! own process group, and death with the kernel. [`Child::stop`] sends SIGTERM to the whole group, waits a grace
//! period, then SIGKILLs the group.
//!
//! The kernel is a child subreaper, so orphans of its children become its
//! own. One reaper ([`start_reaper`]) collects every exit with `waitpid(-1)`
//! and hands each to the [`Child`] that waits for it; exits of processes the
//! kernel never started (adopted orphans) are collected and dropped. Nothing
//! else in the kernel may wait for a child (no `std::process::Child::wait`,
//! no `tokio::process`), or it would race the reaper.
//!
//! A process that has children of its own besides these (a test binary, a
//! benchmark) starts [`start_reaper_of_own_children`] instead: it waits only
//! for the pids [`spawn`] started, and adopts no orphans.
//!
//! Death with the kernel reaches a child but not its own children; the
//! groups are listed so that none outlives the kernel ([`groups`]).

mod groups;
mod reaper;
mod through;

pub use groups::{
    keep_groups, keeper_main, stop_keeping_groups, sweep_groups_at_stop, sweep_leftover_groups,
    CHILDREN_PATH,
};
pub use reaper::{start_reaper, start_reaper_of_own_children};
pub use through::{goes_through_zygote, stop_using_zygote, use_zygote, zygote_launches};

use reaper::lock_registry;

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use teneral_cage::zygote::Zygote;
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// Where a child's output goes.
pub enum Output {
    Null,
    /// A pipe the caller reads from [`Child::stdout`] / [`Child::stderr`].
    Pipe,
    File(File),
}

/// What to start.
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The child's whole environment.
    pub env: Vec<(String, OsString)>,
    pub stdout: Output,
    pub stderr: Output,
    /// What the child reads on stdin; `None`: nothing (`/dev/null`).
    pub stdin: Option<OwnedFd>,
    /// A launch of the cage's helper held until the kernel lets it go: the
    /// read end of a pipe the zygote's launch reads to its end before it
    /// forks anything of the cage or runs the program
    /// (`teneral_cage::zygote::HOLD`). Only the zygote takes such a launch;
    /// [`spawn`] refuses one it would execute.
    pub hold: Option<OwnedFd>,
}

impl Spec {
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            stdout: Output::Null,
            stderr: Output::Null,
            stdin: None,
            hold: None,
        }
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn env(mut self, k: &str, v: impl Into<OsString>) -> Self {
        self.env.push((k.to_owned(), v.into()));
        self
    }
}

/// A started child, in a process group of its own (its pid is the group id).
pub struct Child {
    pub pid: u32,
    /// The cage's first process when the zygote's spare made it before the
    /// launch was asked for: the child's own child, which a unit that
    /// adopts the launch takes in the child's stead
    /// (`teneral_cage::zygote::Launched`).
    pub first: Option<u32>,
    exit: Option<oneshot::Receiver<Exit>>,
    done: Option<Exit>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

/// Starts a child as [`Spec`] says. See the module doc for what it gets.
pub fn spawn(spec: Spec) -> io::Result<Child> {
    let spec = match through::spawn(spec) {
        Ok(started) => return started,
        Err(spec) => spec,
    };
    if spec.hold.is_some() {
        return Err(io::Error::other(
            "a held launch is started by the cage's zygote only, and the zygote is gone; \
             the kernel's log says why (a restart of the kernel starts a new one)",
        ));
    }
    let mut cmd = Command::new(&spec.program);
    let stdin = spec.stdin.map_or_else(Stdio::null, Stdio::from);
    cmd.args(&spec.args).current_dir(&spec.cwd).env_clear().stdin(stdin).process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let want_out = matches!(spec.stdout, Output::Pipe);
    let want_err = matches!(spec.stderr, Output::Pipe);
    cmd.stdout(stdio(spec.stdout));
    cmd.stderr(stdio(spec.stderr));
    crate::sys::die_with_parent(&mut cmd);
    let (tx, rx) = oneshot::channel();
    // Holding the registry while the child starts means the reaper cannot
    // collect its exit before the waiter is in place.
    let mut reg = lock_registry();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    reg.insert(pid as i32, tx);
    // Listed before the reaper can see it end (it waits for the registry).
    groups::started(pid);
    drop(reg);
    let stdout = if want_out { child.stdout.take().map(receiver).transpose()? } else { None };
    let stderr = if want_err { child.stderr.take().map(receiver).transpose()? } else { None };
    Ok(Child { pid, first: None, exit: Some(rx), done: None, stdout, stderr })
}

/// Starts the cage's zygote of the helper program `helper`, built from the
/// cage's sources `source` (`teneral_cage::SOURCE_ID`, unless a benchmark
/// names another build's), to be handed to [`use_zygote`]. Call it from the
/// thread that starts every launch: the zygote dies with it.
pub fn start_zygote(helper: &std::path::Path, source: &str) -> io::Result<Zygote> {
    Zygote::start(helper, source, start_zygote_process)
}

/// Starts `helper args...` (the zygote) with `socket` as its stdin: a
/// process group of its own, death with this thread, nothing else
/// inherited. Its exit is collected as an adopted orphan's.
fn start_zygote_process(
    helper: &std::path::Path,
    args: &[&str],
    socket: OwnedFd,
) -> io::Result<u32> {
    let mut cmd = Command::new(helper);
    cmd.args(args).env_clear().stdin(Stdio::from(socket)).stdout(Stdio::null()).process_group(0);
    crate::sys::die_with_parent(&mut cmd);
    Ok(cmd.spawn()?.id())
}

/// Starts `teneral keep-children <file>` with `stdin` as its stdin
/// ([`groups`]). Not through [`spawn`]: the keeper must outlive the kernel,
/// so it has no death signal, and a group of its own that no one else
/// signals. Its exit is collected by the reaper like an adopted orphan's.
fn start_keeper(file: &std::path::Path, kernel: &str, stdin: OwnedFd) -> io::Result<()> {
    let exe = std::env::current_exe()?;
    Command::new(exe)
        .arg("keep-children")
        .arg(file)
        .arg(kernel)
        .env_clear()
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .map(drop)
}

fn stdio(out: Output) -> Stdio {
    match out {
        Output::Null => Stdio::null(),
        Output::Pipe => Stdio::piped(),
        Output::File(f) => Stdio::from(f),
    }
}

fn receiver(fd: impl Into<OwnedFd>) -> io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(fd.into())
}

impl Child {
    /// Waits for the child to end. Cancel-safe: dropping the future before
    /// the exit arrives loses nothing (`select!` loops rely on that).
    pub async fn wait(&mut self) -> Exit {
        if let Some(done) = self.done {
            return done;
        }
        let exit = match self.exit.as_mut() {
            Some(rx) => rx.await.unwrap_or(Exit::Code(-1)),
            None => Exit::Code(-1),
        };
        self.exit = None;
        self.done = Some(exit);
        exit
    }

    /// Whether it has ended, without waiting.
    pub fn try_exit(&mut self) -> Option<Exit> {
        if self.done.is_none() {
            if let Some(rx) = self.exit.as_mut() {
                if let Ok(exit) = rx.try_recv() {
                    self.done = Some(exit);
                    self.exit = None;
                }
            }
        }
        self.done
    }

    /// Sends `sig` to the child's whole process group.
    pub fn signal(&self, sig: Signal) {
        if let Some(pgid) = Pid::from_raw(self.pid as i32) {
            let _ = kill_process_group(pgid, sig);
        }
    }

    /// SIGTERM to the group, `grace` to end, then SIGKILL to the group.
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(exit) = self.try_exit() {
            self.signal(Signal::KILL);
            return exit;
        }
        self.signal(Signal::TERM);
        let exit = match tokio::time::timeout(grace, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => {
                self.signal(Signal::KILL);
                self.wait().await
            }
        };
        // Whatever the child left running in its group goes with it.
        self.signal(Signal::KILL);
        exit
    }
}

impl Drop for Child {
    /// A child dropped before it ended (its waiter was cancelled, say by the
    /// kernel being asked to stop during a check) is killed with its group.
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            self.signal(Signal::KILL);
        }
    }
}

/// Kills the process group of a body that a killed kernel left behind,
/// when `pid` still runs the same process (its start time matches).
pub fn kill_leftover(pid: u32, start_time: u64) -> bool {
    if process_start_time(pid) != Some(start_time) {
        return false;
    }
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = kill_process_group(p, Signal::KILL);
        let _ = rustix::process::kill_process(p, Signal::KILL);
        return true;
    }
    false
}

/// The start time of a process in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), which tells a process from a later one with the same pid.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A `Command` for a unit test that needs a process of its own outside
/// the reaper's care; the one place a test of the kernel makes one.
#[cfg(test)]
pub(crate) fn command_for_tests(program: &str) -> Command {
    Command::new(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child this process started with `Command` and never gave to
    /// [`spawn`] keeps its exit for its own waiter, even when it ended
    /// before the reaper of own children next woke.
    #[test]
    fn the_reaper_of_own_children_leaves_other_children_to_their_waiters() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.expect("a current-thread runtime builds");
        rt.block_on(async {
            start_reaper_of_own_children().expect("the reaper starts");
            let mut foreign =
                Command::new("/bin/sh").args(["-c", "exit 3"]).spawn().expect("sh starts");
            // Wait until it is a zombie, without collecting it.
            let stat = format!("/proc/{}/stat", foreign.id());
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
                assert!(std::time::Instant::now() < deadline, "sh never ended");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // One of ours ends: the reaper wakes, and must take only that one.
            let mut ours = spawn(Spec::new("/bin/true", "/")).expect("true starts");
            assert_eq!(ours.wait().await, Exit::Code(0));
            let status = foreign.wait().expect("the foreign child's exit is still ours to take");
            assert_eq!(status.code(), Some(3));
        });
    }
}
