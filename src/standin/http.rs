//! The HTTP/1.1 side of the stand-in: accepts connections, reads each body,
//! hands it to the [`Service`], waits the scripted delay, writes the request
//! log and sends the answer.
//!
//! Invariants: every answer is JSON with a `content-length` (never chunked),
//! except one asked for as a stream, which is server-sent events sent frame
//! by frame, its script's `chunk_ms` apart, as they are written; a request's log line is on disk (flushed) before its answer is sent, and
//! an answer whose log line could not be written is turned into a 500 so the
//! loss shows; dropping the [`serve`] future drops every connection with it.
use std::collections::VecDeque;
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{self, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::service::{Prepared, Service, Streamed, RESPONSES_PATH};
use super::signin::{Fresh, Reply, SignIn};
use super::wire::ApiError;

/// The largest request body read; a larger one is refused with 413.
pub const BODY_LIMIT: usize = 64 << 20;

/// What every connection shares.
pub struct Shared {
    pub service: Service,
    pub log: Option<RequestLog>,
    /// The sign-in server and the plan's endpoint ([`super::signin`]).
    pub signin: Mutex<SignIn>,
}

/// Codes and tokens from the system's random source.
struct Random;

impl Fresh for Random {
    fn fresh(&mut self) -> String {
        let mut bytes = [0u8; 24];
        // Without a random source the counter-free fallback still differs per call.
        if getrandom::fill(&mut bytes).is_err() {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            bytes[..16].copy_from_slice(&nanos.to_le_bytes());
        }
        teneral_core::chatgpt::b64url(&bytes)
    }
}

/// The request log: one JSON line per request, `{"path","status","body",
/// "at_us"}`, `at_us` the wall clock (microseconds since the epoch) when
/// the answer was about to be sent.
pub struct RequestLog {
    file: Mutex<File>,
}

impl RequestLog {
    /// Opens (creates, appends to) the log file.
    pub fn open(path: &Path) -> io::Result<RequestLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(RequestLog { file: Mutex::new(file) })
    }

    /// Appends one request's line and flushes it. A body that is not JSON is
    /// logged as a string.
    pub fn record(&self, path: &str, status: u16, body: &[u8]) -> io::Result<()> {
        let body = serde_json::from_slice::<Value>(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        let at_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros());
        let mut line =
            json!({"path": path, "status": status, "body": body, "at_us": at_us}).to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(line.as_bytes())?;
        file.flush()
    }
}

/// Accepts and serves connections until dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // A streamed answer's small frames leave at once.
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    connections.spawn(async move {
                        let service = service_fn(move |req| answer(req, Arc::clone(&shared)));
                        // A connection that fails (the client went away) ends alone.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of descriptors or a connection reset before accept: pause, go on.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A whole answer, or a stream's frames.
type Answer = Response<Either<Full<Bytes>, Frames>>;

async fn answer(request: Request<Incoming>, shared: Arc<Shared>) -> Result<Answer, Infallible> {
    let whole = |response: Response<Full<Bytes>>| response.map(Either::Left);
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let header =
        |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let authorization = header(AUTHORIZATION.as_str());
    let account = header(teneral_core::chatgpt::ACCOUNT_HEADER);
    let json_body =
        header(CONTENT_TYPE.as_str()).is_some_and(|t| t.starts_with("application/json"));
    let query = pairs_of(request.uri().query().unwrap_or(""));
    let (body, prepared) = match Limited::new(request.into_body(), BODY_LIMIT).collect().await {
        Ok(collected) => {
            let body = collected.to_bytes();
            let form = if json_body {
                json_pairs(&body)
            } else {
                pairs_of(&String::from_utf8_lossy(&body))
            };
            let now = unix_now();
            let reply = shared.signin.lock().unwrap_or_else(|p| p.into_inner()).route(
                &method,
                &path,
                &query,
                &form,
                authorization.as_deref(),
                account.as_deref(),
                now,
                &mut Random,
            );
            let prepared = match reply {
                None => shared.service.handle(&method, &path, authorization.as_deref(), &body, now),
                Some(Reply::Model) => match super::signin::plan_body(&body) {
                    Err((status, json)) => Prepared::now(status, json),
                    // Asked for as a stream, so answered as one.
                    Ok(streamed) => {
                        shared.service.handle_checked("POST", RESPONSES_PATH, &streamed, now)
                    }
                },
                Some(Reply::Models) => {
                    shared.service.handle_checked("GET", super::models::MODELS_PATH, &body, now)
                }
                Some(Reply::Json(status, json)) => Prepared::now(status, json),
                Some(Reply::Redirect(to)) => {
                    let _ = record(&shared, &path, 302, &body);
                    return Ok(whole(redirect(&to)));
                }
                Some(Reply::Page(status, text)) => {
                    let _ = record(&shared, &path, status, &body);
                    return Ok(whole(page(status, &text)));
                }
            };
            (body, prepared)
        }
        Err(e) => {
            let error = if e.is::<http_body_util::LengthLimitError>() {
                ApiError::other(
                    413,
                    "invalid_request_error",
                    format!("The request body is larger than {BODY_LIMIT} bytes."),
                    None,
                )
            } else {
                ApiError::invalid(format!("The request body could not be read: {e}"), None, None)
            };
            (Bytes::new(), Prepared::from(error))
        }
    };
    let Prepared { delay, status, body: json, stream } = prepared;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (status, json) = match &shared.log {
        Some(log) => match log.record(&path, status, &body) {
            Ok(()) => (status, json),
            Err(e) => {
                let error = ApiError::other(
                    500,
                    "server_error",
                    format!("The stand-in could not write its request log: {e}"),
                    None,
                );
                (500, error.body())
            }
        },
        None => (status, json),
    };
    if let (200, Some(stream)) = (status, stream) {
        return Ok(frames(*stream));
    }
    Ok(whole(respond(status, &json)))
}

fn frames(stream: Streamed) -> Answer {
    let frames = Frames {
        frames: stream.frames.into_iter().map(Bytes::from).collect(),
        gap: stream.gap,
        wait: None,
    };
    let mut response = Response::new(Either::Right(frames));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A streamed answer's frames, each sent `gap` after the one before.
pub struct Frames {
    frames: VecDeque<Bytes>,
    gap: Duration,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(wait) = &mut this.wait {
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.wait = None;
        }
        let Some(frame) = this.frames.pop_front() else { return Poll::Ready(None) };
        if !this.gap.is_zero() && !this.frames.is_empty() {
            this.wait = Some(Box::pin(tokio::time::sleep(this.gap)));
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }
}

fn respond(status: u16, json: &Value) -> Response<Full<Bytes>> {
    let bytes = Bytes::from(json.to_string());
    let length = HeaderValue::from(bytes.len());
    let mut response = Response::new(Full::new(bytes));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(CONTENT_LENGTH, length);
    response
}

fn record(shared: &Shared, path: &str, status: u16, body: &[u8]) -> io::Result<()> {
    match &shared.log {
        Some(log) => log.record(path, status, body),
        None => Ok(()),
    }
}

/// `a=1&b=2`, percent-decoded.
fn pairs_of(text: &str) -> Vec<(String, String)> {
    let Ok(url) = reqwest::Url::parse(&format!("http://x/?{text}")) else { return Vec::new() };
    url.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect()
}

/// The string fields of a JSON object body.
fn json_pairs(body: &[u8]) -> Vec<(String, String)> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    map.into_iter().filter_map(|(n, v)| Some((n, v.as_str()?.to_owned()))).collect()
}

fn redirect(to: &str) -> Response<Full<Bytes>> {
    let mut response = page(302, "Redirecting to the app.");
    if let Ok(location) = HeaderValue::try_from(to) {
        response.headers_mut().insert(hyper::header::LOCATION, location);
    }
    response
}

fn page(status: u16, text: &str) -> Response<Full<Bytes>> {
    let bytes = Bytes::from(text.to_owned());
    let length = HeaderValue::from(bytes.len());
    let mut response = Response::new(Full::new(bytes));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response.headers_mut().insert(CONTENT_LENGTH, length);
    response
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
