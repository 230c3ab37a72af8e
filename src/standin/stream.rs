//! Answers as server-sent events, for requests that say `stream: true`: the
//! frames of one turn on either protocol, as the providers send them.
//!
//! Chat completions: `data:` lines of `chat.completion.chunk` objects. The
//! first delta names the role; text follows a word at a time; each tool call
//! opens with its `index`, `id`, `type` and name (arguments empty), then its
//! arguments in pieces under the same index; the last choice chunk carries
//! `finish_reason`; with `stream_options.include_usage` every chunk has
//! `usage: null` and one more chunk, with no choices, has the counts; then
//! `data: [DONE]`.
//!
//! Responses: typed events, each as `event:` and `data:` lines with a
//! `sequence_number` counted from 0: `response.created` and
//! `response.in_progress` (the response with no output yet), then per output
//! item `response.output_item.added`, its deltas (reasoning summary text,
//! `response.output_text.delta`, `response.function_call_arguments.delta`)
//! and their `.done` events, `response.output_item.done`; last
//! `response.completed` with the whole response and its usage.
//!
//! Invariants: pure (no I/O, no clock); the pieces of a text joined are the
//! text, so a client that accumulates the deltas gets the whole answer's
//! text and arguments exactly; every frame ends with a blank line.
use serde_json::{json, Value};

use super::turn::{Turn, Usage};

/// How many characters of a call's arguments one delta carries at most.
pub const ARGUMENT_PIECE: usize = 16;

/// What a request asked of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Asked {
    /// `stream: true`.
    pub stream: bool,
    /// `stream_options.include_usage` (chat completions only).
    pub include_usage: bool,
}

/// Splits text into the pieces a model streams: a word with the white space
/// before it. Joined, they are `text`.
pub fn words(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() && in_word && !piece.is_empty() {
            pieces.push(std::mem::take(&mut piece));
        }
        in_word = !c.is_whitespace();
        piece.push(c);
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces
}

/// Splits a call's arguments into pieces of at most [`ARGUMENT_PIECE`]
/// characters; no pieces for empty arguments.
pub fn slices(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(ARGUMENT_PIECE).map(|c| c.iter().collect()).collect()
}

fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// The chat completion chunks for `turn`, ending with `data: [DONE]`; `n`
/// numbers the completion as [`super::chat::render`] does.
pub fn chat(
    model: &str,
    n: u64,
    created: u64,
    turn: &Turn,
    usage: Usage,
    asked: Asked,
) -> Vec<String> {
    let id = format!("chatcmpl-{n}");
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if asked.include_usage {
            chunk["usage"] = Value::Null;
        }
        data(&chunk)
    };
    let mut frames = Vec::new();
    let opening = if turn.text.is_some() { json!("") } else { Value::Null };
    frames.push(chunk(json!({"role": "assistant", "content": opening, "refusal": null}), None));
    if let Some(reasoning) = &turn.reasoning {
        for piece in words(reasoning) {
            frames.push(chunk(json!({"reasoning_content": piece}), None));
        }
    }
    if let Some(text) = &turn.text {
        for piece in words(text) {
            frames.push(chunk(json!({"content": piece}), None));
        }
    }
    for (index, call) in turn.calls.iter().enumerate() {
        let opening = json!({"index": index, "id": call.call_id(), "type": "function",
                             "function": {"name": call.name, "arguments": ""}});
        frames.push(chunk(json!({"tool_calls": [opening]}), None));
        for piece in slices(&call.arguments) {
            let delta = json!({"index": index, "function": {"arguments": piece}});
            frames.push(chunk(json!({"tool_calls": [delta]}), None));
        }
    }
    let finish = if turn.calls.is_empty() { "stop" } else { "tool_calls" };
    frames.push(chunk(json!({}), Some(finish)));
    if asked.include_usage {
        frames.push(data(&json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null, "choices": [],
            "usage": super::chat::usage(usage),
        })));
    }
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// The Responses events that build `whole` (a response as
/// [`super::responses::render`] shapes it) item by item.
pub fn responses(whole: &Value) -> Vec<String> {
    let mut events = Events::default();
    let mut opening = whole.clone();
    opening["status"] = json!("in_progress");
    opening["output"] = json!([]);
    opening["usage"] = Value::Null;
    events.push("response.created", json!({"response": opening}));
    events.push("response.in_progress", json!({"response": opening}));
    let output = whole["output"].as_array().cloned().unwrap_or_default();
    for (at, item) in output.iter().enumerate() {
        let id = item["id"].clone();
        let at_item = |fields: Value| {
            let mut fields = fields;
            fields["item_id"] = id.clone();
            fields["output_index"] = json!(at);
            fields
        };
        match item["type"].as_str() {
            Some("reasoning") => {
                let mut empty = item.clone();
                empty["summary"] = json!([]);
                events
                    .push("response.output_item.added", json!({"output_index": at, "item": empty}));
                let parts = item["summary"].as_array().cloned().unwrap_or_default();
                for (i, part) in parts.iter().enumerate() {
                    let text = part["text"].as_str().unwrap_or_default();
                    let blank = json!({"type": "summary_text", "text": ""});
                    let part_at = |fields: Value| {
                        let mut fields = at_item(fields);
                        fields["summary_index"] = json!(i);
                        fields
                    };
                    events.push(
                        "response.reasoning_summary_part.added",
                        part_at(json!({"part": blank})),
                    );
                    for piece in words(text) {
                        events.push(
                            "response.reasoning_summary_text.delta",
                            part_at(json!({"delta": piece})),
                        );
                    }
                    events.push(
                        "response.reasoning_summary_text.done",
                        part_at(json!({"text": text})),
                    );
                    events.push(
                        "response.reasoning_summary_part.done",
                        part_at(json!({"part": part})),
                    );
                }
            }
            Some("message") => {
                let mut empty = item.clone();
                empty["status"] = json!("in_progress");
                empty["content"] = json!([]);
                events
                    .push("response.output_item.added", json!({"output_index": at, "item": empty}));
                let parts = item["content"].as_array().cloned().unwrap_or_default();
                for (i, part) in parts.iter().enumerate() {
                    let text = part["text"].as_str().unwrap_or_default();
                    let blank = json!({"type": "output_text", "text": "", "annotations": []});
                    let part_at = |fields: Value| {
                        let mut fields = at_item(fields);
                        fields["content_index"] = json!(i);
                        fields
                    };
                    events.push("response.content_part.added", part_at(json!({"part": blank})));
                    for piece in words(text) {
                        let delta = json!({"delta": piece, "logprobs": []});
                        events.push("response.output_text.delta", part_at(delta));
                    }
                    let done = json!({"text": text, "logprobs": []});
                    events.push("response.output_text.done", part_at(done));
                    events.push("response.content_part.done", part_at(json!({"part": part})));
                }
            }
            Some("function_call") => {
                let mut empty = item.clone();
                empty["status"] = json!("in_progress");
                empty["arguments"] = json!("");
                events
                    .push("response.output_item.added", json!({"output_index": at, "item": empty}));
                let arguments = item["arguments"].as_str().unwrap_or_default();
                for piece in slices(arguments) {
                    events.push(
                        "response.function_call_arguments.delta",
                        at_item(json!({"delta": piece})),
                    );
                }
                let done = json!({"arguments": arguments});
                events.push("response.function_call_arguments.done", at_item(done));
            }
            _ => {
                events
                    .push("response.output_item.added", json!({"output_index": at, "item": item}));
            }
        }
        events.push("response.output_item.done", json!({"output_index": at, "item": item}));
    }
    events.push("response.completed", json!({"response": whole}));
    events.frames
}

/// Typed events numbered in the order they are sent.
#[derive(Default)]
struct Events {
    frames: Vec<String>,
}

impl Events {
    fn push(&mut self, kind: &str, fields: Value) {
        let mut fields = fields;
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.frames.len());
        self.frames.push(format!("event: {kind}\ndata: {fields}\n\n"));
    }
}

#[cfg(test)]
mod tests;
