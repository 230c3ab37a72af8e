//! The body's only `unsafe` code: stop signals, process groups, pipes and
//! the allocator's settings, via libc.
//!
//! Stop signals (SIGTERM from the kernel, SIGINT at a terminal) are blocked in
//! every thread and taken by one thread with `sigwait`, so no handler runs at
//! an arbitrary point. Children do not inherit the block: std's spawn clears
//! the signal mask in the child before it executes.

use std::io;

/// A pipe, both ends close-on-exec: (reading end, writing end). What
/// `std::io::pipe` gives, for the Rust 1.85 the body promises (it came in
/// 1.87).
pub fn pipe() -> io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened by pipe2 and are owned by
    // nothing else; each File takes one and closes it when dropped.
    Ok(unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) })
}

fn stop_set() -> libc::sigset_t {
    // SAFETY: sigemptyset fully initialises the set before sigaddset reads
    // it; both only write the local set, and the signal numbers are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks SIGTERM and SIGINT in this thread and every thread it starts
/// later. Call it first thing in `main`, before any thread exists.
pub fn block_stop_signals() -> io::Result<()> {
    let set = stop_set();
    // SAFETY: `set` is an initialised sigset_t; a null old-set pointer is
    // allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Waits until SIGTERM or SIGINT is pending and takes it; returns its number.
pub fn wait_stop_signal() -> i32 {
    let set = stop_set();
    loop {
        let mut signal: libc::c_int = 0;
        // SAFETY: `set` is initialised and `signal` is a valid place to write.
        let rc = unsafe { libc::sigwait(&set, &mut signal) };
        if rc == 0 {
            return signal;
        }
    }
}

/// Kills every process in the group `pgid` at once (SIGKILL).
pub fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else { return };
    if pgid > 1 {
        // SAFETY: kill has no memory effects; a negative pid names the
        // group, and pgid > 1 keeps it away from "every process" (-1).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Makes every thread allocate from glibc's one main arena. Each tool call
/// runs in a thread of its own, and without this each such thread could
/// leave an arena behind, its freed pages still resident. Call it first
/// thing in `main`, before any thread exists.
pub fn one_malloc_arena() {
    // SAFETY: mallopt only sets an allocator parameter; no other thread
    // exists yet, so nothing allocates at the same time.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands the heap's free pages back to Linux: a turn's requests and tool
/// output are freed when it ends, and the body then rests for as long as
/// its owner is away.
pub fn trim_heap() {
    // SAFETY: malloc_trim takes the allocator's own locks and releases only
    // memory no allocation holds.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
