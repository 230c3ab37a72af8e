//! The one reaper of the kernel's children: every exit is collected here
//! and handed to the [`super::Child`] that waits for it (see the module
//! doc of [`super`]).

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use rustix::process::{Pid, WaitOptions, WaitStatus};
use tokio::sync::oneshot;

use super::{groups, Exit};

fn registry() -> &'static Mutex<HashMap<i32, oneshot::Sender<Exit>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<i32, oneshot::Sender<Exit>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(super) fn lock_registry() -> std::sync::MutexGuard<'static, HashMap<i32, oneshot::Sender<Exit>>>
{
    registry().lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Set once any reaper of every child ran: from then on no other waiter in
/// this process is safe, and the reapers all take every exit.
static REAPS_ALL: AtomicBool = AtomicBool::new(false);

/// Becomes a child subreaper and starts the task that reaps every child.
/// Call once, inside the runtime, before the first [`super::spawn`]. For the kernel
/// only: a process with other children uses [`start_reaper_of_own_children`].
pub fn start_reaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(
        Pid::from_raw(std::process::id() as i32).ok_or_else(|| io::Error::other("no pid"))?,
    ))
    .map_err(io::Error::from)?;
    REAPS_ALL.store(true, Ordering::SeqCst);
    reap_on_sigchld()
}

/// Starts the task that collects the exits of the children [`super::spawn`]
/// started, and of no other: a test binary or a benchmark that also runs
/// commands of its own (`Command::output`) keeps their exits. Call inside
/// the runtime, before the first [`super::spawn`]; calling it in several runtimes
/// is fine.
pub fn start_reaper_of_own_children() -> io::Result<()> {
    reap_on_sigchld()
}

fn reap_on_sigchld() -> io::Result<()> {
    let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
    tokio::spawn(async move {
        loop {
            if REAPS_ALL.load(Ordering::SeqCst) {
                reap_all();
            } else {
                reap_own();
            }
            if sigchld.recv().await.is_none() {
                break;
            }
        }
    });
    Ok(())
}

/// Collects the children [`super::spawn`] started that have ended. A child is
/// registered before it can end unseen: [`super::spawn`] holds the registry while
/// it starts one, and a SIGCHLD after that wakes this again.
fn reap_own() {
    let pids: Vec<i32> = lock_registry().keys().copied().collect();
    for pid in pids {
        let Some(pid_t) = Pid::from_raw(pid) else { continue };
        if let Ok(Some((_, status))) = rustix::process::waitpid(Some(pid_t), WaitOptions::NOHANG) {
            deliver(pid, exit_of(status));
        }
    }
}

/// Collects every child that has ended and hands each exit to its waiter.
fn reap_all() {
    loop {
        // `wait` is waitpid(-1): any child. (`waitpid(None)` would be waitpid(0),
        // this process group only, and every child has a group of its own.)
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => deliver(pid.as_raw_nonzero().get(), exit_of(status)),
            Ok(None) | Err(_) => return,
        }
    }
}

fn exit_of(status: WaitStatus) -> Exit {
    if let Some(sig) = status.terminating_signal() {
        Exit::Signal(sig)
    } else {
        Exit::Code(status.exit_status().unwrap_or(-1))
    }
}

fn deliver(pid: i32, exit: Exit) {
    // An adopted orphan has no waiter; its exit is dropped. A child of ours
    // is always registered before the reaper can see it (spawn holds the lock).
    let waiter = lock_registry().remove(&pid);
    if let Some(tx) = waiter {
        let _ = tx.send(exit);
        groups::ended(pid as u32);
    }
}
