//! Ports of the kernel's loopback reachable from a loopback-only namespace
//! (the smoke run's stand-in model), and nothing else of its network.
//!
//! Before the helper leaves the kernel's network namespace it forks a relay
//! that stays behind. Inside the new namespace the helper binds
//! `127.0.0.1:<port>` for each forwarded port and hands the listeners to the
//! relay over a socket pair; the relay accepts there and connects to the
//! same port on the kernel's loopback, copying bytes both ways.
//!
//! Invariants: the relay is the kernel's code, forked before any Landlock
//! rule or seccomp filter, so the confined program cannot trace or signal it
//! (Landlock's scopes, seccomp); it connects only to the ports it was given,
//! on 127.0.0.1; it ends when the helper (the confined program, same pid)
//! ends.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{
    recvmsg, sendmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
    RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The helper's end of the channel to a relay waiting for its listeners.
pub struct Pending {
    channel: OwnedFd,
}

/// Forks the relay for `ports`, still in the kernel's network namespace.
/// `None` when there is nothing to forward.
pub fn start(ports: &[u16]) -> Result<Option<Pending>, String> {
    if ports.is_empty() {
        return Ok(None);
    }
    let (ours, theirs) =
        socketpair(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::CLOEXEC, None)
            .map_err(|e| format!("socketpair: {e}"))?;
    // Taken before the fork: the relay's parent may be gone before the
    // relay first runs, and its parent then is another process (init).
    let helper = rustix::process::getpid();
    match crate::sys::fork().map_err(|e| format!("cannot fork the relay: {e}"))? {
        Some(_child) => {
            drop(theirs);
            Ok(Some(Pending { channel: ours }))
        }
        None => {
            drop(ours);
            let code = match serve(theirs, ports, helper) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("teneral confine: relay: {e}");
                    1
                }
            };
            std::process::exit(code)
        }
    }
}

/// In the new namespace: binds each port on loopback and hands the
/// listeners to the relay.
pub fn hand_over(pending: Pending, ports: &[u16]) -> Result<(), String> {
    let listeners: Vec<TcpListener> = ports
        .iter()
        .map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, *p)))
        .collect::<io::Result<_>>()
        .map_err(|e| format!("cannot listen on loopback inside: {e}"))?;
    let fds: Vec<_> = listeners.iter().map(|l| l.as_fd()).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err("too many ports to forward".into());
    }
    sendmsg(&pending.channel, &[IoSlice::new(b"L")], &mut control, SendFlags::empty())
        .map_err(|e| format!("cannot hand the listeners to the relay: {e}"))?;
    Ok(())
}

/// The relay itself: ends with the helper, takes the listeners, relays.
fn serve(channel: OwnedFd, ports: &[u16], helper: rustix::process::Pid) -> io::Result<()> {
    end_with(helper)?;
    let mut byte = [0u8; 1];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(ports.len()))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    recvmsg(&channel, &mut [IoSliceMut::new(&mut byte)], &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut listeners: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            listeners.extend(fds);
        }
    }
    if listeners.len() != ports.len() {
        return Err(io::Error::other("the helper sent no listeners"));
    }
    let threads: Vec<_> = listeners
        .into_iter()
        .zip(ports.iter().copied())
        .map(|(fd, port)| {
            let listener = TcpListener::from(fd);
            std::thread::spawn(move || accept_loop(listener, port))
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// Exits this process when `helper` (its parent, named before the fork)
/// ends. A parent-death signal would not do: the parent is confined by
/// then, and Landlock's signal scope keeps it from signalling the relay,
/// even as it dies. A pidfd becomes readable when the process it names
/// ends. The parent is named before the fork, not asked for after it: a
/// helper that ended before the relay first ran (a short program on a busy
/// machine) would leave it a child of init, and a relay waiting for init
/// to end never ends (found by bench_egress: relays left behind, holding
/// the kernel's stdout).
fn end_with(helper: rustix::process::Pid) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    use rustix::process::{getppid, pidfd_open, PidfdFlags};
    let pidfd = match pidfd_open(helper, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(_) => std::process::exit(0),
    };
    // Opened after the helper ended and its pid went to another process:
    // the relay is no longer its child.
    if getppid() != Some(helper) {
        std::process::exit(0);
    }
    std::thread::spawn(move || {
        let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
        // Whatever poll says, the relay has nothing left to do without it.
        let _ = poll(&mut fds, None);
        std::process::exit(0);
    });
    Ok(())
}

fn accept_loop(listener: TcpListener, port: u16) {
    for inside in listener.incoming().flatten() {
        std::thread::spawn(move || {
            if let Ok(outside) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
                copy_both(inside, outside);
            }
        });
    }
}

fn copy_both(a: TcpStream, b: TcpStream) {
    let (Ok(mut a2), Ok(mut b2)) = (a.try_clone(), b.try_clone()) else { return };
    let (mut a, mut b) = (a, b);
    let up = std::thread::spawn(move || {
        let _ = pump(&mut a, &mut b2);
        let _ = b2.shutdown(std::net::Shutdown::Write);
    });
    let _ = pump(&mut b, &mut a2);
    let _ = a2.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}

/// Copies until `from` ends, through a buffer large enough for a socket's
/// whole receive queue (`io::copy` between two sockets moves 8 KiB a call).
fn pump(from: &mut TcpStream, to: &mut TcpStream) -> io::Result<()> {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => to.write_all(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
