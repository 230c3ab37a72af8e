//! Benchmark behind the streaming figures of `scripts/bench-talk`: what the
//! model proxy adds to the time a streamed reply's first byte takes to reach
//! the body, on loopback (goal: at most 1 ms at the 99th percentile,
//! docs/speed.md).
//!
//! An upstream in this process streams server-sent events: it notes the
//! instant it hands its first frame to the socket, then sends the rest
//! 20 ms later. A client (as plain as the seed body's: one request per
//! connection, read as it arrives) asks it REQUESTS times directly and
//! REQUESTS times through the real proxy ([`teneral::proxy::Proxy`]), in
//! turn, and notes when the first byte of the body arrives. Each figure is
//! the time from the upstream's first frame to that byte; the proxy's
//! added latency is the proxied median less the direct median, and the
//! proxied 99th percentile less the direct median (an upper bound: the
//! machine's own stalls, which a direct request meets too, count as the
//! proxy's).
//!
//!   cargo run --release --example bench_stream [REQUESTS]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use teneral::proxy::{Proxy, Upstream};
use teneral::settings::Secret;

const GOAL_MS: f64 = 1.0;
const KEY: &str = "bench-key";

/// When the upstream sent the first frame of the answer it is giving now.
type Sent = Arc<Mutex<Option<Instant>>>;

/// Two frames: the first at once (its instant noted when it is polled out
/// to hyper), the second after a pause, so the client reads the first alone.
struct Frames {
    sent: Sent,
    step: u8,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.step {
            0 => {
                this.step = 1;
                if let Ok(mut sent) = this.sent.lock() {
                    *sent = Some(Instant::now());
                }
                this.pause = Some(Box::pin(tokio::time::sleep(Duration::from_millis(20))));
                let first =
                    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(first.as_bytes())))))
            }
            1 => {
                if let Some(pause) = &mut this.pause {
                    if pause.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                this.step = 2;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"data: [DONE]\n\n")))))
            }
            _ => Poll::Ready(None),
        }
    }
}

async fn upstream(sent: Sent) -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let sent = Arc::clone(&sent);
            let service = hyper::service::service_fn(move |_: Request<Incoming>| {
                let frames = Frames { sent: Arc::clone(&sent), step: 0, pause: None };
                let mut response = Response::new(frames);
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/event-stream"),
                );
                async move { Ok::<_, Infallible>(response) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Ok(addr)
}

/// One streamed request to `addr`, as the seed body makes it; the time from
/// the upstream's first frame to the first byte of the answer's body.
async fn first_byte(addr: SocketAddr, sent: &Sent) -> Result<Duration> {
    if let Ok(mut s) = sent.lock() {
        *s = None;
    }
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("the answer ended before its body began");
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(head_end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            // The chunk size line, then the first data.
            if seen[head_end + 4..].windows(5).any(|w| w == b"data:") {
                let at = Instant::now();
                let sent = sent.lock().ok().and_then(|s| *s);
                let Some(sent) = sent else { bail!("the upstream noted no first frame") };
                // Drain the rest, so each request ends before the next.
                while stream.read(&mut buf).await? > 0 {}
                return Ok(at.saturating_duration_since(sent));
            }
        }
    }
}

fn pct(xs: &[f64], p: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[((p / 100.0 * xs.len() as f64) as usize).min(xs.len() - 1)]
}

fn main() -> Result<()> {
    let requests: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let sent: Sent = Arc::default();
        let up = upstream(Arc::clone(&sent)).await?;
        let upstream =
            Upstream { base_url: format!("http://{up}/v1"), api_key: Secret::new("sk-owner") };
        let proxy = Proxy::bind("127.0.0.1:0".parse()?, upstream, KEY.to_owned()).await?;
        let via = proxy.local_addr();
        tokio::spawn(proxy.serve());
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        // Warm both paths (connections, the proxy's pool), then measure in turn.
        for _ in 0..20 {
            first_byte(up, &sent).await?;
            first_byte(via, &sent).await?;
        }
        for _ in 0..requests {
            direct.push(first_byte(up, &sent).await?.as_secs_f64() * 1000.0);
            proxied.push(first_byte(via, &sent).await?.as_secs_f64() * 1000.0);
        }
        let added50 = pct(&proxied, 50.0) - pct(&direct, 50.0);
        // Against the direct median, so the figure is an upper bound: a
        // stall of the machine's (a direct request has them too) counts as
        // the proxy's.
        let added99 = pct(&proxied, 99.0) - pct(&direct, 50.0);
        println!("model proxy, first streamed byte on loopback ({requests} requests each way)");
        println!(
            "  upstream's first frame to the client: direct p50 {:.3} ms p99 {:.3} ms; \
             through the proxy p50 {:.3} ms p99 {:.3} ms",
            pct(&direct, 50.0),
            pct(&direct, 99.0),
            pct(&proxied, 50.0),
            pct(&proxied, 99.0)
        );
        let verdict = if added99 <= GOAL_MS { "ok  " } else { "OVER" };
        println!(
            "  added by the proxy  p50 {added50:.3} ms, p99 {added99:.3} ms   goal <= {GOAL_MS} ms p99  \
             {verdict} {:.2}x the goal",
            added99 / GOAL_MS
        );
        Ok(())
    })
}
