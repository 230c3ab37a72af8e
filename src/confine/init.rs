//! The cage's processes when it has its own PID namespace.
//!
//! A new PID namespace takes effect for the children of the process that
//! made it, so the helper forks once it has made its namespaces:
//!
//! - the helper (outside, the pid the kernel started and signals) stays
//!   and supervises, without capabilities, with no_new_privs and the
//!   seccomp profile: every signal it may catch is passed on to the cage's
//!   first process, and it ends as that one ends (same exit status, or the
//!   same signal);
//! - the first process (pid 1 inside) builds the new root
//!   ([`super::root`]), forks the program's process, and then only reaps:
//!   it passes signals on to the program, collects every orphan of the
//!   namespace, and when the program ends, ends with its status. Its end
//!   ends every process left in the namespace;
//! - the program's process (pid 2) applies Landlock, drops capabilities,
//!   sets no_new_privs, loads seccomp and executes the program.
//!
//! The first process is not inside the Landlock domain the program gets, so
//! Landlock's scopes keep the program from signalling or tracing it (as it
//! does the kernel), and it drops its capabilities before it waits. It dies
//! with the helper (SIGKILL as its parent-death signal), so killing the
//! helper kills the cage.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

/// What the first process keeps from the fork: the mask to restore for the
/// program and the pipe on which it tells the helper the program's signal.
pub struct Inside {
    mask: libc::sigset_t,
    report: OwnedFd,
}

/// Forks the cage's first process. Returns in it; the helper never
/// returns: it supervises and exits as the first process does.
pub fn fork_first() -> Result<Inside, String> {
    let mask = crate::sys::block_signals().map_err(|e| format!("cannot block signals: {e}"))?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    match crate::sys::fork().map_err(|e| format!("cannot fork into the PID namespace: {e}"))? {
        Some(child) => {
            drop(write);
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

/// The helper's part: relays signals to `child`, then ends as it did.
fn supervise(child: i32, report: OwnedFd) -> ! {
    let pid = Pid::from_raw(child);
    if pid.is_none() {
        crate::sys::die_by(libc::SIGKILL)
    }
    // It only waits, reads a pipe and passes signals on from here: no
    // capability, no_new_privs and the seccomp profile, as the program.
    if let Err((status, e)) = super::helper::confine_supervisor() {
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
        if sig != libc::SIGCHLD {
            crate::sys::send_signal(child, sig);
            continue;
        }
        let Ok(Some((_, status))) = rustix::process::waitpid(pid, WaitOptions::NOHANG) else {
            continue;
        };
        let mut byte = [0u8; 1];
        let signalled = matches!(rustix::io::read(&report, &mut byte), Ok(1)) && byte[0] != 0;
        if signalled {
            crate::sys::die_by(i32::from(byte[0]));
        }
        end_as(status)
    }
}

/// The first process's part: forks the program's process, which runs
/// `confine_and_exec` (it returns only with the status of the step that
/// failed), and reaps until that process ends; then ends with its status.
pub fn run(inside: Inside, confine_and_exec: impl FnOnce() -> i32) -> ! {
    let program = match crate::sys::fork() {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(inside.report);
            if let Err(e) = crate::sys::restore_signals(&inside.mask) {
                eprintln!("teneral confine: signals: {e}");
                std::process::exit(super::EXIT_NAMESPACES);
            }
            std::process::exit(confine_and_exec())
        }
        Err(e) => {
            eprintln!("teneral confine: cannot fork the program: {e}");
            std::process::exit(super::EXIT_NAMESPACES)
        }
    };
    // Capabilities in the cage's user namespace are of no use from here.
    let _ = super::helper::drop_capabilities();
    loop {
        let sig = match crate::sys::wait_signal() {
            Ok(sig) => sig,
            Err(_) => std::process::exit(super::EXIT_NAMESPACES),
        };
        if sig != libc::SIGCHLD {
            crate::sys::send_signal(program, sig);
            continue;
        }
        while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
            if pid.as_raw_nonzero().get() == program {
                let sig = status.terminating_signal().unwrap_or(0);
                let byte = u8::try_from(sig).unwrap_or(0);
                let _ = rustix::io::write(&inside.report, &[byte]);
                end_as(status)
            }
        }
    }
}

fn end_as(status: WaitStatus) -> ! {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => std::process::exit(code),
        (None, Some(sig)) => std::process::exit(128 + sig),
        (None, None) => std::process::exit(super::EXIT_NAMESPACES),
    }
}
