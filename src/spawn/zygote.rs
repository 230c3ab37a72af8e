//! Talking to the cage's zygote: a `teneral-confine zygote` kept running
//! beside the kernel, which forks each confined launch instead of the
//! kernel executing the helper anew (`crate::confine::zygote` is its side).
//!
//! A launch is a [`Request`]: the helper's arguments (the plan and the
//! program), the working directory, the whole environment and the
//! descriptors the launch gets (stdin, stdout, stderr and the benchmark's),
//! sent over a Unix stream socket, the descriptors by `SCM_RIGHTS`. The
//! zygote answers with the pid of the launch's process. That process is
//! cloned with `CLONE_PARENT`, so it is the kernel's own child: the reaper
//! collects it, [`super::Child`] signals its group, and it dies with the
//! kernel, exactly as a helper the kernel executed itself.
//!
//! The zygote keeps a spare, a launch made ahead with its namespaces, and
//! hands it to the kernel: its pid and a socket of its own, in a message
//! framed as a request (`spare <pid>`, the socket as its one descriptor).
//! The kernel sends a request it fits straight to the spare, once the spare
//! has said it is ready, and asks the zygote for the next one (`spare`);
//! any other request goes to the zygote, which forks a fresh launch. A
//! spare that has died gives end of file, and its request goes to the
//! zygote as well.
//!
//! Framing, on a stream: an 8-byte header (payload length, descriptor
//! count, little-endian u32 each) sent together with the descriptors, then
//! the payload: `u32` counts and length-prefixed byte strings. The answer
//! is an `i32` pid, or 0 followed by a length-prefixed message.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer};
use rustix::net::{SendAncillaryMessage, SendFlags};

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

mod client;
pub use client::{Fits, Zygote};

/// The environment variable that names, one a line, the `cgroup.procs`
/// files a launch of the helper enters before anything else (the cgroup
/// runner's, when a zygote forks the helper; a spare's helper, forked
/// before, is moved into them by [`Zygote::launch`]). The helper removes
/// it from the program's environment.
pub const CGROUP_PROCS: &str = "TENERAL_CGROUP_PROCS";

/// The first argument of a message about a spare: the kernel asking for
/// one, the zygote handing one over (`spare <pid>`, with its socket).
pub const SPARE: &str = "spare";

/// A message about a spare ([`SPARE`]), framed as a request.
pub fn spare_message(rest: Vec<OsString>, fds: Vec<(i32, OwnedFd)>) -> Request {
    let args = std::iter::once(OsString::from(SPARE)).chain(rest).collect();
    Request { args, cwd: PathBuf::from("/"), env: Vec::new(), fds }
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
}
