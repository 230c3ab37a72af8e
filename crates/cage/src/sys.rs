//! The cage's only `unsafe` code: the raw system calls no safe wrapper
//! offers. `mount_setattr` on a detached copy of a granted tree, a child
//! cloned into a user namespace, `fcntl` for SIGIO on a pipe, killing a PID
//! namespace, the few calls the steps' timestamps need; leaving namespaces,
//! raising loopback, asking Linux for its Landlock ABI, loading a compiled
//! seccomp filter, forking while single-threaded, and the signal handling of
//! the cage's supervising processes.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::mount::{move_mount, open_tree, MoveMountFlags, OpenTreeFlags};

/// What a copy of a tree is mounted with ([`attach_tree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attrs {
    /// Read-only.
    ReadOnly,
    /// Writable, but no set-id bit nor device file means anything on it
    /// (`nosuid,nodev`).
    Writable,
}

/// Copies the tree at `source` (an absolute path without links) and mounts
/// the copy at `target`: one `open_tree`, one `mount_setattr`, one
/// `move_mount`. `attrs` apply to it
/// with every mount beneath it (recursively: a mount nested below a
/// read-only grant is read-only as well).
pub fn attach_tree(source: &Path, target: &Path, attrs: Attrs) -> io::Result<()> {
    // `source` is resolved already: a link on it now (swapped in since)
    // is refused, never mounted where it leads.
    let source = crate::identity::open_resolved(source)?;
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_RECURSIVE
        | OpenTreeFlags::AT_EMPTY_PATH;
    let tree = open_tree(&source, "", flags)?;
    let set = match attrs {
        Attrs::ReadOnly => libc::MOUNT_ATTR_RDONLY,
        Attrs::Writable => libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
    };
    let attr = libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let at = libc::AT_EMPTY_PATH | libc::AT_RECURSIVE;
    // SAFETY: `attr` lives across the call and its size is passed with it;
    // the path is a valid empty C string; the fd is open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            at,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    move_mount(&tree, "", rustix::fs::CWD, target, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)?;
    Ok(())
}

/// Has Linux send this process SIGIO when `fd` (a pipe's read end) becomes
/// readable, and makes reading it never block: the helper learns the
/// program's end from the cage's first process without waiting for that
/// process to exit (and to tear its namespaces down).
pub fn signal_when_readable(fd: &OwnedFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    unsafe {
        if libc::fcntl(raw, libc::F_SETOWN, libc::getpid()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags < 0
            || libc::fcntl(raw, libc::F_SETFL, flags | libc::O_ASYNC | libc::O_NONBLOCK) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sends SIGKILL to every process of this PID namespace but the caller
/// (the cage's first process). None left is no error.
pub fn kill_namespace() {
    // SAFETY: kill takes two integers and touches no memory of ours.
    let _ = unsafe { libc::kill(-1, libc::SIGKILL) };
}

/// A user namespace whose uid and gid maps are both `map` (the text of a
/// `uid_map`: `inside outside count` lines), as a file descriptor to join
/// with `setns`. The caller must be root of the machine's user namespace.
///
/// A child is cloned straight into a new user namespace (`clone` with
/// CLONE_NEWUSER makes it before the child ever runs), so this process
/// writes its maps and opens its namespace without waiting for it to be
/// scheduled; then it is killed. It is left for the caller to reap (its
/// exit status means nothing).
pub fn user_namespace_fd(map: &str) -> io::Result<OwnedFd> {
    // SAFETY: getpid takes nothing and touches no memory.
    let parent = unsafe { libc::getpid() };
    // SAFETY: a fork-like clone (no CLONE_VM: the child has its own copy of
    // memory); the child makes only raw, async-signal-safe system calls
    // (prctl, getppid, pause, _exit) and never returns into Rust code.
    let child = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_NEWUSER | libc::SIGCHLD,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if child == 0 {
        // SAFETY: see above. Killed with this process if it dies before it
        // kills the child (a helper killed in that window left the child
        // pausing for ever); if it died already, end now.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != parent {
                libc::_exit(0);
            }
            loop {
                libc::pause();
            }
        }
    }
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    let made = (|| {
        std::fs::write(format!("/proc/{child}/uid_map"), map)?;
        std::fs::write(format!("/proc/{child}/gid_map"), map)?;
        let ns = std::fs::File::open(format!("/proc/{child}/ns/user"))?;
        Ok(OwnedFd::from(ns))
    })();
    let pid = i32::try_from(child).unwrap_or(0);
    if pid > 0 {
        // SAFETY: kill takes two integers and touches no memory of ours.
        let _ = unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    made
}

/// Whether `fd` is an open descriptor of this process (it is not taken).
pub fn fd_is_open(fd: i32) -> bool {
    // SAFETY: fcntl F_GETFD reads the descriptor's flags and touches no memory.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> i128 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

/// One `write` of `bytes` to the raw descriptor `fd`, which the caller
/// knows open and never closes; what fails is let be.
pub fn write_raw(fd: i32, bytes: &[u8]) {
    // SAFETY: write reads `bytes.len()` bytes of a live slice.
    let _ = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Forks this process as a sibling (`clone` with `CLONE_PARENT`): the child
/// is the parent's parent's child, so the kernel that started the zygote
/// reaps and signals it as its own. `Some(pid)` here, `None` in the child.
///
/// Only the zygote calls it, which is single-threaded, so the child may run
/// any code.
pub fn fork_sibling() -> io::Result<Option<i32>> {
    // SAFETY: a fork-like clone (no CLONE_VM: the child has its own copy of
    // memory, and no other thread existed to hold a lock); it returns in
    // both processes like fork.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_PARENT | libc::SIGCHLD,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(i32::try_from(pid).map_err(io::Error::other)?)),
    }
}

/// Closes raw descriptor `fd` in a freshly forked child whose copy of the
/// owner (a socket the zygote holds) is never used again in it: the child
/// only ever exits or executes from here.
pub fn close_in_child(fd: i32) {
    // SAFETY: closes a number; the value owning it in this copy of memory
    // is never used (nor dropped) in the child.
    let _ = unsafe { libc::close(fd) };
}

/// Makes descriptor number `target` a copy of `fd` (without close-on-exec,
/// so the program inherits it).
pub fn dup_to(fd: &OwnedFd, target: i32) -> io::Result<()> {
    // SAFETY: dup2 takes two numbers; `fd` is open for the call's length.
    if unsafe { libc::dup2(fd.as_raw_fd(), target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Closes every descriptor of this process from 3 up but those in `keep`,
/// with one `close_range` for each gap between them.
pub fn close_all_but(keep: &[i32]) -> io::Result<()> {
    let mut kept: Vec<u32> = keep.iter().filter_map(|&fd| u32::try_from(fd).ok()).collect();
    kept.retain(|&fd| fd > 2);
    kept.sort_unstable();
    kept.dedup();
    let mut first = 3u32;
    for fd in kept.into_iter().chain(std::iter::once(u32::MAX)) {
        if fd > first {
            close_range(first, fd - 1, 0)?;
        }
        first = fd.saturating_add(1);
    }
    Ok(())
}

/// Marks descriptor `fd` close-on-exec (`on`) or not.
pub fn set_cloexec(fd: i32, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: fcntl F_SETFD on a number, with an integer argument only.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn close_range(first: u32, last: u32, flags: u32) -> io::Result<()> {
    // SAFETY: close_range takes three integers and touches no memory; the
    // descriptors it closes are owned by no value this process still uses
    // (the caller keeps those it holds).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
