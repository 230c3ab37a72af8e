//! The zygote: one `teneral-confine zygote` per kernel that forks each
//! confined launch, so that no launch pays for executing the helper, and
//! whose spare has made the costly namespaces before the launch is asked
//! for. This module is the whole of it: the messages on its socket, the
//! zygote's own loop, and the kernel's side ([`Zygote`]), which the kernel's
//! spawn module starts and sends each launch of the helper through.
//!
//! A launch is a [`Request`]: the helper's arguments (the plan and the
//! program), the working directory, the whole environment and the
//! descriptors the launch gets (stdin, stdout, stderr and the benchmark's),
//! sent over a Unix stream socket, the descriptors by `SCM_RIGHTS`. The
//! zygote answers with the pid of the launch's process.
//!
//! - The zygote is single-threaded, reads requests on its stdin (a Unix
//!   socket only the kernel holds) and answers each with the pid of the
//!   launch's process. Every process it makes is cloned with `CLONE_PARENT`
//!   (`sys::fork_sibling`): the kernel's child, reaped and signalled by the
//!   kernel, in a process group of its own, with SIGKILL as its
//!   parent-death signal; so no cage outlives the kernel, exactly as a
//!   helper the kernel executed itself.
//! - The spare: one launch made ahead, which has made its own network
//!   namespace (loopback up), the user namespace (not root) or the one
//!   its task limit counts in (root) and a PID namespace, and has forked
//!   into it: the helper supervises outside (`init`), and the
//!   cage's first process waits for one request on a socket of its own. The
//!   zygote hands that socket and the helper's pid to the kernel, in a
//!   message framed as a request (`spare <pid>`, the socket as its one
//!   descriptor). The kernel sends a request that fits straight to the
//!   spare once it has said it is ready (one hand-off, not two; the word
//!   carries the first process's credentials, so the kernel learns its
//!   pid, which a unit that adopts the launch is given), moves the helper
//!   into the launch's cgroups first, and asks for the next spare
//!   (`spare`). A spare takes exactly one launch: a namespace made ahead is
//!   never used by two, so no check can reach another through loopback or
//!   abstract sockets. A spare that has died gives end of file, and its
//!   request goes to the zygote. Only the first process takes the
//!   request's descriptors: the helper's own rare words (a supervisor that
//!   cannot confine itself) go to the zygote's stderr.
//! - A launch the spare cannot take (the host's network, forwarded ports,
//!   a test's pretended missing feature) is forked fresh and makes every
//!   namespace itself, as the executed helper does.
//!
//! Either way the launch then runs the helper's own code
//! (`helper::run`) with the request's descriptors, environment
//! and working directory: every wall is the same.
//!
//! Framing, on a stream: an 8-byte header (payload length, descriptor
//! count, little-endian u32 each) sent together with the descriptors, then
//! the payload: `u32` counts and length-prefixed byte strings. The answer
//! is an `i32` pid, or 0 followed by a length-prefixed message.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer};
use rustix::net::{SendAncillaryMessage, SendFlags};
use rustix::process::{Pid, Signal};

use crate::plan::{Net, Plan};
use crate::{helper, init, sys, CGROUP_PROCS, EXIT_NAMESPACES, EXIT_USAGE, SOURCE_ID};

// The messages on the zygote's socket.

/// The number a request gives its hold, when it has one: a pipe on which
/// the kernel lets the launch go once a transient unit of the user manager
/// has adopted it (the launch side is this module's `Hold`). It is taken
/// out of the request's descriptors and never reaches the program.
pub const HOLD: i32 = -1;

/// The most descriptors one launch may carry.
pub const MAX_FDS: usize = 8;
/// The largest payload accepted (a generation's plan names every tracked
/// file; this is far above any).
const MAX_PAYLOAD: usize = 16 << 20;

/// One confined launch, as the zygote receives it.
#[derive(Debug)]
pub struct Request {
    /// The helper's arguments after its program name (`confine`, the plan,
    /// `--`, the program and its arguments).
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The launch's whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// Descriptors and the numbers they get in the launch (0, 1, 2, ...).
    pub fds: Vec<(i32, OwnedFd)>,
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

/// The payload of `request` (its descriptors travel beside it).
pub fn encode(request: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    put_count(&mut out, request.args.len());
    for arg in &request.args {
        put(&mut out, arg.as_bytes());
    }
    put(&mut out, request.cwd.as_os_str().as_bytes());
    put_count(&mut out, request.env.len());
    for (k, v) in &request.env {
        put(&mut out, k.as_bytes());
        put(&mut out, v.as_bytes());
    }
    put_count(&mut out, request.fds.len());
    for (target, _) in &request.fds {
        out.extend_from_slice(&target.to_le_bytes());
    }
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u32(&mut self) -> Result<u32, String> {
        let (head, rest) = self.0.split_first_chunk::<4>().ok_or("the request ends early")?;
        self.0 = rest;
        Ok(u32::from_le_bytes(*head))
    }

    fn bytes(&mut self) -> Result<OsString, String> {
        let len = self.u32()? as usize;
        if len > self.0.len() {
            return Err("the request ends early".into());
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(OsString::from_vec(head.to_vec()))
    }

    fn count(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        // Every item takes at least four bytes: a count past that is a lie.
        if n > self.0.len() / 4 {
            return Err("the request counts more than it holds".into());
        }
        Ok(n)
    }
}

/// A request from its payload and the descriptors that came with it, in
/// the order sent.
pub fn decode(payload: &[u8], fds: Vec<OwnedFd>) -> Result<Request, String> {
    let mut r = Reader(payload);
    let args = (0..r.count()?).map(|_| r.bytes()).collect::<Result<Vec<_>, _>>()?;
    let cwd = PathBuf::from(r.bytes()?);
    let env = (0..r.count()?)
        .map(|_| Ok((r.bytes()?, r.bytes()?)))
        .collect::<Result<Vec<_>, String>>()?;
    let targets = (0..r.count()?).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
    if targets.len() != fds.len() || !r.0.is_empty() {
        return Err(format!(
            "the request names {} descriptors and carries {}",
            targets.len(),
            fds.len()
        ));
    }
    let fds = targets.into_iter().map(|t| t as i32).zip(fds).collect();
    Ok(Request { args, cwd, env, fds })
}

/// Sends `request` on `socket`.
pub fn send(socket: &UnixStream, request: &Request) -> io::Result<()> {
    let mut socket = socket; // Read and Write are implemented for &UnixStream
    let payload = encode(request);
    let fds: Vec<BorrowedFd<'_>> = request.fds.iter().map(|(_, fd)| fd.as_fd()).collect();
    if fds.len() > MAX_FDS {
        return Err(io::Error::other(format!("a launch carries at most {MAX_FDS} descriptors")));
    }
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&(fds.len() as u32).to_le_bytes());
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("the descriptors do not fit their buffer"));
    }
    let sent = rustix::net::sendmsg(socket, &[IoSlice::new(&header)], &mut control, flags())?;
    socket.write_all(&header[sent..])?;
    socket.write_all(&payload)
}

fn flags() -> SendFlags {
    // A zygote or a spare that has gone must not kill the sender by SIGPIPE.
    SendFlags::NOSIGNAL
}

/// Receives one request; `None` when the other end closed the socket.
pub fn recv(socket: &UnixStream) -> io::Result<Option<Request>> {
    let mut socket = socket; // Read and Write are implemented for &UnixStream
    let mut header = [0u8; 8];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut header)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => break got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if got.bytes == 0 {
        return Ok(None);
    }
    socket.read_exact(&mut header[got.bytes..])?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(io::Error::other(format!("a request of {len} bytes is too long")));
    }
    let mut payload = vec![0u8; len];
    socket.read_exact(&mut payload)?;
    decode(&payload, fds).map(Some).map_err(io::Error::other)
}

/// Answers a request: the launch's pid, or why there is none.
pub fn answer(socket: &UnixStream, result: Result<i32, String>) -> io::Result<()> {
    let mut socket = socket; // Read and Write are implemented for &UnixStream
    let mut out = Vec::new();
    match result {
        Ok(pid) => out.extend_from_slice(&pid.to_le_bytes()),
        Err(message) => {
            out.extend_from_slice(&0i32.to_le_bytes());
            put(&mut out, message.as_bytes());
        }
    }
    socket.write_all(&out)
}

/// Reads the zygote's answer to a request.
fn read_answer(socket: &UnixStream) -> io::Result<u32> {
    let mut socket = socket; // Read and Write are implemented for &UnixStream
    let mut pid = [0u8; 4];
    socket.read_exact(&mut pid)?;
    match i32::from_le_bytes(pid) {
        pid if pid > 0 => Ok(pid as u32),
        _ => {
            let mut len = [0u8; 4];
            socket.read_exact(&mut len)?;
            let len = (u32::from_le_bytes(len) as usize).min(64 << 10);
            let mut text = vec![0u8; len];
            socket.read_exact(&mut text)?;
            Err(io::Error::other(format!(
                "the cage's zygote could not start the launch: {}",
                String::from_utf8_lossy(&text)
            )))
        }
    }
}

/// The first argument of a message about a spare: the kernel asking for
/// one, the zygote handing one over (`spare <pid>`, with its socket).
pub const SPARE: &str = "spare";

/// A message about a spare ([`SPARE`]), framed as a request.
pub fn spare_message(rest: Vec<OsString>, fds: Vec<(i32, OwnedFd)>) -> Request {
    let args = std::iter::once(OsString::from(SPARE)).chain(rest).collect();
    Request { args, cwd: PathBuf::from("/"), env: Vec::new(), fds }
}

// The zygote.

/// What a spare made ahead of its launch.
#[derive(Default)]
pub struct Ahead {
    /// The user namespace root's body counts its task limit in.
    pub counted: Option<OwnedFd>,
    /// This process is in a user namespace of its own already.
    pub user: bool,
    /// This process is in a network namespace of its own, loopback up.
    pub net: bool,
    /// This process is the first of a PID namespace of its own, and the
    /// helper outside supervises it.
    pub inside: Option<init::Inside>,
    /// What failed while making them: the launch fails with it.
    pub failed: Option<String>,
}

impl Ahead {
    /// The descriptors this holds, which the launch keeps to itself.
    pub fn fds(&self) -> Vec<i32> {
        let mut fds: Vec<i32> = self.counted.iter().map(AsRawFd::as_raw_fd).collect();
        fds.extend(self.inside.as_ref().map(init::Inside::fd));
        fds
    }

    /// Makes the namespaces a loopback-only launch needs before its plan
    /// is known, in the order the helper makes them, then forks into the
    /// PID namespace: returns in the cage's first process (the helper
    /// supervises and never returns, holding none of the zygote's
    /// descriptors: the spare's socket reaches the first process alone).
    fn make() -> Ahead {
        let mut ahead = Ahead::default();
        if let Err(e) = ahead.fill() {
            ahead.failed = Some(e);
        }
        ahead
    }

    fn fill(&mut self) -> Result<(), String> {
        if rustix::process::getuid().is_root() {
            let fd = sys::user_namespace_fd(crate::identity::EVERY_ID_BUT_ROOT)
                .map_err(|e| format!("cannot make the user namespace of the task limit: {e}"))?;
            self.counted = Some(fd);
        }
        if !crate::namespaces::has_sys_admin() {
            crate::namespaces::enter_user()?;
            self.user = true;
        }
        crate::sys::unshare(rustix::thread::UnshareFlags::NEWNET)
            .map_err(|e| format!("cannot make a network namespace: {e}"))?;
        crate::sys::loopback_up().map_err(|e| format!("cannot bring loopback up: {e}"))?;
        self.net = true;
        crate::sys::unshare(rustix::thread::UnshareFlags::NEWPID)
            .map_err(|e| format!("cannot make a PID namespace: {e}"))?;
        self.inside = Some(init::fork_first()?);
        Ok(())
    }
}

/// `teneral-confine zygote`: hands the kernel a spare, then serves
/// requests on stdin until the kernel closes it; returns the exit status.
pub fn main() -> i32 {
    let kernel = match take_stdin() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("teneral-confine zygote: stdin: {e}; the kernel starts it with a socket");
            return EXIT_USAGE;
        }
    };
    // Its parent is the kernel, which every launch's process must have too.
    let kernel_pid = rustix::process::getppid();
    if hand_over_spare(&kernel, kernel_pid).is_err() {
        return 0;
    }
    loop {
        let request = match recv(&kernel) {
            Ok(Some(request)) => request,
            Ok(None) => return 0,
            // The kernel closed its end with a spare unread: it has stopped.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return 0,
            Err(e) => {
                eprintln!("teneral-confine zygote: a request could not be read: {e}");
                return EXIT_USAGE;
            }
        };
        if request.args.first().is_some_and(|a| a == SPARE) {
            if hand_over_spare(&kernel, kernel_pid).is_err() {
                return 0;
            }
            continue;
        }
        let result = launch(request, &kernel, kernel_pid);
        if answer(&kernel, result).is_err() {
            return 0;
        }
    }
}

/// Makes a spare and sends the kernel its pid and socket (`spare <pid>`),
/// or `spare` alone when it cannot (and says why on stderr). `Err` when
/// the kernel is gone.
fn hand_over_spare(kernel: &UnixStream, kernel_pid: Option<Pid>) -> io::Result<()> {
    let message = match make_spare(kernel, kernel_pid) {
        Ok((pid, socket)) => {
            spare_message(vec![pid.to_string().into()], vec![(0, OwnedFd::from(socket))])
        }
        Err(e) => {
            eprintln!("teneral-confine zygote: no spare: {e}");
            spare_message(Vec::new(), Vec::new())
        }
    };
    send(kernel, &message)
}

/// Fd 0 (the kernel's socket) moved to a close-on-exec descriptor, with
/// /dev/null left at 0.
fn take_stdin() -> io::Result<OwnedFd> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned()?;
    let null = OwnedFd::from(std::fs::File::open("/dev/null")?);
    sys::dup_to(&null, 0)?;
    Ok(fd)
}

/// The plan's arguments of a request (`confine [--source ID] plan -- argv`),
/// checked to come from this program's sources.
fn plan_args(args: &[OsString]) -> Result<&[OsString], String> {
    let rest = match args.split_first() {
        Some((first, rest)) if first == "confine" => rest,
        _ => return Err("a request starts with `confine`".into()),
    };
    match rest {
        [flag, id, rest @ ..] if flag == "--source" => {
            if id != SOURCE_ID {
                return Err(format!(
                    "the zygote was built from other sources ({}) than the kernel ({}); build \
                     both programs again: cargo build --bins",
                    SOURCE_ID,
                    id.to_string_lossy()
                ));
            }
            Ok(rest)
        }
        rest => Ok(rest),
    }
}

/// Whether a spare can take the launch the helper's arguments `args`
/// describe (`confine [--source ID] plan -- argv`, of these sources).
pub fn fits(args: &[OsString]) -> bool {
    plan_args(args).is_ok_and(|rest| Plan::from_args(rest).is_ok_and(|(plan, _)| spare_fits(&plan)))
}

/// Whether a spare can take the launch of `plan`: loopback only, nothing
/// forwarded (the relay is forked in the kernel's network), nothing
/// pretended missing.
pub fn spare_fits(plan: &Plan) -> bool {
    plan.net == Net::Loopback && plan.forward.is_empty() && plan.pretend_missing.is_empty()
}

/// Forks a fresh launch, which makes every namespace itself.
fn launch(request: Request, kernel: &UnixStream, kernel_pid: Option<Pid>) -> Result<i32, String> {
    plan_args(&request.args)?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    match sys::fork_sibling().map_err(|e| format!("cannot fork the launch: {e}"))? {
        Some(pid) => {
            drop(write);
            // Answered once it has its own group, so that the kernel's
            // first signal to the group reaches it (or once it has ended).
            let _ = rustix::io::read(&read, &mut [0u8; 1]);
            Ok(pid)
        }
        None => {
            sys::close_in_child(kernel.as_raw_fd());
            drop(read);
            if let Err(e) = as_kernels_child(kernel_pid) {
                eprintln!("teneral-confine zygote: launch: {e}");
                std::process::exit(EXIT_NAMESPACES)
            }
            let _ = rustix::io::write(&write, &[1]);
            drop(write);
            std::process::exit(become_launch(request, Ahead::default()))
        }
    }
}

/// Forks a spare: its pid, and the socket on which it says it is ready and
/// takes its request.
fn make_spare(kernel: &UnixStream, kernel_pid: Option<Pid>) -> io::Result<(i32, UnixStream)> {
    let (ours, theirs) = UnixStream::pair()?;
    // The word that the spare is ready then names the process that sent it
    // (the cage's first process), as the reader's PID namespace numbers it.
    rustix::net::sockopt::set_socket_passcred(&ours, true)?;
    match sys::fork_sibling()? {
        Some(pid) => Ok((pid, ours)),
        None => {
            sys::close_in_child(kernel.as_raw_fd());
            sys::close_in_child(ours.as_raw_fd());
            std::mem::forget(ours);
            std::process::exit(spare_main(theirs, kernel_pid))
        }
    }
}

/// The spare: its own process group and the kernel's death first, then
/// the namespaces and the fork into the PID namespace, then (in the first
/// process) one request.
fn spare_main(socket: UnixStream, kernel_pid: Option<Pid>) -> i32 {
    if let Err(e) = as_kernels_child(kernel_pid) {
        eprintln!("teneral-confine zygote: spare: {e}");
        return EXIT_NAMESPACES;
    }
    let ahead = Ahead::make();
    if (&socket).write_all(&[1]).is_err() {
        return 0;
    }
    let request = match recv(&socket) {
        Ok(Some(request)) => request,
        // The zygote ended (with the kernel, or by its own fault).
        _ => return 0,
    };
    drop(socket);
    become_launch(request, ahead)
}

/// What `spawn` gives a child of the kernel: a process group of its own
/// and SIGKILL when the kernel ends (and an end now if it has).
fn as_kernels_child(kernel_pid: Option<Pid>) -> Result<(), String> {
    rustix::process::setpgid(None, None).map_err(|e| format!("setpgid: {e}"))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("cannot die with the kernel: {e}"))?;
    if rustix::process::getppid() != kernel_pid {
        return Err("the kernel is gone".into());
    }
    Ok(())
}

/// Takes the request's descriptors, environment and directory, then runs
/// the helper; returns the status of the step that failed.
fn become_launch(mut request: Request, ahead: Ahead) -> i32 {
    let hold = request.fds.iter().position(|(target, _)| *target == HOLD).map(|at| {
        let (_, fd) = request.fds.swap_remove(at);
        Hold(fd)
    });
    if let Err(e) = take_descriptors(request.fds) {
        eprintln!("teneral confine: descriptors: {e}");
        return EXIT_USAGE;
    }
    for (key, _) in std::env::vars_os() {
        std::env::remove_var(key);
    }
    for (key, value) in &request.env {
        if !key.is_empty() && !key.as_encoded_bytes().contains(&b'=') {
            std::env::set_var(key, value);
        }
    }
    if let Err(e) = std::env::set_current_dir(&request.cwd) {
        eprintln!("teneral confine: cannot enter {}: {e}", request.cwd.display());
        return EXIT_USAGE;
    }
    match plan_args(&request.args) {
        Ok(args) => helper::run(args, ahead, hold),
        Err(e) => {
            eprintln!("teneral confine: arguments: {e}");
            EXIT_USAGE
        }
    }
}

/// A launch held until a transient unit of the user manager has adopted
/// it: the read end of a pipe the kernel writes a word to once the
/// manager has moved the launch's processes (the helper, and the cage's
/// first process when a spare made it ahead) into the unit's cgroups.
/// Until then nothing of the launch may fork a process or run the
/// program, which would then run outside the unit's limits; the helper
/// says where it waits ([`crate::helper`]).
pub(crate) struct Hold(OwnedFd);

impl Hold {
    /// The descriptor, kept open (close-on-exec) until the word comes.
    pub(crate) fn fd(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// Waits for the kernel's word. An end closed with nothing written
    /// means the kernel gave the launch up (its unit did not start):
    /// nothing of it may run.
    pub(crate) fn wait(self) -> Result<(), String> {
        let mut text = Vec::new();
        std::fs::File::from(self.0)
            .read_to_end(&mut text)
            .map_err(|e| format!("the kernel's word to start could not be read: {e}"))?;
        if text.is_empty() {
            return Err("the kernel gave this launch up before it started (its unit did not \
                        start; the kernel's log says why)"
                .into());
        }
        Ok(())
    }
}

/// Puts each received descriptor at its number (0, 1, 2, the benchmark's).
fn take_descriptors(fds: Vec<(i32, OwnedFd)>) -> Result<(), String> {
    // Out of the way first, so no target closes a descriptor still to come.
    let mut moved = Vec::with_capacity(fds.len());
    for (target, fd) in fds {
        if !(0..64).contains(&target) {
            return Err(format!("descriptor number {target} is not one a launch gets"));
        }
        let high = rustix::io::fcntl_dupfd_cloexec(&fd, 64).map_err(|e| format!("dup: {e}"))?;
        moved.push((target, high));
    }
    for (target, fd) in moved {
        sys::dup_to(&fd, target).map_err(|e| format!("dup2 to {target}: {e}"))?;
    }
    Ok(())
}

// The kernel's side.

/// A running zygote, as its starter holds it.
pub struct Zygote {
    socket: UnixStream,
    helper: PathBuf,
    pid: u32,
    spare: Mutex<SpareSlot>,
}

/// The spare the zygote handed over, and whether one is on its way.
struct SpareSlot {
    held: Option<Spare>,
    coming: bool,
}

/// A started launch: its process (the helper), and the cage's first
/// process when a spare made it before the launch was asked for. That one
/// is the helper's child, not the kernel's, and it is what a unit that
/// adopts the launch must take: everything of the cage descends from it,
/// while the helper only supervises from outside. A fresh launch's helper
/// forks the cage after it is let go, so the unit takes the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launched {
    pub pid: u32,
    pub first: Option<u32>,
}

/// A launch made ahead: its process (the helper, supervising the cage's
/// first process) and the first process's socket.
struct Spare {
    pid: u32,
    socket: UnixStream,
}

/// How long the kernel waits for the zygote's word, or a spare's, before
/// it takes it for gone (a fork and a few namespaces take milliseconds).
const SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl Zygote {
    /// Starts `helper zygote --source <source>` (the lean helper program,
    /// `teneral-confine`) through `start`, which gets the program, its
    /// arguments and the socket that must be its stdin, and returns its pid
    /// (the kernel starts it as it starts every child, in its spawn module,
    /// dying with the calling thread). Call it from the thread that starts
    /// every launch (the kernel's main thread).
    pub fn start(
        helper: &Path,
        source: &str,
        start: impl FnOnce(&Path, &[&str], OwnedFd) -> io::Result<u32>,
    ) -> io::Result<Zygote> {
        let (ours, theirs) = UnixStream::pair()?;
        // A zygote that says nothing for this long is taken for gone,
        // rather than holding the kernel's launches forever.
        ours.set_read_timeout(Some(SILENCE))?;
        let pid = start(helper, &["zygote", "--source", source], OwnedFd::from(theirs))?;
        // The zygote hands over its first spare unasked.
        let spare = Mutex::new(SpareSlot { held: None, coming: true });
        Ok(Zygote { socket: ours, helper: helper.to_owned(), pid, spare })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The helper program whose launches this zygote takes.
    pub fn helper(&self) -> &Path {
        &self.helper
    }

    /// Has `request` started, by the spare when it fits one, else by the
    /// zygote; the launch's process, a child of this process in a process
    /// group of its own, and the cage's first process when a spare made it.
    pub fn launch(&self, request: &Request) -> io::Result<Launched> {
        let mut slot = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if slot.coming {
            slot.coming = false;
            slot.held = self.receive_spare()?;
        }
        let spare = if fits(&request.args) { slot.held.take() } else { None };
        let pid = match spare.and_then(|spare| through_spare(spare, request)) {
            Some(launched) => launched,
            None => send(&self.socket, request)
                .and_then(|()| read_answer(&self.socket))
                .map(|pid| Launched { pid, first: None }),
        };
        // The next spare, made while this launch goes on. A zygote that is
        // gone fails the next launch, not this one, which has started.
        if slot.held.is_none() {
            slot.coming = send(&self.socket, &spare_message(Vec::new(), Vec::new())).is_ok();
        }
        pid
    }

    /// The zygote's next message, a spare handed over (`None`: it could
    /// not make one, and said why on its stderr).
    fn receive_spare(&self) -> io::Result<Option<Spare>> {
        let Some(mut message) = recv(&self.socket)? else {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the zygote has ended"));
        };
        if message.args.first().is_none_or(|a| a != SPARE) {
            return Err(io::Error::other("the zygote sent something else than a spare"));
        }
        let pid = message.args.get(1).and_then(|p| p.to_str()?.parse::<u32>().ok());
        Ok(pid
            .zip(message.fds.pop())
            .map(|(pid, (_, socket))| Spare { pid, socket: UnixStream::from(socket) }))
    }
}

/// `request` sent to `spare` once it is ready; `None` when it has died
/// (the zygote then forks a fresh launch).
fn through_spare(spare: Spare, request: &Request) -> Option<io::Result<Launched>> {
    spare.socket.set_read_timeout(Some(SILENCE)).ok()?;
    let first = ready(&spare.socket)?;
    if let Err(e) = move_into_cgroups(request, spare.pid) {
        return Some(Err(e));
    }
    send(&spare.socket, request).ok()?;
    Some(Ok(Launched { pid: spare.pid, first: Some(first) }))
}

/// Reads a spare's word that it is ready: the pid of the process that sent
/// it (the cage's first process, as this process's PID namespace numbers
/// it), from the credentials the socket was made to carry ([`make_spare`]).
/// `None` when the spare has died or the word came without them.
fn ready(socket: &UnixStream) -> Option<u32> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            got => break got.ok()?,
        }
    };
    if got.bytes != 1 {
        return None;
    }
    control.drain().find_map(|message| match message {
        RecvAncillaryMessage::ScmCredentials(sender) => {
            u32::try_from(sender.pid.as_raw_nonzero().get()).ok()
        }
        _ => None,
    })
}

/// Moves a spare's helper, forked before its launch was asked for, into
/// the cgroups the request names ([`CGROUP_PROCS`]), before the
/// cage's first process gets the request: that one enters them itself,
/// first.
fn move_into_cgroups(request: &Request, pid: u32) -> io::Result<()> {
    let named = request.env.iter().find(|(key, _)| key == CGROUP_PROCS);
    let Some((_, named)) = named else { return Ok(()) };
    for procs in named.to_string_lossy().lines().filter(|l| !l.is_empty()) {
        std::fs::write(procs, pid.to_string()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot move the cage's helper into the cgroup {procs}: {e}"),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_it_was_sent() {
        let (a, b) = UnixStream::pair().expect("a socket pair");
        let null = std::fs::File::open("/dev/null").expect("/dev/null opens");
        let request = Request {
            args: vec!["confine".into(), "--".into(), "/bin/true".into(), "".into()],
            cwd: "/tmp/a dir".into(),
            env: vec![("PATH".into(), "/usr/bin".into()), ("EMPTY".into(), "".into())],
            fds: vec![(0, OwnedFd::from(null)), (7, OwnedFd::from(b.try_clone().expect("dup")))],
        };
        send(&a, &request).expect("sent");
        let got = recv(&b).expect("received").expect("not the end");
        assert_eq!(got.args, request.args);
        assert_eq!(got.cwd, request.cwd);
        assert_eq!(got.env, request.env);
        let targets: Vec<i32> = got.fds.iter().map(|(t, _)| *t).collect();
        assert_eq!(targets, [0, 7]);
        drop(a);
        assert!(recv(&b).expect("the end reads cleanly").is_none());
    }

    #[test]
    fn a_payload_that_lies_is_refused() {
        let good = encode(&Request {
            args: vec!["confine".into()],
            cwd: "/".into(),
            env: vec![],
            fds: vec![],
        });
        let table: [(&[u8], &str); 4] = [
            (&[], "ends early"),
            (&[255, 255, 255, 255], "counts more"),
            (&good[..good.len() - 1], "ends early"),
            (&[good.as_slice(), &[0]].concat(), "descriptors"),
        ];
        for (payload, want) in table {
            let e = decode(payload, vec![]).expect_err("refused");
            assert!(e.contains(want), "{payload:?}: {e}");
        }
    }

    #[test]
    fn a_spare_takes_only_loopback_launches_without_forwards() {
        let plan = |net: Net, forward: Vec<u16>, pretend: Vec<String>| {
            let mut plan = Plan::empty("gate", net);
            plan.forward = forward;
            plan.pretend_missing = pretend;
            plan
        };
        let table = [
            (plan(Net::Loopback, vec![], vec![]), true),
            (plan(Net::Open, vec![], vec![]), false),
            (plan(Net::Loopback, vec![8080], vec![]), false),
            (plan(Net::Loopback, vec![], vec!["seccomp".into()]), false),
        ];
        for (plan, want) in table {
            assert_eq!(spare_fits(&plan), want, "{plan:?}");
        }
    }

    #[test]
    fn a_spare_fits_the_helpers_arguments_of_a_loopback_plan_of_these_sources() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let ours = SOURCE_ID;
        let plan = |net: Net, forward: Vec<u16>| {
            let mut plan = Plan::empty("gate", net);
            plan.forward = forward;
            plan.to_args()
        };
        let with = |source: &str, plan: Vec<OsString>| {
            let mut all = args(&["confine", "--source", source]);
            all.extend(plan);
            all.extend(args(&["--", "/bin/true"]));
            all
        };
        assert!(fits(&with(ours, plan(Net::Loopback, vec![]))));
        assert!(!fits(&with(ours, plan(Net::Open, vec![]))), "the host's network");
        assert!(!fits(&with(ours, plan(Net::Loopback, vec![8080]))), "a forwarded port");
        assert!(!fits(&with("0000", plan(Net::Loopback, vec![]))), "other sources");
        assert!(!fits(&args(&["confine", "--source", ours, "--bogus"])), "no plan");
    }

    #[test]
    fn a_request_from_other_sources_is_refused() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let ours = SOURCE_ID;
        let table = [
            (args(&["confine", "--source", ours, "--profile", "gate"]), Ok(2)),
            (args(&["confine", "--profile", "gate"]), Ok(2)),
            (args(&["confine", "--source", "0000", "--"]), Err("other sources")),
            (args(&["run", "--"]), Err("starts with")),
        ];
        for (given, want) in table {
            match (plan_args(&given), want) {
                (Ok(rest), Ok(n)) => assert_eq!(rest.len(), n, "{given:?}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{given:?}: {e}"),
                (got, want) => panic!("{given:?}: got {got:?}, wanted {want:?}"),
            }
        }
    }
}
