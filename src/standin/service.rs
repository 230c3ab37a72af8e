//! One request in, one answer out, with no I/O: the key check, the routes,
//! the protocol checks, the script's decision, the numbering of responses
//! and tool calls, and the frames of an answer asked for as a stream.
//!
//! Without a script the conversation a request carries may make the
//! stand-in act as an agent ([`showcase`]); with one it never does.
//!
//! Invariants: the key is checked before anything else and a refused
//! request never consumes a script step; a script step is consumed only by a
//! request that passed its protocol's checks; tool calls are numbered across
//! both endpoints so no two share an id; a Responses answer is remembered (for
//! `previous_response_id`) only when the request did not say `store: false`.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::script::{Decision, Outcome, Script};
use super::turn::{Call, Newest, Turn, Usage};
use super::wire::ApiError;
use super::{chat, models, responses, showcase, stream};

pub const CHAT_PATH: &str = "/v1/chat/completions";
pub const RESPONSES_PATH: &str = "/v1/responses";

/// An answer ready to send after `delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub delay: Duration,
    pub status: u16,
    /// The whole answer (also when it is sent as `stream`).
    pub body: Value,
    /// The request asked for a stream: these frames are sent instead of
    /// `body`.
    pub stream: Option<Box<Streamed>>,
}

/// Server-sent events, sent `gap` apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    pub gap: Duration,
    pub frames: Vec<String>,
}

/// How far apart the frames of the stand-in's own acts ([`showcase`]) are
/// streamed, so that an owner sees the words come.
pub const SHOWCASE_GAP: Duration = Duration::from_millis(15);

impl Prepared {
    pub fn now(status: u16, body: Value) -> Self {
        Prepared { delay: Duration::ZERO, status, body, stream: None }
    }

    fn error(error: &ApiError) -> Self {
        Self::now(error.status, error.body())
    }
}

impl From<ApiError> for Prepared {
    fn from(error: ApiError) -> Self {
        Prepared::error(&error)
    }
}

/// The stand-in's state, shared by every connection.
pub struct Service {
    /// Replaced when the kernel starts another generation (each has its own).
    key: Mutex<Option<String>>,
    state: Mutex<State>,
}

struct State {
    script: Script,
    /// No script was given (or it had no steps) and none was asked for
    /// ([`Service::from_script_alone`]): the owner lines of [`showcase`]
    /// are acted on.
    unscripted: bool,
    responses: u64,
    calls: u64,
    /// Call ids of each stored Responses answer, by response id.
    stored: HashMap<String, Vec<String>>,
}

enum Protocol {
    Chat,
    Responses,
}

impl Service {
    pub fn new(key: Option<String>, script: Script) -> Self {
        let unscripted = script.remaining() == 0;
        let state = State { script, unscripted, responses: 0, calls: 0, stored: HashMap::new() };
        Service { key: Mutex::new(key), state: Mutex::new(state) }
    }

    /// Answers from the script alone, even an empty one: the owner lines
    /// of [`showcase`] are never acted on, and a request past the script
    /// gets the default reply.
    pub fn from_script_alone(self) -> Self {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).unscripted = false;
        self
    }

    /// Makes `key` the only one accepted from now on.
    pub fn set_key(&self, key: Option<String>) {
        *self.key.lock().unwrap_or_else(|p| p.into_inner()) = key;
    }

    /// Answers one request. `now` is the time in Unix seconds.
    pub fn handle(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Prepared {
        let key = self.key.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Err(e) = authorize(key.as_deref(), authorization) {
            return Prepared::error(&e);
        }
        self.handle_checked(method, path, body, now)
    }

    /// Answers one request whose credential was already checked (the plan's
    /// endpoint checks its access token in [`super::signin`]).
    pub fn handle_checked(&self, method: &str, path: &str, body: &[u8], now: u64) -> Prepared {
        if method == "GET" {
            if let Some(listed) = models::answer(path) {
                return match listed {
                    Ok(body) => Prepared::now(200, body),
                    Err(e) => Prepared::error(&e),
                };
            }
        }
        let protocol = match (method, path) {
            ("POST", CHAT_PATH) => Protocol::Chat,
            ("POST", RESPONSES_PATH) => Protocol::Responses,
            _ => {
                return Prepared::error(&ApiError::other(
                    404,
                    "invalid_request_error",
                    format!("Invalid URL ({method} {path})"),
                    None,
                ))
            }
        };
        let json: Value = match serde_json::from_slice(body) {
            Ok(json) => json,
            Err(e) => {
                return Prepared::error(&ApiError::invalid(
                    format!("The request body is not valid JSON ({e}). Send a JSON object with Content-Type: application/json."),
                    None,
                    None,
                ))
            }
        };
        let body_chars = String::from_utf8_lossy(body).chars().count();
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let answer = match protocol {
            Protocol::Chat => state.chat(&json, body_chars, now),
            Protocol::Responses => state.responses(&json, body_chars, now),
        };
        match answer {
            Ok(prepared) | Err(prepared) => prepared,
        }
    }
}

impl State {
    fn chat(&mut self, json: &Value, body_chars: usize, now: u64) -> Result<Prepared, Prepared> {
        let checked = chat::validate(json)?;
        let (delay, gap, turn) = self.turn(&checked.newest, json)?;
        let n = self.next_response();
        let usage = Usage::of(body_chars, &turn);
        let body = chat::render(&checked.model, n, now, &turn, usage);
        let stream = checked.asked.stream.then(|| {
            let frames = stream::chat(&checked.model, n, now, &turn, usage, checked.asked);
            Box::new(Streamed { gap, frames })
        });
        Ok(Prepared { delay, status: 200, body, stream })
    }

    fn responses(
        &mut self,
        json: &Value,
        body_chars: usize,
        now: u64,
    ) -> Result<Prepared, Prepared> {
        let stored = |id: &str| self.stored.get(id).cloned();
        let checked = responses::validate(json, &stored)?;
        let (delay, gap, turn) = self.turn(&checked.newest, json)?;
        let n = self.next_response();
        if checked.store {
            let calls = turn.calls.iter().map(Call::call_id).collect();
            self.stored.insert(responses::response_id(n), calls);
        }
        let usage = Usage::of(body_chars, &turn);
        let body = responses::render(n, now, &checked, &turn, usage);
        let stream =
            checked.stream.then(|| Box::new(Streamed { gap, frames: stream::responses(&body) }));
        Ok(Prepared { delay, status: 200, body, stream })
    }

    /// Takes the script's decision, or without a script the showcase's
    /// (on the conversation in `body`, a request that passed its checks). A
    /// scripted error keeps its step's delay; a request that is off script is
    /// answered at once. Returns the delay, the gap between streamed frames
    /// and the turn.
    fn turn(
        &mut self,
        newest: &Newest,
        body: &Value,
    ) -> Result<(Duration, Duration, Turn), Prepared> {
        let decision = match self.unscripted.then(|| showcase::choose(&showcase::transcript(body)))
        {
            Some(Some(act)) => Decision {
                gap: SHOWCASE_GAP,
                ..Decision::now(Outcome::Say { text: act.text, reasoning: None, calls: act.calls })
            },
            _ => self.script.decide(newest),
        };
        match decision.outcome {
            Outcome::OffScript(message) => {
                Err(ApiError::other(409, "invalid_request_error", message, Some("off_script"))
                    .into())
            }
            Outcome::Fail(failure) => {
                let error = ApiError {
                    status: failure.status,
                    message: failure.message,
                    kind: failure.kind,
                    param: None,
                    code: failure.code,
                };
                Err(Prepared { delay: decision.delay, ..error.into() })
            }
            Outcome::Say { text, reasoning, calls } => {
                let calls = calls
                    .into_iter()
                    .map(|planned| {
                        self.calls += 1;
                        Call { n: self.calls, name: planned.name, arguments: planned.arguments }
                    })
                    .collect();
                Ok((decision.delay, decision.gap, Turn { text, reasoning, calls }))
            }
        }
    }

    fn next_response(&mut self) -> u64 {
        self.responses += 1;
        self.responses
    }
}

/// `Authorization: Bearer <key>`: with a configured key it must be that key;
/// without one any non-empty key passes.
fn authorize(expected: Option<&str>, header: Option<&str>) -> Result<(), ApiError> {
    let given = header
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim())
        .filter(|key| !key.is_empty());
    match (given, expected) {
        (None, _) => Err(ApiError::other(
            401,
            "invalid_request_error",
            "You didn't provide an API key. Send it in the Authorization header as 'Bearer YOUR_KEY'.",
            Some("invalid_api_key"),
        )),
        (Some(given), Some(expected)) if given != expected => Err(ApiError::other(
            401,
            "invalid_request_error",
            "Incorrect API key provided. Use the key this stand-in model was started with.",
            Some("invalid_api_key"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
