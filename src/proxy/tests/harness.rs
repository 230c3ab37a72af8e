//! The test's side: a small upstream on loopback that records what reaches
//! it, a proxy in front of it, and a client.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::proxy::{client_builder, Proxy, Upstream};
use crate::settings::Secret;

pub(super) const REAL: &str = "sk-real-owner-key";
pub(super) const STAND_IN: &str = "stand-in-for-this-generation";
pub(super) const LONG: Duration = Duration::from_secs(20);

pub(super) fn must<T, E: Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| unreachable!("{e}"))
}

pub(super) fn run<F: Future>(test: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    must(runtime).block_on(async { must(tokio::time::timeout(LONG, test).await) })
}

/// What the fake upstream was sent.
pub(super) struct Seen {
    pub method: Method,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A response body the test feeds chunk by chunk.
pub(super) struct Chunks(pub mpsc::Receiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut().0.poll_recv(cx).map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

pub(super) type Reply = Arc<dyn Fn(&Seen) -> Response<Either<Full<Bytes>, Chunks>> + Send + Sync>;

pub(super) fn full(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> Reply {
    let headers = headers.to_vec();
    Arc::new(move |_| {
        let mut response = Response::new(Either::Left(Full::new(Bytes::from(body))));
        *response.status_mut() = must(StatusCode::from_u16(status));
        for (name, value) in &headers {
            response.headers_mut().append(*name, HeaderValue::from_static(value));
        }
        response
    })
}

pub(super) struct Fake {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    pub(super) fn seen(&self) -> std::sync::MutexGuard<'_, Vec<Seen>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) async fn fake_upstream(reply: Reply) -> Fake {
    let listener = must(TcpListener::bind("127.0.0.1:0").await);
    let addr = must(listener.local_addr());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (record, reply) = (Arc::clone(&record), Arc::clone(&reply));
            let service = service_fn(move |request: Request<Incoming>| {
                let (record, reply) = (Arc::clone(&record), Arc::clone(&reply));
                async move {
                    let (parts, body) = request.into_parts();
                    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                    let uri = parts.uri.to_string();
                    let seen = Seen { method: parts.method, uri, headers: parts.headers, body };
                    let response = reply(&seen);
                    record.lock().unwrap_or_else(PoisonError::into_inner).push(seen);
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    Fake { addr, seen }
}

/// A proxy for `base_url` with the given cap, serving in the background.
pub(super) async fn start(base_url: String, limit: usize) -> SocketAddr {
    let upstream = Upstream { base_url, api_key: Secret::new(REAL) };
    let client = must(client_builder().no_proxy().build());
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let proxy = must(Proxy::bind_with(loopback, upstream, STAND_IN.into(), client, limit).await);
    let addr = proxy.local_addr();
    tokio::spawn(proxy.serve());
    addr
}

pub(super) fn client() -> reqwest::Client {
    must(reqwest::Client::builder().no_proxy().build())
}

/// The `error` object of an answer of the proxy's own.
pub(super) async fn error_of(response: reqwest::Response) -> serde_json::Value {
    let text = must(response.text().await);
    let value: serde_json::Value = must(serde_json::from_str(&text));
    value["error"].clone()
}

/// Sends raw bytes to `addr` and reads the whole answer.
pub(super) async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = must(TcpStream::connect(addr).await);
    must(stream.write_all(request).await);
    let mut answer = Vec::new();
    must(stream.read_to_end(&mut answer).await);
    String::from_utf8_lossy(&answer).into_owned()
}
