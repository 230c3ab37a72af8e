//! `POST /v1/chat/completions`: checks a request as strictly as OpenAI's chat
//! completions API reads, and shapes a turn as its whole answer (streamed
//! answers are [`super::stream`]'s).
//!
//! Invariants: a request that passes [`validate`] has a model, at least one
//! message, and every assistant tool call answered by a tool message before
//! the next other message; anything else is refused with the error the real
//! service gives (its wording, where known). [`render`] answers with
//! `finish_reason` `tool_calls` exactly when there are tool calls.
//!
//! Written from OpenAI's published reference, not tried against the service.
//! Unsure: the wording for nested unknown fields (older answers said
//! "Additional properties are not allowed"; this uses the newer
//! `Unknown parameter: 'messages[0].x'.`); whether the service still
//! refuses an assistant message with neither content nor tool calls; the
//! exact set of `reasoning_effort` values (it depends on the model). An
//! assistant message may carry `annotations`, as the SDKs send back the
//! message they received; `reasoning_content` is refused there, as OpenAI
//! refuses it and some compatible providers ask that it not be sent back. Limits
//! that depend on the model (`temperature` or `max_tokens` refused by reasoning
//! models) are not imitated, nor are the deprecated `functions` (accepted,
//! never called) or tools other than `function`.
use serde_json::{json, Map, Value};

use super::stream::Asked;
use super::turn::{Newest, Turn, Usage};
use super::wire::{
    check_function_name, check_stream, index, non_empty, tool_choice, ApiError, Fields, EFFORTS,
};

/// Top-level fields of a chat completions request.
const TOP: &[&str] = &[
    "model",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// What the stand-in needs from a valid request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub model: String,
    pub newest: Newest,
    /// Whether to stream, and with usage.
    pub asked: Asked,
}

/// Checks a request body; the first fault is refused.
pub fn validate(body: &Value) -> Result<Checked, ApiError> {
    let Value::Object(map) = body else {
        return Err(ApiError::invalid("The request body must be a JSON object.", None, None));
    };
    if let Some(key) = map.keys().find(|k| !TOP.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            format!("Unrecognized request argument supplied: {key}"),
            None,
            None,
        ));
    }
    let top = Fields { map, path: String::new() };
    let model = match top.opt("model") {
        None => return Err(ApiError::invalid("you must provide a model parameter", None, None)),
        Some(Value::String(model)) => model.clone(),
        Some(other) => return Err(ApiError::wrong_type("model", "a string", other)),
    };
    let asked = check_options(&top)?;
    let has_tools = match top.opt("tools") {
        Some(tools) => {
            check_tools(tools)?;
            true
        }
        None => false,
    };
    check_tool_choice(&top, has_tools)?;
    let messages = non_empty(top.req("messages")?, "messages")?;
    let newest = check_messages(messages)?;
    Ok(Checked { model, newest, asked })
}

/// The optional scalar fields the stand-in reads or must refuse; returns
/// what was asked of a stream.
fn check_options(top: &Fields) -> Result<Asked, ApiError> {
    let asked = check_stream(top, true)?;
    if let Some(n) = top.opt_int("n", 1)? {
        if n != 1 {
            return Err(ApiError::bad_value("n", &n.to_string(), &["1"]));
        }
    }
    top.opt_number("temperature", 0.0, 2.0)?;
    top.opt_number("top_p", 0.0, 1.0)?;
    top.opt_number("presence_penalty", -2.0, 2.0)?;
    top.opt_number("frequency_penalty", -2.0, 2.0)?;
    top.opt_int("max_tokens", 1)?;
    top.opt_int("max_completion_tokens", 1)?;
    top.opt_int("seed", i64::MIN)?;
    top.opt_enum("reasoning_effort", EFFORTS)?;
    top.opt_enum("verbosity", &["low", "medium", "high"])?;
    top.opt_bool("parallel_tool_calls")?;
    top.opt_bool("store")?;
    top.opt_bool("logprobs")?;
    top.opt_str("user")?;
    top.opt_str("prompt_cache_key")?;
    top.opt_str("safety_identifier")?;
    top.opt_object("metadata")?;
    top.opt_object("response_format")?;
    Ok(asked)
}

fn check_tools(tools: &Value) -> Result<(), ApiError> {
    for (i, tool) in non_empty(tools, "tools")?.iter().enumerate() {
        let tool = Fields::of(tool, &index("tools", i))?;
        let kind = tool.req_str("type")?;
        if kind != "function" {
            return Err(ApiError::bad_value(&tool.path_of("type"), kind, &["function"]));
        }
        tool.only(&["type", "function"])?;
        let Some(function) = tool.opt_object("function")? else {
            return Err(ApiError::missing(&tool.path_of("function")));
        };
        check_function_name(function.req_str("name")?, &function.path_of("name"))?;
        function.only(&["name", "description", "parameters", "strict"])?;
        function.opt_str("description")?;
        function.opt_object("parameters")?;
        function.opt_bool("strict")?;
    }
    Ok(())
}

fn check_tool_choice(top: &Fields, has_tools: bool) -> Result<(), ApiError> {
    for key in ["tool_choice", "parallel_tool_calls"] {
        if top.opt(key).is_some() && !has_tools {
            return Err(ApiError::invalid(
                format!("Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified."),
                Some(key),
                None,
            ));
        }
    }
    // Chat completions name the function in an object of its own.
    tool_choice(top, |choice| {
        choice.only(&["type", "function"])?;
        let Some(function) = choice.opt_object("function")? else {
            return Err(ApiError::missing("tool_choice.function"));
        };
        function.only(&["name"])?;
        function.req_str("name").map(|_| ())
    })
}

/// Checks every message and the pairing of tool calls with tool messages;
/// returns the newest user or tool input.
fn check_messages(messages: &[Value]) -> Result<Newest, ApiError> {
    let mut newest = Newest::Nothing;
    // Tool call ids of the latest assistant message not yet answered.
    let mut waiting: Vec<String> = Vec::new();
    let mut answering = false;
    for (i, message) in messages.iter().enumerate() {
        let message = Fields::of(message, &index("messages", i))?;
        let role = message.req_str("role")?;
        if !ROLES.contains(&role) {
            return Err(ApiError::bad_value(&message.path_of("role"), role, ROLES));
        }
        if role != "tool" && !waiting.is_empty() {
            return Err(unanswered(&waiting, &message.path_of("role")));
        }
        if role != "tool" {
            answering = false;
        }
        match role {
            "system" | "developer" => {
                message.only(&["role", "content", "name"])?;
                message.opt_str("name")?;
                content(&message, &["text"])?;
            }
            "user" => {
                message.only(&["role", "content", "name"])?;
                message.opt_str("name")?;
                newest =
                    Newest::User(content(&message, &["text", "image_url", "input_audio", "file"])?);
            }
            "assistant" => {
                message.only(&[
                    "role",
                    "content",
                    "name",
                    "refusal",
                    "tool_calls",
                    "function_call",
                    "audio",
                    "annotations",
                ])?;
                message.opt_str("name")?;
                message.opt_str("refusal")?;
                waiting = tool_calls(&message)?;
                answering = !waiting.is_empty();
                if message.opt("content").is_some() {
                    content(&message, &["text", "refusal"])?;
                } else if waiting.is_empty() && message.opt("function_call").is_none() {
                    return Err(ApiError::invalid(
                        format!(
                            "Invalid '{}': an assistant message needs 'content' or 'tool_calls'.",
                            message.path
                        ),
                        Some(&message.path),
                        None,
                    ));
                }
            }
            _ => {
                message.only(&["role", "content", "tool_call_id"])?;
                let id = message.req_str("tool_call_id")?;
                if !answering {
                    return Err(ApiError::invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
                        Some(&message.path_of("role")),
                        None,
                    ));
                }
                let Some(at) = waiting.iter().position(|w| w == id) else {
                    return Err(ApiError::invalid(
                        format!("Invalid parameter: 'tool_call_id' of '{id}' not found in the 'tool_calls' of the preceding assistant message, or already answered."),
                        Some(&message.path_of("tool_call_id")),
                        None,
                    ));
                };
                waiting.remove(at);
                newest = Newest::Tool(content(&message, &["text"])?);
            }
        }
    }
    if !waiting.is_empty() {
        return Err(unanswered(&waiting, "messages"));
    }
    Ok(newest)
}

fn unanswered(waiting: &[String], param: &str) -> ApiError {
    ApiError::invalid(
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            waiting.join(", ")
        ),
        Some(param),
        None,
    )
}

/// Checks an assistant message's `tool_calls`; returns their ids.
fn tool_calls(message: &Fields) -> Result<Vec<String>, ApiError> {
    let Some(calls) = message.opt("tool_calls") else { return Ok(Vec::new()) };
    let path = message.path_of("tool_calls");
    let mut ids = Vec::new();
    for (i, call) in non_empty(calls, &path)?.iter().enumerate() {
        let call = Fields::of(call, &index(&path, i))?;
        call.only(&["id", "type", "function"])?;
        let id = call.req_str("id")?;
        let kind = call.req_str("type")?;
        if kind != "function" {
            return Err(ApiError::bad_value(&call.path_of("type"), kind, &["function"]));
        }
        let Some(function) = call.opt_object("function")? else {
            return Err(ApiError::missing(&call.path_of("function")));
        };
        function.only(&["name", "arguments"])?;
        function.req_str("name")?;
        function.req_str("arguments")?;
        ids.push(id.to_owned());
    }
    Ok(ids)
}

/// Checks a message's required `content` (a string or an array of parts of
/// the given types); returns its text.
fn content(message: &Fields, kinds: &[&str]) -> Result<String, ApiError> {
    let path = message.path_of("content");
    match message.req("content")? {
        Value::String(text) => Ok(text.clone()),
        parts @ Value::Array(_) => {
            let mut texts = Vec::new();
            for (i, part) in non_empty(parts, &path)?.iter().enumerate() {
                let part = Fields::of(part, &index(&path, i))?;
                let kind = part.req_str("type")?;
                if !kinds.contains(&kind) {
                    return Err(ApiError::bad_value(&part.path_of("type"), kind, kinds));
                }
                if kind == "text" {
                    part.only(&["type", "text"])?;
                    texts.push(part.req_str("text")?.to_owned());
                } else {
                    part.only(&["type", kind])?;
                    if kind == "refusal" {
                        part.req_str(kind)?;
                    } else if kind == "image_url" {
                        let image = Fields::of(part.req(kind)?, &part.path_of(kind))?;
                        image.only(&["url", "detail"])?;
                        image.opt_enum("detail", &["auto", "low", "high"])?;
                        super::image::check_url(image.req_str("url")?, &image.path_of("url"))?;
                    } else {
                        part.req(kind).and_then(|v| Fields::of(v, &part.path_of(kind)))?;
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        other => Err(ApiError::wrong_type(&path, "one of a string or array of objects", other)),
    }
}

/// The non-streaming answer for `turn`; `n` numbers the completion.
pub fn render(model: &str, n: u64, created: u64, turn: &Turn, usage: Usage) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(turn.text));
    message.insert("refusal".into(), Value::Null);
    message.insert("annotations".into(), json!([]));
    if let Some(reasoning) = &turn.reasoning {
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    if !turn.calls.is_empty() {
        let calls: Vec<Value> = turn
            .calls
            .iter()
            .map(|c| {
                json!({"id": c.call_id(), "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let finish = if turn.calls.is_empty() { "stop" } else { "tool_calls" };
    json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": self::usage(usage),
    })
}

/// The `usage` object of an answer, whole or streamed.
pub fn usage(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.total(),
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    })
}

#[cfg(test)]
mod tests;
