//! The kernel's only `unsafe` code: what must run in a forked child before it
//! executes its program.

use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{getppid, Pid, Signal};

/// Makes the child receive SIGKILL when the thread that spawned it ends,
/// and end at once if the parent is already gone by the time it runs.
///
/// The kernel spawns from its main thread only (a current-thread runtime),
/// so "the thread ends" means "the kernel ends".
pub fn die_with_parent(cmd: &mut Command) {
    let parent = Pid::from_raw(std::process::id() as i32);
    // SAFETY: the closure runs in the child between fork and exec. It calls
    // only two raw system calls through rustix (prctl, getppid), which are
    // async-signal-safe, allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if getppid() != parent {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}
