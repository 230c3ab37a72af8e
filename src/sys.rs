//! The kernel's only `unsafe` code: what must run in a forked child before it
//! executes its program, and the few system calls of the confinement helper
//! ([`crate::confine`]) that no safe wrapper offers (leaving namespaces,
//! raising loopback, asking Linux for its Landlock ABI), the pidfd of a
//! socket's peer, and libgit2's option to sync what it writes.

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

/// Leaves the namespaces named by `flags` for new ones of this process's own.
///
/// Only the confinement helper calls it, from its main thread before any
/// other thread exists, and never with `CLONE_FILES`.
pub fn unshare(flags: rustix::thread::UnshareFlags) -> std::io::Result<()> {
    // SAFETY: rustix marks unshare unsafe because CLONE_FILES would let
    // threads disagree on which file descriptors exist. The helper is single
    // threaded when it calls this, and callers pass only namespace flags.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(std::io::Error::from)
}

/// Brings the loopback interface of the current network namespace up.
pub fn loopback_up() -> std::io::Result<()> {
    use rustix::net::{socket, AddressFamily, SocketType};
    use std::os::fd::AsRawFd;
    let sock = socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    // SAFETY: ifreq is plain old data; all zero is a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into the
    // ifreq we own, which outlives the call; the socket is open.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the union's flags member was just written by the kernel.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: as above; SIOCSIFFLAGS only reads the ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The Landlock ABI version the running Linux offers; 0 when it has none
/// (not built in, or not enabled at boot).
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the
    // call only returns a number; it reads and writes no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// Installs a compiled seccomp filter (classic BPF, 8 bytes an instruction
/// in the machine's byte order) on this thread. no_new_privs must be set.
pub fn load_seccomp_bpf(bpf: &[u8]) -> std::io::Result<()> {
    if bpf.is_empty() || bpf.len() % 8 != 0 || bpf.len() / 8 > usize::from(u16::MAX) {
        return Err(std::io::Error::other("not a BPF program"));
    }
    let mut program: Vec<libc::sock_filter> = bpf
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    // SAFETY: fprog points at `program`, which lives until after the call,
    // and its length is the number of instructions in it; Linux copies the
    // program before returning.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Forks this process: `Some(child pid)` in the parent, `None` in the child.
///
/// Only the confinement helper calls it, while it is single-threaded, so
/// the child may go on to run any code (no lock can be held by a thread
/// that the fork left behind).
pub fn fork() -> std::io::Result<Option<i32>> {
    // SAFETY: fork is safe to call; what makes it dangerous is running code
    // in the child of a multi-threaded parent, and the helper has one thread.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// Whether a new process could leave the namespaces named by `flags` (for
/// example, under another sandbox whose seccomp filter denies new user
/// namespaces, it cannot). Tried in a forked child that makes two system
/// calls and exits; its answer comes back through a pipe, so a reaper that
/// collects the child first takes nothing from the probe.
pub fn can_unshare(flags: rustix::thread::UnshareFlags) -> bool {
    let Ok((read, write)) = rustix::pipe::pipe() else { return false };
    // SAFETY: the child runs only raw system calls (unshare, write, _exit),
    // which are async-signal-safe, so forking a process that has other
    // threads is sound: the child touches no lock or allocator.
    match unsafe { libc::fork() } {
        -1 => false,
        0 => {
            // SAFETY: see above; CLONE_FILES is never among `flags`.
            let ok = unsafe { rustix::thread::unshare_unsafe(flags) }.is_ok();
            let _ = rustix::io::write(&write, &[u8::from(ok)]);
            // SAFETY: _exit ends the child without running any of the
            // parent's exit handlers or destructors.
            unsafe { libc::_exit(0) }
        }
        pid => {
            drop(write);
            let mut answer = [0u8; 1];
            let ok = matches!(rustix::io::read(&read, &mut answer), Ok(1)) && answer[0] == 1;
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                // The kernel's reaper may have collected it already.
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            }
            ok
        }
    }
}

/// The signals a cage's supervising processes pass on to the program:
/// every one but those that stop or kill outright (which cannot be caught)
/// and SIGCHLD, which they wait for themselves.
fn relayed_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigfillset and sigdelset only write
    // the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for sig in [libc::SIGKILL, libc::SIGSTOP] {
            libc::sigdelset(&mut set, sig);
        }
        set
    }
}

/// Blocks every signal the cage's supervisors relay and SIGCHLD, so that
/// they queue for [`wait_signal`] instead of acting; returns the mask to
/// restore in a child before it executes its program.
pub fn block_signals() -> std::io::Result<libc::sigset_t> {
    let set = relayed_signals();
    // SAFETY: both sets are owned, valid sigset_t values; the helper is
    // single-threaded, so the process mask is this thread's.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Restores the signal mask `old` (from [`block_signals`]).
pub fn restore_signals(old: &libc::sigset_t) -> std::io::Result<()> {
    // SAFETY: `old` is a valid set; a null old-set pointer is allowed.
    if unsafe { libc::sigprocmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits for one of the blocked signals and returns its number.
pub fn wait_signal() -> std::io::Result<i32> {
    let set = relayed_signals();
    loop {
        // SAFETY: `set` is valid; a null siginfo pointer is allowed.
        let sig = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if sig > 0 {
            return Ok(sig);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Ends this process by `sig`, as the program it supervised ended, so that
/// whoever waits for it sees the same signal.
pub fn die_by(sig: i32) -> ! {
    // SAFETY: resetting a disposition to default, unblocking and raising
    // are plain system calls on this process; _exit follows only when the
    // signal did not end it (a signal that cannot kill by default).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}

/// Sends `sig` to the process `pid`; a process already gone is no error.
pub fn send_signal(pid: i32, sig: i32) {
    // SAFETY: kill takes two integers and touches no memory of ours.
    let _ = unsafe { libc::kill(pid, sig) };
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
