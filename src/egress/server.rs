//! The egress proxy: a small, strict HTTP forward proxy on the kernel's
//! loopback. One request per connection: `CONNECT host:port` opens a
//! tunnel; a plain-HTTP request in absolute form is sent on with
//! `Connection: close`. The proxy resolves the name itself, asks
//! [`super::policy::decide`], and connects only to the addresses it
//! checked. A refusal is a 403 with the reason on one line, and a line in
//! the kernel's log naming the host.
//!
//! Bounds: a head of at most [`MAX_HEAD`] bytes read within [`HEAD_TIME`];
//! resolution and connection within [`DIAL_TIME`]; at most
//! [`MAX_CONNECTIONS`] at once (the next ones get a 503). A tunnel, once
//! open, lives as long as both ends keep it and something goes through it
//! at least every [`TUNNEL_IDLE`]. Refusals are logged at most once per
//! host per minute, with a count ([`super::refusals`]).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::policy::{decide, Policy, Verdict};
use super::refusals::Refusals;
use super::request::{self, Request};
use super::splice;
use teneral_core::log;

/// Longest request head taken.
pub const MAX_HEAD: usize = 16 * 1024;
/// Time a client has to send its request head.
pub const HEAD_TIME: Duration = Duration::from_secs(10);
/// Time to resolve a name and to connect to it.
pub const DIAL_TIME: Duration = Duration::from_secs(10);
/// Bytes buffered each way of a tunnel.
const BUFFER: usize = 256 * 1024;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// A tunnel (or a plain request's answer) through which nothing went for
/// this long, either way, is closed.
pub const TUNNEL_IDLE: Duration = Duration::from_secs(300);

/// What one egress proxy enforces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    pub policy: Policy,
    /// The tests' resolver hook (`TENERAL_TEST_EGRESS_RESOLVE`): these
    /// names, and only these, go to the given address and count as public.
    pub stand_ins: Vec<(String, SocketAddr)>,
}

/// A bound egress proxy, not yet serving.
pub struct Egress {
    listener: TcpListener,
    shared: Arc<Shared>,
}

struct Shared {
    policy: Policy,
    stand_ins: HashMap<String, SocketAddr>,
    slots: Semaphore,
    idle: Duration,
    /// Whether open tunnels splice (else they copy, as the kernel's do).
    splice: bool,
    refusals: std::sync::Mutex<Refusals>,
}

impl Egress {
    pub async fn bind(addr: SocketAddr, config: Config) -> io::Result<Egress> {
        let listener = TcpListener::bind(addr).await?;
        let stand_ins =
            config.stand_ins.into_iter().map(|(n, a)| (n.to_ascii_lowercase(), a)).collect();
        let shared = Shared {
            policy: config.policy,
            stand_ins,
            slots: Semaphore::new(MAX_CONNECTIONS),
            idle: TUNNEL_IDLE,
            splice: false,
            refusals: std::sync::Mutex::new(Refusals::default()),
        };
        Ok(Egress { listener, shared: Arc::new(shared) })
    }

    /// The same proxy closing tunnels idle for `idle` instead of
    /// [`TUNNEL_IDLE`] (tests). Only before it serves.
    pub fn idle_after(mut self, idle: Duration) -> Egress {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.idle = idle;
        }
        self
    }

    /// The same proxy splicing its tunnels' bytes socket to pipe to socket
    /// ([`splice`]) instead of copying them, when pipes can be had: the
    /// bench's comparison and the tests of that path. On Linux 6.18's
    /// loopback it carried less than copying (docs/cage.md), so the
    /// kernel's proxy copies. Only before it serves.
    pub fn splicing(mut self) -> Egress {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.splice = true;
        }
        self
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped.
    pub async fn serve(self) {
        loop {
            let Ok((client, _)) = self.listener.accept().await else {
                // Out of descriptors, say: wait rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                let Ok(_slot) = shared.slots.try_acquire() else {
                    let _ = answer(client, 503, "too many connections through the proxy").await;
                    return;
                };
                serve_one(&shared, client).await;
            });
        }
    }
}

async fn serve_one(shared: &Shared, mut client: TcpStream) {
    let _ = client.set_nodelay(true);
    let (head, early) = match tokio::time::timeout(HEAD_TIME, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => {
            let _ = answer(client, 400, &e).await;
            return;
        }
        Err(_) => return,
    };
    let request = match request::parse(&head) {
        Ok(r) => r,
        Err(e) => {
            let _ = answer(client, 400, &e).await;
            return;
        }
    };
    let (addrs, stand_in) = match resolve(shared, &request.host, request.port).await {
        Ok(found) => found,
        Err(e) => {
            let reason = format!("cannot resolve {}: {e}", request.host);
            refused(shared, &request, &reason);
            let _ = answer(client, 502, &reason).await;
            return;
        }
    };
    if let Verdict::Refuse(reason) = decide(&request.host, &addrs, &shared.policy, stand_in) {
        refused(shared, &request, &reason);
        let _ = answer(client, 403, &reason).await;
        return;
    }
    let mut upstream = match dial(&addrs).await {
        Ok(s) => s,
        Err(e) => {
            let _ = answer(client, 502, &format!("cannot connect to {}: {e}", request.host)).await;
            return;
        }
    };
    let sent = if request.path.is_some() {
        upstream.write_all(&request.origin_head()).await
    } else {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await
    };
    if sent.is_err() || upstream.write_all(&early).await.is_err() {
        return;
    }
    if shared.splice {
        if let (Ok(up), Ok(down)) = (splice::Pipe::new(), splice::Pipe::new()) {
            let _ = splice::tunnel(&client, &upstream, [up, down], shared.idle).await;
            return;
        }
        // Out of descriptors or pipe pages: the bytes are copied instead.
    }
    copy(client, upstream, shared.idle).await
}

/// Copies both ways until both ends have closed, or nothing went through
/// for `idle`: the tunnel's relay. Large buffers: with 8 KiB a download
/// through the tunnel costs many more reads and writes than a direct one.
/// Each buffer's pages are touched only as far as a read fills them.
async fn copy(mut client: TcpStream, mut upstream: TcpStream, idle: Duration) {
    let (mut client_in, mut client_out) = client.split();
    let (mut upstream_in, mut upstream_out) = upstream.split();
    let mut up = vec![0u8; BUFFER];
    let mut down = vec![0u8; BUFFER];
    let (mut client_open, mut upstream_open) = (true, true);
    while client_open || upstream_open {
        let step = async {
            tokio::select! {
                n = client_in.read(&mut up), if client_open => match n {
                    Ok(n) if n > 0 => upstream_out.write_all(&up[..n]).await.map(|()| None),
                    _ => upstream_out.shutdown().await.map(|()| Some(true)),
                },
                n = upstream_in.read(&mut down), if upstream_open => match n {
                    Ok(n) if n > 0 => client_out.write_all(&down[..n]).await.map(|()| None),
                    _ => client_out.shutdown().await.map(|()| Some(false)),
                },
            }
        };
        match tokio::time::timeout(idle, step).await {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(true))) => client_open = false,
            Ok(Ok(Some(false))) => upstream_open = false,
            // A write failed, or nothing went through for `idle`.
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// Reads up to the blank line that ends the head; the head without it, and
/// what came after it in the same reads.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let early = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((buf, early));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("the request head is longer than {MAX_HEAD} bytes"));
        }
        let n = client.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection ended before the request head did".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The addresses of `host`, and whether they come from the tests' hook.
async fn resolve(shared: &Shared, host: &str, port: u16) -> io::Result<(Vec<SocketAddr>, bool)> {
    if let Some(addr) = shared.stand_ins.get(&host.to_ascii_lowercase()) {
        return Ok((vec![*addr], true));
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok((vec![SocketAddr::new(ip, port)], false));
    }
    let found = tokio::time::timeout(DIAL_TIME, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "name resolution timed out"))??;
    Ok((found.collect(), false))
}

/// A connection to the first of `addrs` that answers.
async fn dial(addrs: &[SocketAddr]) -> io::Result<TcpStream> {
    let mut last = io::Error::other("no address");
    for addr in addrs {
        match tokio::time::timeout(DIAL_TIME, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connection timed out"),
        }
    }
    Err(last)
}

fn refused(shared: &Shared, request: &Request, reason: &str) {
    let line =
        format!("egress refused {} {}:{}: {reason}", request.method, request.host, request.port);
    let logged = shared.refusals.lock().unwrap_or_else(|p| p.into_inner()).note(
        &request.host,
        &line,
        std::time::Instant::now(),
    );
    if let Some(line) = logged {
        log::at(log::Priority::Warning, line);
    }
}

/// A short answer with `reason` on one line, then the connection closes.
async fn answer(mut client: TcpStream, status: u16, reason: &str) -> io::Result<()> {
    let title = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let body = format!("teneral egress: {}\n", log::escape(reason));
    let reply = format!(
        "HTTP/1.1 {status} {title}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(reply.as_bytes()).await?;
    client.shutdown().await?;
    // What the client still sends is read and dropped for a moment, so that
    // closing with unread data does not reset the connection before the
    // client has read the answer.
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    Ok(())
}
