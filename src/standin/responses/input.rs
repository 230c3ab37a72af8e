//! The `input` of a Responses request: its items (messages, function calls
//! and their outputs, reasoning, references) and the pairing of calls with
//! outputs.
//!
//! Invariants: a `function_call_output` must follow the `function_call` it
//! answers (in the input, or among the calls of the previous response), and
//! every call must be answered; an item's `id`, when given, has the prefix the
//! service gives its kind (`fc`, `msg`, `rs`).
use serde_json::Value;

use crate::standin::turn::Newest;
use crate::standin::wire::{index, ApiError, Fields};

const ITEM_TYPES: &[&str] =
    &["message", "function_call", "function_call_output", "reasoning", "item_reference"];
const INPUT_PARTS: &[&str] = &["input_text", "input_image", "input_file"];
const OUTPUT_PARTS: &[&str] = &["output_text", "refusal"];

/// Checks the input items and their call pairing; returns the newest input.
pub fn check_input(items: &[Value], previous_calls: Vec<String>) -> Result<Newest, ApiError> {
    let mut newest = Newest::Nothing;
    let mut calls = previous_calls;
    let mut answered: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item = Fields::of(item, &index("input", i))?;
        let kind = match item.opt_str("type")? {
            Some(kind) => kind,
            None if item.opt("role").is_some() => "message",
            None => return Err(ApiError::missing(&item.path_of("type"))),
        };
        match kind {
            "message" => {
                if let Some(text) = check_message(&item)? {
                    newest = Newest::User(text);
                }
            }
            "function_call" => {
                item.only(&["type", "id", "call_id", "name", "arguments", "status"])?;
                check_id(&item, "fc")?;
                let call_id = item.req_str("call_id")?;
                item.req_str("name")?;
                item.req_str("arguments")?;
                check_status(&item)?;
                calls.push(call_id.to_owned());
            }
            "function_call_output" => {
                item.only(&["type", "id", "call_id", "output", "status"])?;
                let call_id = item.req_str("call_id")?;
                if !calls.iter().any(|c| c == call_id) {
                    return Err(ApiError::invalid(
                        format!(
                            "No tool call found for function call output with call_id {call_id}."
                        ),
                        Some("input"),
                        None,
                    ));
                }
                let output = match item.req("output")? {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts_text(parts, &item.path_of("output"), INPUT_PARTS)?,
                    other => {
                        return Err(ApiError::wrong_type(
                            &item.path_of("output"),
                            "one of a string or array of content parts",
                            other,
                        ))
                    }
                };
                check_status(&item)?;
                answered.push(call_id.to_owned());
                newest = Newest::Tool(output);
            }
            "reasoning" => {
                item.only(&["type", "id", "summary", "content", "encrypted_content", "status"])?;
                check_id(&item, "rs")?;
                let summary = item
                    .opt_array("summary")?
                    .ok_or_else(|| ApiError::missing(&item.path_of("summary")))?;
                parts_text(summary, &item.path_of("summary"), &["summary_text"])?;
                item.opt_str("encrypted_content")?;
            }
            "item_reference" => {
                item.only(&["type", "id"])?;
                item.req_str("id")?;
            }
            other => return Err(ApiError::bad_value(&item.path_of("type"), other, ITEM_TYPES)),
        }
    }
    check_pairs(calls, &answered)?;
    Ok(newest)
}

/// Every call must have its output.
pub fn check_pairs(calls: Vec<String>, answered: &[String]) -> Result<(), ApiError> {
    match calls.into_iter().find(|c| !answered.contains(c)) {
        Some(call) => Err(ApiError::invalid(
            format!("No tool output found for function call {call}."),
            Some("input"),
            None,
        )),
        None => Ok(()),
    }
}

/// Checks a message item; returns its text when it is the user's.
fn check_message(item: &Fields) -> Result<Option<String>, ApiError> {
    item.only(&["type", "role", "content", "id", "status"])?;
    let roles = ["user", "assistant", "system", "developer"];
    let role = item.req_str("role")?;
    if !roles.contains(&role) {
        return Err(ApiError::bad_value(&item.path_of("role"), role, &roles));
    }
    check_id(item, "msg")?;
    check_status(item)?;
    let kinds = if role == "assistant" { OUTPUT_PARTS } else { INPUT_PARTS };
    let path = item.path_of("content");
    let text = match item.req("content")? {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts_text(parts, &path, kinds)?,
        other => {
            return Err(ApiError::wrong_type(
                &path,
                "one of a string or array of input items",
                other,
            ))
        }
    };
    Ok((role == "user").then_some(text))
}

/// Checks content parts of the given types; returns their text, joined.
fn parts_text(parts: &[Value], path: &str, kinds: &[&str]) -> Result<String, ApiError> {
    let mut texts = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let part = Fields::of(part, &index(path, i))?;
        let kind = part.req_str("type")?;
        if !kinds.contains(&kind) {
            return Err(ApiError::bad_value(&part.path_of("type"), kind, kinds));
        }
        match kind {
            "input_text" | "summary_text" => {
                part.only(&["type", "text"])?;
                texts.push(part.req_str("text")?.to_owned());
            }
            "output_text" => {
                part.only(&["type", "text", "annotations", "logprobs"])?;
                texts.push(part.req_str("text")?.to_owned());
                part.opt_array("annotations")?;
            }
            "refusal" => {
                part.only(&["type", "refusal"])?;
                part.req_str("refusal")?;
            }
            "input_image" => {
                part.only(&["type", "image_url", "file_id", "detail"])?;
                match (part.opt_str("image_url")?, part.opt_str("file_id")?) {
                    (Some(url), _) => {
                        crate::standin::image::check_url(url, &part.path_of("image_url"))?
                    }
                    (None, Some(_)) => {}
                    (None, None) => return Err(ApiError::missing(&part.path_of("image_url"))),
                }
                part.opt_enum("detail", &["auto", "low", "high"])?;
            }
            _ => {
                part.only(&["type", "file_id", "file_data", "file_url", "filename"])?;
            }
        }
    }
    Ok(texts.join("\n"))
}

/// An item's optional `id` must carry the prefix the service gives that kind.
fn check_id(item: &Fields, prefix: &str) -> Result<(), ApiError> {
    match item.opt_str("id")? {
        Some(id) if !id.starts_with(prefix) => Err(ApiError::bad(
            &item.path_of("id"),
            &format!("'{id}'. Expected an ID that begins with '{prefix}'."),
        )),
        _ => Ok(()),
    }
}

fn check_status(item: &Fields) -> Result<(), ApiError> {
    item.opt_enum("status", &["in_progress", "completed", "incomplete"]).map(|_| ())
}
