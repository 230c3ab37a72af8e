//! The cage's processes when it has its own PID namespace.
//!
//! A new PID namespace takes effect for the children of the process that
//! made it, so the helper forks once it has made its namespaces:
//!
//! - the helper (outside, the pid the kernel started and signals) stays
//!   and supervises, without capabilities, with no_new_privs and the
//!   seccomp profile: every signal it may catch is passed on to the cage's
//!   first process, and it ends as the program ended (same exit status, or
//!   the same signal) as soon as the first process reports it on a pipe;
//! - the first process (pid 1 inside) builds the new root
//!   ([`crate::root`]), forks the program's process, and then only reaps:
//!   it passes signals on to the program, collects every orphan of the
//!   namespace, and when the program ends, kills every process left in the
//!   namespace, reports the program's status to the helper and waits to be
//!   killed by the helper's end. So the namespaces are torn down by this
//!   process's end, after the helper's: unmounting a mount tree waits for
//!   an RCU grace period (a millisecond or more on a loaded machine), which
//!   the kernel waiting for the helper then does not see;
//! - the program's process (pid 2) applies Landlock, drops capabilities,
//!   sets no_new_privs, loads seccomp and executes the program.
//!
//! The first process is not inside the Landlock domain the program gets, so
//! Landlock's scopes keep the program from signalling or tracing it (as it
//! does the kernel), and it drops every capability but CAP_KILL before it
//! waits. It dies
//! with the helper (SIGKILL as its parent-death signal), so killing the
//! helper kills the cage.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use rustix::thread::CapabilitySet;

/// The program's process's end of the word that the new root is finished
/// (the old root detached, the tmpfs read-only).
pub struct RootReady(OwnedFd);

impl RootReady {
    /// Waits for the first process to finish the new root. `Err` when it
    /// ended without saying so (it failed, and ends the cage): then nothing
    /// may be executed.
    pub fn wait(self) -> Result<(), String> {
        let mut byte = [0u8; 1];
        loop {
            match rustix::io::read(&self.0, &mut byte) {
                Ok(1) if byte[0] == 1 => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => return Err("the new root was not finished".into()),
                Err(e) => return Err(format!("waiting for the new root: {e}")),
            }
        }
    }
}

/// What the first process keeps from the fork: the mask to restore for the
/// program and the pipe on which it tells the helper the program's signal.
pub struct Inside {
    mask: libc::sigset_t,
    report: OwnedFd,
}

impl Inside {
    /// The descriptor the first process keeps for its report.
    pub fn fd(&self) -> i32 {
        self.report.as_raw_fd()
    }
}

/// Forks the cage's first process. Returns in it; the helper never
/// returns: it closes every descriptor but its end of the report's pipe,
/// its standard ones and the benchmark's, supervises and exits as the
/// first process does.
pub fn fork_first() -> Result<Inside, String> {
    let mask = crate::sys::block_signals().map_err(|e| format!("cannot block signals: {e}"))?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    crate::sys::signal_when_readable(&read).map_err(|e| format!("pipe: {e}"))?;
    match crate::sys::fork().map_err(|e| format!("cannot fork into the PID namespace: {e}"))? {
        Some(child) => {
            drop(write);
            // What else this copy of memory owns is never used nor dropped
            // in it again: the helper only supervises from here.
            let keep: Vec<i32> =
                std::iter::once(read.as_raw_fd()).chain(crate::steps::fd()).collect();
            if let Err(e) = crate::sys::close_all_but(&keep) {
                eprintln!("teneral confine: supervise: close_range: {e}");
                crate::sys::send_signal(child, libc::SIGKILL);
                std::process::exit(crate::EXIT_USAGE)
            }
            supervise(child, read)
        }
        None => {
            drop(read);
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                .map_err(|e| format!("cannot die with the helper: {e}"))?;
            Ok(Inside { mask, report: write })
        }
    }
}

/// The helper's part: relays signals to `child`, and ends as the program
/// did once `child` reports it (or as `child` did, should it end first).
fn supervise(child: i32, report: OwnedFd) -> ! {
    let pid = Pid::from_raw(child);
    if pid.is_none() {
        crate::sys::die_by(libc::SIGKILL)
    }
    // It only waits, reads a pipe and passes signals on from here: no
    // capability, no_new_privs and the seccomp profile, as the program.
    if let Err((status, e)) = crate::helper::confine_supervisor() {
        eprintln!("teneral confine: supervise: {e}");
        crate::sys::send_signal(child, libc::SIGKILL);
        std::process::exit(status)
    }
    loop {
        let sig = match crate::sys::wait_signal() {
            Ok(sig) => sig,
            Err(e) => {
                eprintln!("teneral confine: supervise: {e}");
                crate::sys::send_signal(child, libc::SIGKILL);
                crate::sys::die_by(libc::SIGKILL)
            }
        };
        match read_report(&report) {
            Report::Ended(end) => end_with(end),
            // The first process is gone without a word: it ends the cage.
            Report::Closed if sig == libc::SIGIO => continue,
            Report::Closed | Report::Nothing => {}
        }
        if sig == libc::SIGIO {
            // Not the pipe's: someone else's, passed on as any other.
            crate::sys::send_signal(child, sig);
            continue;
        }
        if sig != libc::SIGCHLD {
            crate::sys::send_signal(child, sig);
            continue;
        }
        if let Ok(Some((_, status))) = rustix::process::waitpid(pid, WaitOptions::NOHANG) {
            end_as(status)
        }
    }
}

/// How the program ended, as the first process reports it on the pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exited(u8),
    Signalled(u8),
}

enum Report {
    Ended(End),
    /// The pipe has nothing yet.
    Nothing,
    /// The first process closed it without a report.
    Closed,
}

fn read_report(report: &OwnedFd) -> Report {
    let mut bytes = [0u8; 2];
    match rustix::io::read(report, &mut bytes) {
        Ok(2) if bytes[0] == 1 => Report::Ended(End::Signalled(bytes[1])),
        Ok(2) => Report::Ended(End::Exited(bytes[1])),
        Ok(_) => Report::Closed,
        Err(_) => Report::Nothing,
    }
}

fn end_with(end: End) -> ! {
    match end {
        End::Exited(code) => std::process::exit(i32::from(code)),
        End::Signalled(sig) => crate::sys::die_by(i32::from(sig)),
    }
}

/// The first process's part: forks the program's process, which runs
/// `confine_and_exec` (it returns only with the status of the step that
/// failed), then finishes the new root (`finish_root`: detaching the old
/// one waits for an RCU grace period, which the program's process spends on
/// its own steps meanwhile) and tells the program's process it is done
/// ([`RootReady`]); then reaps until that process ends, and ends with its
/// status. Should `finish_root` fail, the cage ends with
/// [`crate::EXIT_NAMESPACES`] and the program never runs.
pub fn run(
    inside: Inside,
    finish_root: impl FnOnce() -> Result<(), String>,
    confine_and_exec: impl FnOnce(RootReady) -> i32,
) -> ! {
    let (ready_read, ready_write) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
    {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("teneral confine: root: pipe: {e}");
            std::process::exit(crate::EXIT_NAMESPACES)
        }
    };
    let program = match crate::sys::fork() {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(inside.report);
            drop(ready_write);
            if let Err(e) = crate::sys::restore_signals(&inside.mask) {
                eprintln!("teneral confine: signals: {e}");
                std::process::exit(crate::EXIT_NAMESPACES);
            }
            std::process::exit(confine_and_exec(RootReady(ready_read)))
        }
        Err(e) => {
            eprintln!("teneral confine: cannot fork the program: {e}");
            std::process::exit(crate::EXIT_NAMESPACES)
        }
    };
    drop(ready_read);
    if let Err(e) = finish_root() {
        // Ending here kills the program's process with the PID namespace,
        // before it executed anything (it waits for the word below).
        eprintln!("teneral confine: root: {e}");
        std::process::exit(crate::EXIT_NAMESPACES)
    }
    // A write that fails means the program's process has ended already (one
    // of its steps failed): its status is reported below. Should it be
    // waiting still, closing the pipe without the word ends it unexecuted.
    let _ = rustix::io::write(&ready_write, &[1]);
    drop(ready_write);
    // Of the capabilities only the one to kill what the program leaves
    // behind is of use from here (root's body is its individual's identity).
    let _ = crate::helper::keep_only(CapabilitySet::KILL);
    loop {
        let sig = match crate::sys::wait_signal() {
            Ok(sig) => sig,
            Err(_) => std::process::exit(crate::EXIT_NAMESPACES),
        };
        if sig != libc::SIGCHLD {
            crate::sys::send_signal(program, sig);
            continue;
        }
        while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
            if pid.as_raw_nonzero().get() == program {
                report_and_wait(&inside.report, status)
            }
        }
    }
}

/// The program ended with `status`: what it left behind is killed, the
/// helper told, and this process waits for the helper's end to end it
/// (its parent-death signal), reaping what dies meanwhile. It ends by
/// itself if the helper has gone already, or within a second.
fn report_and_wait(report: &OwnedFd, status: WaitStatus) -> ! {
    crate::steps::mark("program ended");
    crate::sys::kill_namespace();
    let end = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => [0, u8::try_from(code).unwrap_or(u8::MAX)],
        (None, Some(sig)) => [1, u8::try_from(sig).unwrap_or(0)],
        (None, None) => [0, u8::try_from(crate::EXIT_NAMESPACES).unwrap_or(u8::MAX)],
    };
    if !matches!(rustix::io::write(report, &end), Ok(2)) {
        end_as(status)
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while std::time::Instant::now() < deadline {
        while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    end_as(status)
}

fn end_as(status: WaitStatus) -> ! {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => std::process::exit(code),
        (None, Some(sig)) => std::process::exit(128 + sig),
        (None, None) => std::process::exit(crate::EXIT_NAMESPACES),
    }
}
