//! A tunnel's bytes moved inside Linux: once a CONNECT tunnel (or a plain
//! request's exchange) is open, each direction goes from one socket into a
//! pipe and from the pipe into the other socket with `splice(2)`, the pages
//! the sending socket received handed to the receiving socket by reference
//! instead of copied through the proxy's buffers. It was expected to beat
//! copying; on Linux 6.18's loopback, idle, it carried 12 to 29 % less and
//! cost the machine slightly more CPU per MiB (`scripts/bench-egress`,
//! docs/cage.md), so the kernel's proxy copies and this stays as the
//! bench's comparison ([`super::server::Egress::splicing`]), to be measured
//! again on other kernels.
//!
//! Driven by the runtime's readiness: a socket is spliced only when the
//! runtime says it is readable (or writable), and a `WouldBlock` clears
//! that readiness, so a tunnel costs no thread of its own. Each direction
//! fills its pipe only when it is empty and drains it whole before it
//! reads again, so an `EAGAIN` always means the socket, never the pipe.
//!
//! The rules of the copying relay hold: a direction whose source ends
//! shuts the other socket's writing half (a half-close goes through), the
//! tunnel ends when both directions have ended or either fails, and a
//! tunnel through which nothing went for its idle time is closed.
//!
//! A write into a socket whose peer is gone gives `EPIPE` (and `SIGPIPE`,
//! which Rust's runtime ignores in every program of this crate).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::net::Shutdown;
use rustix::pipe::{self, PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// What each pipe is asked to hold: as much as the copying relay's buffer.
/// Linux counts pipes' pages per user (`/proc/sys/fs/pipe-user-pages-soft`,
/// 16,384 pages by default, shared with the user's other processes): two
/// pipes of 256 KiB per tunnel let 128 tunnels splice at once; past that a
/// new pipe gets a page or two, less than [`PIPE_LEAST`].
pub const PIPE_SIZE: usize = 256 * 1024;
/// A pipe smaller than this (a user past the limit above) is not worth a
/// splice each few pages: the tunnel copies instead.
pub const PIPE_LEAST: usize = 64 * 1024;

const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

/// One direction's pipe.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    size: usize,
}

impl Pipe {
    /// A non-blocking pipe of [`PIPE_SIZE`], or as large as Linux allows.
    /// Fails when the process is out of descriptors or the pipe would hold
    /// less than [`PIPE_LEAST`] (the caller then copies instead).
    pub fn new() -> io::Result<Pipe> {
        let (read, write) = pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let size = match pipe::fcntl_setpipe_size(&write, PIPE_SIZE) {
            Ok(size) => size,
            Err(_) => pipe::fcntl_getpipe_size(&write)?,
        };
        if size < PIPE_LEAST {
            return Err(io::Error::other(format!(
                "a pipe of {size} bytes: past this user's pipe pages (pipe-user-pages-soft)"
            )));
        }
        Ok(Pipe { read, write, size })
    }

    /// The bytes it holds at most.
    pub fn size(&self) -> usize {
        self.size
    }
}

/// When something last went through the tunnel, in milliseconds since it
/// opened; shared by both directions and the idle watch.
struct Activity {
    opened: Instant,
    last: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        let since = self.opened.elapsed();
        since.saturating_sub(Duration::from_millis(self.last.load(Ordering::Relaxed)))
    }
}

/// Moves bytes both ways between `client` and `upstream` through the two
/// pipes until both directions have ended (an error or the idle time ends
/// it sooner). Returns how the tunnel ended: `Ok` when both sides finished,
/// the error otherwise (the caller drops both sockets either way).
pub async fn tunnel(
    client: &TcpStream,
    upstream: &TcpStream,
    pipes: [Pipe; 2],
    idle: Duration,
) -> io::Result<()> {
    let [up, down] = pipes;
    let activity = Activity { opened: Instant::now(), last: AtomicU64::new(0) };
    let both = async {
        tokio::try_join!(
            pump(client, upstream, &up, &activity),
            pump(upstream, client, &down, &activity)
        )
    };
    tokio::select! {
        done = both => done.map(|_| ()),
        () = quiet(&activity, idle) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("nothing went through the tunnel for {idle:?}"),
        )),
    }
}

/// One direction: `from`'s bytes into `to` until `from` ends, then `to`'s
/// writing half is shut.
async fn pump(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &Pipe,
    activity: &Activity,
) -> io::Result<()> {
    loop {
        let got = loop {
            from.readable().await?;
            let spliced = from.try_io(Interest::READABLE, || {
                Ok(pipe::splice(from, None, &pipe.write, None, pipe.size, FLAGS)?)
            });
            match spliced {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if got == 0 {
            return Ok(rustix::net::shutdown(to, Shutdown::Write)?);
        }
        activity.touch();
        let mut left = got;
        while left > 0 {
            to.writable().await?;
            let spliced = to.try_io(Interest::WRITABLE, || {
                Ok(pipe::splice(&pipe.read, None, to, None, left, FLAGS)?)
            });
            match spliced {
                Ok(0) => {
                    return Err(io::Error::new(io::ErrorKind::WriteZero, "the socket took nothing"))
                }
                Ok(n) => {
                    left -= n.min(left);
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Ends when nothing went through for `idle`.
async fn quiet(activity: &Activity, idle: Duration) {
    loop {
        let quiet = activity.quiet_for();
        if quiet >= idle {
            return;
        }
        tokio::time::sleep(idle - quiet).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_enlarged_or_keeps_its_default() {
        let pipe = Pipe::new().expect("a pipe");
        assert!(pipe.size() >= PIPE_LEAST && pipe.size() <= PIPE_SIZE, "{}", pipe.size());
    }
}
