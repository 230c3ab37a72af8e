//! `POST /v1/responses`: checks a request as strictly as OpenAI's Responses
//! API reads, and shapes a turn as its whole answer (streamed answers are
//! [`super::stream`]'s).
//!
//! Invariants: a request that passes [`validate`] has a model and an input in
//! which every `function_call_output` answers a `function_call` before it (in
//! the input or in the stored response named by `previous_response_id`) and
//! every such call is answered; unknown fields anywhere are refused with
//! `Unknown parameter: '<path>'.`. [`render`] lists reasoning, then the
//! message, then the function calls.
//!
//! Written from OpenAI's published reference, not tried against the service.
//! Unsure: whether `input` may be left out (the stand-in requires it);
//! whether an empty content array is refused (accepted here); the full list
//! of `include` values (any string is accepted); whether `strict` defaults to
//! true for function tools and so demands a closed schema (not imitated);
//! whether reasoning items sent back with `store: false` need their
//! `encrypted_content` (not checked). Hosted tools, `background`,
//! `conversation` and `prompt` are refused as things the stand-in cannot do.
use serde_json::{json, Value};

use super::stream::Asked;
use super::turn::{Newest, Turn, Usage};
use super::wire::{
    check_function_name, check_stream, index, tool_choice, ApiError, Fields, EFFORTS,
};
use input::{check_input, check_pairs};

mod input;

/// Top-level fields of a Responses request.
const TOP: &[&str] = &[
    "model",
    "input",
    "background",
    "conversation",
    "include",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

const ENCRYPTED: &str = "reasoning.encrypted_content";

/// What the stand-in needs from a valid request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub model: String,
    pub newest: Newest,
    /// `store` was not false: the response may be named by a later request.
    pub store: bool,
    /// `include` asked for `reasoning.encrypted_content`.
    pub encrypted: bool,
    pub previous: Option<String>,
    /// `stream: true`.
    pub stream: bool,
}

/// Checks a request body. `stored` gives the call ids of a response this
/// server stored, by its id.
pub fn validate(
    body: &Value,
    stored: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<Checked, ApiError> {
    if !body.is_object() {
        return Err(ApiError::invalid("The request body must be a JSON object.", None, None));
    }
    let top = Fields::of(body, "")?;
    top.only(TOP)?;
    let model = top.req_str("model")?.to_owned();
    let stream = check_options(&top)?.stream;
    let encrypted = check_include(&top)?;
    if let Some(tools) = top.opt_array("tools")? {
        for (i, tool) in tools.iter().enumerate() {
            check_tool(tool, &index("tools", i))?;
        }
    }
    check_tool_choice(&top)?;
    let previous = top.opt_str("previous_response_id")?.map(str::to_owned);
    let previous_calls = match &previous {
        None => Vec::new(),
        Some(id) => stored(id).ok_or_else(|| {
            ApiError::invalid(
                format!("Previous response with id '{id}' not found."),
                Some("previous_response_id"),
                Some("previous_response_not_found"),
            )
        })?,
    };
    let newest = match top.req("input")? {
        Value::String(text) => {
            check_pairs(previous_calls, &[])?;
            Newest::User(text.clone())
        }
        Value::Array(items) => check_input(items, previous_calls)?,
        other => {
            return Err(ApiError::wrong_type(
                "input",
                "one of a string or array of input items",
                other,
            ))
        }
    };
    let store = top.opt_bool("store")? != Some(false);
    Ok(Checked { model, newest, store, encrypted, previous, stream })
}

fn check_options(top: &Fields) -> Result<Asked, ApiError> {
    let asked = check_stream(top, false)?;
    let cannot = [("background", top.opt_bool("background")? == Some(true))]
        .into_iter()
        .chain(["conversation", "prompt"].map(|k| (k, top.opt(k).is_some())));
    for (key, used) in cannot {
        if used {
            return Err(ApiError::invalid(
                format!("The stand-in model cannot imitate '{key}'; leave it out."),
                Some(key),
                Some("unsupported_parameter"),
            ));
        }
    }
    top.opt_str("instructions")?;
    top.opt_int("max_output_tokens", 16)?;
    top.opt_int("max_tool_calls", 1)?;
    top.opt_int("top_logprobs", 0)?;
    top.opt_number("temperature", 0.0, 2.0)?;
    top.opt_number("top_p", 0.0, 1.0)?;
    top.opt_bool("parallel_tool_calls")?;
    top.opt_bool("store")?;
    top.opt_enum("truncation", &["auto", "disabled"])?;
    for key in ["user", "service_tier", "prompt_cache_key", "safety_identifier"] {
        top.opt_str(key)?;
    }
    if let Some(metadata) = top.opt_object("metadata")? {
        for key in metadata.map.keys() {
            metadata.req_str(key)?;
        }
    }
    if let Some(text) = top.opt_object("text")? {
        text.only(&["format", "verbosity"])?;
        text.opt_object("format")?;
        text.opt_enum("verbosity", &["low", "medium", "high"])?;
    }
    if let Some(reasoning) = top.opt_object("reasoning")? {
        reasoning.only(&["effort", "summary", "generate_summary"])?;
        reasoning.opt_enum("effort", EFFORTS)?;
        reasoning.opt_enum("summary", &["auto", "concise", "detailed"])?;
        reasoning.opt_enum("generate_summary", &["auto", "concise", "detailed"])?;
    }
    Ok(asked)
}

/// Checks `include`; says whether encrypted reasoning was asked for.
fn check_include(top: &Fields) -> Result<bool, ApiError> {
    let Some(include) = top.opt_array("include")? else { return Ok(false) };
    let mut encrypted = false;
    for (i, value) in include.iter().enumerate() {
        let item = value
            .as_str()
            .ok_or_else(|| ApiError::wrong_type(&index("include", i), "a string", value))?;
        encrypted |= item == ENCRYPTED;
    }
    Ok(encrypted)
}

fn check_tool(tool: &Value, path: &str) -> Result<(), ApiError> {
    let tool = Fields::of(tool, path)?;
    let kind = tool.req_str("type")?;
    if kind != "function" {
        return Err(ApiError::invalid(
            format!("The stand-in model offers only tools of type 'function'; '{kind}' is a hosted tool it cannot imitate."),
            Some(&tool.path_of("type")),
            Some("invalid_value"),
        ));
    }
    let name = tool.req_str("name")?;
    tool.only(&["type", "name", "description", "parameters", "strict"])?;
    check_function_name(name, &tool.path_of("name"))?;
    tool.opt_str("description")?;
    tool.opt_object("parameters")?;
    tool.opt_bool("strict")?;
    Ok(())
}

fn check_tool_choice(top: &Fields) -> Result<(), ApiError> {
    // The Responses API names the function beside its type.
    tool_choice(top, |choice| {
        choice.only(&["type", "name"])?;
        choice.req_str("name").map(|_| ())
    })
}

/// The non-streaming answer for `turn`; `n` numbers the response and its items.
pub fn render(n: u64, created: u64, checked: &Checked, turn: &Turn, usage: Usage) -> Value {
    let mut output = Vec::new();
    if let Some(reasoning) = &turn.reasoning {
        let mut item = json!({"type": "reasoning", "id": format!("rs_{n}"),
                              "summary": [{"type": "summary_text", "text": reasoning}]});
        if checked.encrypted {
            item["encrypted_content"] = json!(format!("standin-reasoning-{n}"));
        }
        output.push(item);
    }
    if let Some(text) = &turn.text {
        output.push(json!({"type": "message", "id": format!("msg_{n}"), "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}));
    }
    for call in &turn.calls {
        output.push(json!({"type": "function_call", "id": format!("fc_{}", call.n),
            "call_id": call.call_id(), "name": call.name, "arguments": call.arguments,
            "status": "completed"}));
    }
    json!({
        "id": response_id(n),
        "object": "response",
        "created_at": created,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": checked.model,
        "output": output,
        "previous_response_id": checked.previous,
        "store": checked.store,
        "usage": {
            "input_tokens": usage.input,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.total(),
        },
    })
}

/// The id of the `n`th response.
pub fn response_id(n: u64) -> String {
    format!("resp_{n}")
}

#[cfg(test)]
mod tests;
