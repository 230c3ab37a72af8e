//! The kernel's only `unsafe` code: what must run in a forked child before it
//! executes its program, a few calls for the kernel's own memory, the pidfd
//! of a socket's peer, libgit2's option to sync what it writes, and the CPU
//! time a process used. The
//! cage's system calls are the cage crate's (`teneral_cage`'s `sys`).

use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{getppid, Pid, Signal};

/// Makes the child receive SIGKILL when the thread that spawned it ends,
/// and end at once if the parent is already gone by the time it runs; no
/// descriptor but its standard ones crosses its exec.
///
/// The kernel spawns from its main thread only (a current-thread runtime),
/// so "the thread ends" means "the kernel ends".
pub fn die_with_parent(cmd: &mut Command) {
    let parent = Pid::from_raw(std::process::id() as i32);
    // SAFETY: the closure runs in the child between fork and exec. It calls
    // only raw system calls (prctl, getppid, close_range), which are
    // async-signal-safe, allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if getppid() != parent {
                return Err(rustix::io::Errno::SRCH.into());
            }
            // Nothing the kernel inherited without close-on-exec reaches a child.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
}

/// Asks Linux to reclaim the pages of `[start, start + len)` now
/// (`MADV_PAGEOUT`, Linux 5.4 and later). A page another process also maps
/// is left alone; a page touched again comes back, a file's from the file.
pub fn page_out(start: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: MADV_PAGEOUT is a hint to reclaim: it never changes what any
    // address reads (unlike MADV_DONTNEED), so no reference anywhere is
    // invalidated; an unmapped range fails with ENOMEM and changes nothing.
    let r = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Hands the free memory of glibc's heap back to Linux (the high-water mark
/// of a busy start); a no-op on another C library.
pub fn trim_heap() {
    // SAFETY: malloc_trim takes the allocator's own locks and frees only
    // memory no allocation holds.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes every thread allocate from glibc's one main arena, instead of an
/// arena of its own for each thread that allocates (each keeps pages
/// resident). Called first thing in `main`, before any thread exists.
pub fn one_malloc_arena() {
    // SAFETY: mallopt sets an allocator parameter; called before any other
    // thread exists, nothing allocates concurrently.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Makes libgit2 sync what it writes into a git directory (a ref's lock
/// file before it takes the ref's place, a loose object, a pack and its
/// index) and the directory it lands in, so that a power cut leaves a ref
/// whole and every object a ref, the state or the journal names
/// (`GIT_OPT_ENABLE_FSYNC_GITDIR`; git2 offers no safe call for it).
/// Called first thing in `main`, before any thread uses libgit2.
pub fn sync_git_writes() {
    // libgit2 takes options only once initialised; git2 initialises it in
    // any of its calls, this one included (it sets what is already the
    // default).
    git2::opts::strict_hash_verification(true);
    // SAFETY: git_libgit2_opts with GIT_OPT_ENABLE_FSYNC_GITDIR reads one
    // int argument, given, and sets a global flag; no other thread uses
    // libgit2 yet. It fails only for an option the library does not know,
    // and the libgit2 git2 builds knows this one.
    unsafe {
        libgit2_sys::git_libgit2_opts(libgit2_sys::GIT_OPT_ENABLE_FSYNC_GITDIR as libc::c_int, 1);
    }
}

/// `SO_PEERPIDFD`: asm-generic's number, which all but SPARC use.
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERPIDFD: libc::c_int = 77;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERPIDFD: libc::c_int = 0x56;

/// A pidfd of the process at the other end of a connected Unix socket, the
/// one that connected (`SO_PEERPIDFD`, Linux 6.5 and later). `ESRCH`: that
/// process has ended already; `ENOPROTOOPT`: a Linux without the option.
pub fn peer_pidfd(socket: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the int we own and
    // its new length into `len`; both outlive the call.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if fd < 0 || len as usize != std::mem::size_of::<libc::c_int>() {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: Linux just made this descriptor for us (close-on-exec); nothing
    // else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The CPU time used so far, user and system, in microseconds: by this
/// process (all its threads), or with `children` by its children that have
/// ended and been waited for, and theirs (`getrusage`).
pub fn cpu_us(children: bool) -> (u64, u64) {
    let who = if children { libc::RUSAGE_CHILDREN } else { libc::RUSAGE_SELF };
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own, which outlives the call; it
    // fails only for an unknown `who`, and leaves the zeros then.
    unsafe { libc::getrusage(who, &mut usage) };
    let us = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(t.tv_usec).unwrap_or(0)
    };
    (us(usage.ru_utime), us(usage.ru_stime))
}
