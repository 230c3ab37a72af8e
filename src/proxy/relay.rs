//! Passing the upstream's answer back to the body: its status, the few
//! headers that may pass, and its body chunk by chunk as it arrives.
//!
//! Invariant: no upstream header outside [`passes_down`] reaches the body (no
//! cookie, no hop-by-hop header), and nothing is buffered, so a streamed reply
//! stays streamed; an answer of known length keeps it (`content-length`, not
//! chunks), so a client as plain as the upstream's is served the same.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Either;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderName};
use hyper::Response;

use super::meter::{tokens_in, Meter, MAX_READ_BYTES};
use super::Answer;

/// The upstream's response headers that come back to the body.
fn passes_down(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(name, "content-type" | "retry-after" | "retry-after-ms" | "x-request-id")
        || name.starts_with("x-ratelimit-")
}

/// What a metered proxy keeps of one answer to read its usage at its end.
pub(super) struct Tap {
    meter: std::sync::Arc<Meter>,
    kept: Vec<u8>,
}

impl Tap {
    pub(super) fn new(meter: std::sync::Arc<Meter>) -> Tap {
        Tap { meter, kept: Vec::new() }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let room = MAX_READ_BYTES.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// The answer ended, whole or broken off (the body hung up): the usage it
/// reported is spent.
impl Drop for Tap {
    fn drop(&mut self) {
        self.meter.spend(tokens_in(&self.kept));
    }
}

pub(super) fn relay(response: reqwest::Response, tap: Option<Tap>) -> Answer {
    let status = response.status();
    let mut headers = HeaderMap::new();
    for (name, value) in response.headers().iter().filter(|(name, _)| passes_down(name)) {
        headers.append(name.clone(), value.clone());
    }
    let relay = Relay { state: State::Idle(Box::new(response)), tap };
    let mut answer = Response::new(Either::Right(relay));
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    answer
}

/// The upstream's response body, passed on chunk by chunk as it arrives.
/// Dropping it drops the upstream response. A metered proxy's tap reads
/// the usage of the bytes that passed when the answer ends.
pub(super) struct Relay {
    state: State,
    tap: Option<Tap>,
}

enum State {
    Idle(Box<reqwest::Response>),
    Reading(Pin<Box<dyn Future<Output = (Box<reqwest::Response>, Chunk)> + Send>>),
    Done,
}

type Chunk = Result<Option<Bytes>, reqwest::Error>;

impl Body for Relay {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        let this = self.get_mut();
        loop {
            match std::mem::replace(&mut this.state, State::Done) {
                State::Idle(mut response) => {
                    this.state = State::Reading(Box::pin(async move {
                        let chunk = response.chunk().await;
                        (response, chunk)
                    }));
                }
                State::Reading(mut reading) => match reading.as_mut().poll(cx) {
                    Poll::Pending => {
                        this.state = State::Reading(reading);
                        return Poll::Pending;
                    }
                    Poll::Ready((response, Ok(Some(bytes)))) => {
                        if let Some(tap) = &mut this.tap {
                            tap.feed(&bytes);
                        }
                        this.state = State::Idle(response);
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    Poll::Ready((_, Ok(None))) => {
                        drop(this.tap.take());
                        return Poll::Ready(None);
                    }
                    Poll::Ready((_, Err(e))) => {
                        // What was reported before the break is spent.
                        drop(this.tap.take());
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                State::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The upstream's length while nothing is read (hyper asks when it
    /// writes the headers), so an answer of known length goes back with its
    /// `content-length` rather than in chunks; unknown while a chunk is read.
    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Idle(response) => {
                response.content_length().map(SizeHint::with_exact).unwrap_or_default()
            }
            State::Reading(_) => SizeHint::default(),
            State::Done => SizeHint::with_exact(0),
        }
    }
}
