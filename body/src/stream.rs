//! Replies as the model writes them: asking for a stream, reading its
//! server-sent events, and putting the whole answer together from them.
//!
//! - chat completions: `data:` chunks whose `choices[0].delta` carries the
//!   text (`content`), reasoning (`reasoning_content` or `reasoning`) and
//!   tool calls in pieces by `index` (the first piece names the call's `id`
//!   and function); the token counts come in a last chunk with `usage`
//!   (asked for with `stream_options.include_usage`); `data: [DONE]` ends it.
//! - the Responses API: typed events; `response.output_text.delta` carries
//!   the text, `response.output_item.done` each whole item, and
//!   `response.completed` (or `response.incomplete`) the whole response with
//!   its usage, which is the answer.
//!
//! A provider that refuses to stream says so with a 400 that names
//! `stream` ([`refuses`]), or answers a stream request whole, as JSON; the
//! turn then asks it without a stream from then on.
//!
//! Invariants: pure (no I/O); the text handed out as deltas, joined, is the
//! text of the answer [`Reading::finish`] gives, when the stream was whole;
//! an `error` in the stream is the stream's failure, not an answer.

use serde_json::{json, Value};

use crate::config::Protocol;
use crate::model::{self, Answer, ToolCall};

/// Marks `request` (a body of [`model::request`]) as asking for a stream,
/// with the token counts at its end.
pub fn ask_for(protocol: Protocol, request: &mut Value) {
    request["stream"] = json!(true);
    if protocol == Protocol::Chat {
        request["stream_options"] = json!({"include_usage": true});
    }
}

/// Whether an answer refuses a request because it asked for a stream: a
/// 400 (or 422) whose body names `stream`.
pub fn refuses(status: u16, body: &[u8]) -> bool {
    (status == 400 || status == 422)
        && String::from_utf8_lossy(body).to_ascii_lowercase().contains("stream")
}

/// Server-sent events, a line at a time: the `data` of each event once its
/// blank line arrives.
#[derive(Default)]
pub struct Events {
    data: Vec<String>,
}

impl Events {
    /// Takes one line (without its line end); `Some` with the event's data
    /// when the line ends an event that has any.
    pub fn line(&mut self, line: &str) -> Option<String> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            return (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"));
        }
        if let Some(data) = line.strip_prefix("data:") {
            self.data.push(data.strip_prefix(' ').unwrap_or(data).to_owned());
        }
        // `event:`, `id:`, `retry:` and comments: the data says its type.
        None
    }
}

/// What one event's data did to the answer being read.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// More of the reply's text.
    Text(String),
    /// Nothing to show.
    Quiet,
    /// The stream says it is over.
    Done,
}

/// An answer being read from a stream.
pub struct Reading {
    protocol: Protocol,
    text: String,
    reasoning: String,
    /// Chat completions: the calls by index, as their pieces arrive.
    calls: Vec<ToolCall>,
    usage: Option<(u64, u64)>,
    /// Responses: the items done so far, and the whole response once sent.
    items: Vec<Value>,
    whole: Option<Value>,
    /// Chat completions: a choice finished, or `[DONE]` came.
    finished: bool,
}

impl Reading {
    pub fn new(protocol: Protocol) -> Reading {
        Reading {
            protocol,
            text: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            usage: None,
            items: Vec::new(),
            whole: None,
            finished: false,
        }
    }

    /// The reply's text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Takes one event's data. `Err` is a failure the stream reports.
    pub fn take(&mut self, data: &str) -> Result<Step, String> {
        if data.trim() == "[DONE]" {
            self.finished = true;
            return Ok(Step::Done);
        }
        let event: Value = serde_json::from_str(data)
            .map_err(|e| format!("a streamed event is not JSON ({e}): {data}"))?;
        if let Some(error) = error_of(&event) {
            return Err(error);
        }
        match self.protocol {
            Protocol::Chat => Ok(self.chat(&event)),
            Protocol::Responses => Ok(self.responses(event)),
        }
    }

    fn chat(&mut self, chunk: &Value) -> Step {
        let usage = &chunk["usage"];
        if let Some(counts) =
            usage["prompt_tokens"].as_u64().zip(usage["completion_tokens"].as_u64())
        {
            self.usage = Some(counts);
        }
        let choice = &chunk["choices"][0];
        self.finished |= choice["finish_reason"].is_string();
        let delta = &choice["delta"];
        for field in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[field].as_str() {
                self.reasoning.push_str(text);
            }
        }
        for piece in delta["tool_calls"].as_array().into_iter().flatten() {
            let at = piece["index"].as_u64().map_or(self.calls.len(), |i| i as usize);
            while self.calls.len() <= at {
                let n = self.calls.len();
                let id = format!("call_{n}");
                self.calls.push(ToolCall { id, name: String::new(), arguments: String::new() });
            }
            let call = &mut self.calls[at];
            if let Some(id) = piece["id"].as_str() {
                call.id = id.to_owned();
            }
            let function = &piece["function"];
            if let Some(name) = function["name"].as_str() {
                call.name.push_str(name);
            }
            if let Some(arguments) = function["arguments"].as_str() {
                call.arguments.push_str(arguments);
            }
        }
        match delta["content"].as_str() {
            Some(text) if !text.is_empty() => {
                self.text.push_str(text);
                Step::Text(text.to_owned())
            }
            _ => Step::Quiet,
        }
    }

    fn responses(&mut self, event: Value) -> Step {
        match event["type"].as_str() {
            Some("response.output_text.delta") => {
                let text = event["delta"].as_str().unwrap_or_default();
                self.text.push_str(text);
                Step::Text(text.to_owned())
            }
            Some("response.output_item.done") => {
                self.items.push(event["item"].clone());
                Step::Quiet
            }
            Some("response.completed" | "response.incomplete") => {
                self.whole = Some(event["response"].clone());
                Step::Done
            }
            _ => Step::Quiet,
        }
    }

    /// The answer read. `Err` when the stream ended before its answer was
    /// whole (no `response.completed`; no `finish_reason` nor `[DONE]`).
    pub fn finish(self) -> Result<Answer, String> {
        match self.protocol {
            Protocol::Responses => {
                let whole = match self.whole {
                    Some(whole) => whole,
                    None => return Err("the stream ended before response.completed".to_owned()),
                };
                let mut answer =
                    model::parse_answer(Protocol::Responses, whole.to_string().as_bytes())?;
                if answer.text.is_empty() && answer.calls.is_empty() && !self.items.is_empty() {
                    // A response that lists its output only in the items sent before.
                    let items = json!({"output": self.items, "usage": whole["usage"]});
                    answer =
                        model::parse_answer(Protocol::Responses, items.to_string().as_bytes())?;
                }
                Ok(answer)
            }
            Protocol::Chat => {
                if !self.finished {
                    return Err("the stream ended before its choice finished".to_owned());
                }
                if let Some(call) = self.calls.iter().find(|c| c.name.is_empty()) {
                    return Err(format!("the stream named no function for tool call {}", call.id));
                }
                let reasoning = (!self.reasoning.trim().is_empty())
                    .then_some(self.reasoning)
                    .into_iter()
                    .collect();
                Ok(Answer { text: self.text, calls: self.calls, reasoning, usage: self.usage })
            }
        }
    }
}

/// The message of an error a stream carries: a chat chunk's `error`, or a
/// Responses `error` or `response.failed` event.
fn error_of(event: &Value) -> Option<String> {
    let message = |error: &Value| {
        error["message"].as_str().map(str::to_owned).unwrap_or_else(|| error.to_string())
    };
    match event["type"].as_str() {
        Some("error") => Some(message(event)),
        Some("response.failed") => Some(message(&event["response"]["error"])),
        _ => event.get("error").filter(|e| !e.is_null()).map(message),
    }
}
