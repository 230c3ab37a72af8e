//! The model's two wire protocols: what a request looks like, what an answer
//! holds, and which failures are worth trying again.
//!
//! The conversation is kept in one neutral shape ([`Item`]) and turned into
//! either protocol only here:
//!
//! - chat completions: `messages` with roles `system`, `user`, `assistant`
//!   (with `tool_calls`) and `tool` (with `tool_call_id`);
//! - the Responses API: `instructions` and `input` items of types `message`,
//!   `function_call` and `function_call_output`, joined by `call_id`.
//!
//! Requests ask for a stream ([`crate::stream`]); an answer read whole is
//! read here.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::config::Protocol;

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: a JSON object, as text.
    pub arguments: String,
}

/// One piece of the conversation, in neither protocol's shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Something that woke the agent, or a word from its body.
    User(String),
    /// An owner's line, sent as [`Item::User`] unless
    /// [`crate::images::attach`] found images in it.
    Owner(String),
    /// An owner's line with the images it names.
    UserImages { text: String, images: Vec<Image> },
    /// Words of the model.
    Assistant(String),
    /// A tool call of the model; the calls of one answer stand together.
    Call(ToolCall),
    /// What a call returned.
    Output { id: String, text: String },
}

/// An image to show the model: its media type and its bytes in base64.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub media_type: &'static str,
    pub data: String,
}

impl Image {
    /// The image as a data URL, as both protocols take it.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

/// A tool the model may call.
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

/// What one request brought back.
#[derive(Debug, Default, PartialEq)]
pub struct Answer {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub reasoning: Vec<String>,
    /// Input and output tokens, when the provider says.
    pub usage: Option<(u64, u64)>,
}

/// Builds the JSON body of a request.
pub fn request(
    protocol: Protocol,
    model: &str,
    effort: Option<&str>,
    system: &str,
    items: &[Item],
    tools: &[ToolSpec],
) -> Value {
    match protocol {
        Protocol::Chat => {
            let mut messages = vec![json!({"role": "system", "content": system})];
            messages.extend(chat_messages(items));
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
            let mut body = json!({"model": model, "messages": messages, "tools": tools});
            if let Some(effort) = effort {
                body["reasoning_effort"] = json!(effort);
            }
            body
        }
        Protocol::Responses => {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.parameters, "strict": false})
                })
                .collect();
            let mut body = json!({"model": model, "instructions": system,
                "input": responses_input(items), "tools": tools, "store": false});
            if let Some(effort) = effort {
                body["reasoning"] = json!({"effort": effort, "summary": "auto"});
            }
            body
        }
    }
}

/// Chat completions: an assistant's words and the calls after them are one
/// message; each output is a `tool` message.
fn chat_messages(items: &[Item]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    let mut open_assistant = false; // the last message is an assistant's, open for calls
    for item in items {
        match item {
            Item::User(text) | Item::Owner(text) => {
                messages.push(json!({"role": "user", "content": text}));
                open_assistant = false;
            }
            Item::UserImages { text, images } => {
                let mut content = vec![json!({"type": "text", "text": text})];
                content.extend(
                    images
                        .iter()
                        .map(|i| json!({"type": "image_url", "image_url": {"url": i.data_url()}})),
                );
                messages.push(json!({"role": "user", "content": content}));
                open_assistant = false;
            }
            Item::Assistant(text) => {
                messages.push(json!({"role": "assistant", "content": text}));
                open_assistant = true;
            }
            Item::Call(call) => {
                let wire = json!({"id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments}});
                match messages.last_mut() {
                    Some(last) if open_assistant => match last["tool_calls"].as_array_mut() {
                        Some(calls) => calls.push(wire),
                        None => last["tool_calls"] = json!([wire]),
                    },
                    _ => messages
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [wire]})),
                }
                open_assistant = true;
            }
            Item::Output { id, text } => {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                open_assistant = false;
            }
        }
    }
    messages
}

fn responses_input(items: &[Item]) -> Vec<Value> {
    items
        .iter()
        .map(|item| match item {
            Item::User(text) | Item::Owner(text) => json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}),
            Item::UserImages { text, images } => {
                let mut content = vec![json!({"type": "input_text", "text": text})];
                content.extend(images.iter().map(
                    |i| json!({"type": "input_image", "image_url": i.data_url(), "detail": "auto"}),
                ));
                json!({"type": "message", "role": "user", "content": content})
            }
            Item::Assistant(text) => json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}),
            Item::Call(call) => json!({"type": "function_call", "call_id": call.id,
                "name": call.name, "arguments": call.arguments}),
            Item::Output { id, text } => {
                json!({"type": "function_call_output", "call_id": id, "output": text})
            }
        })
        .collect()
}

/// Reads an answer of either protocol. `Err` says what was wrong with it.
pub fn parse_answer(protocol: Protocol, body: &[u8]) -> Result<Answer, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the model's answer is not JSON ({e}): {}", preview(body)))?;
    match protocol {
        Protocol::Chat => parse_chat(&value),
        Protocol::Responses => parse_responses(&value),
    }
    .ok_or_else(|| format!("the model's answer has an unexpected shape: {}", preview(body)))
}

fn parse_chat(value: &Value) -> Option<Answer> {
    let message = value.get("choices")?.get(0)?.get("message")?;
    let mut answer = Answer { text: text_of(&message["content"]), ..Answer::default() };
    for field in ["reasoning_content", "reasoning"] {
        if let Some(text) = message[field].as_str().filter(|t| !t.trim().is_empty()) {
            answer.reasoning.push(text.to_owned());
        }
    }
    for (n, call) in message["tool_calls"].as_array().into_iter().flatten().enumerate() {
        answer.calls.push(ToolCall {
            id: call["id"].as_str().map_or_else(|| format!("call_{n}"), str::to_owned),
            name: call["function"]["name"].as_str()?.to_owned(),
            arguments: arguments_of(&call["function"]["arguments"]),
        });
    }
    let usage = &value["usage"];
    answer.usage = usage["prompt_tokens"].as_u64().zip(usage["completion_tokens"].as_u64());
    Some(answer)
}

fn parse_responses(value: &Value) -> Option<Answer> {
    let mut answer = Answer::default();
    for (n, item) in value.get("output")?.as_array()?.iter().enumerate() {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    if part["type"] == "output_text" {
                        answer.text.push_str(part["text"].as_str().unwrap_or_default());
                    }
                }
            }
            Some("function_call") => answer.calls.push(ToolCall {
                id: item["call_id"].as_str().map_or_else(|| format!("call_{n}"), str::to_owned),
                name: item["name"].as_str()?.to_owned(),
                arguments: arguments_of(&item["arguments"]),
            }),
            Some("reasoning") => {
                for part in item["summary"].as_array().into_iter().flatten() {
                    if let Some(text) = part["text"].as_str().filter(|t| !t.trim().is_empty()) {
                        answer.reasoning.push(text.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    let usage = &value["usage"];
    answer.usage = usage["input_tokens"].as_u64().zip(usage["output_tokens"].as_u64());
    Some(answer)
}

/// A message's content: a string, or parts with text.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// Arguments come as a JSON string; some servers send the object itself.
fn arguments_of(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// Why a request failed, and whether to try again.
#[derive(Debug, PartialEq)]
pub enum Failure {
    /// Unreachable, a limit, or a fault on the far side: try again later.
    Retry(String),
    /// The request itself was refused: trying again would not help.
    Fatal(String),
}

/// Sorts an HTTP status and body into a failure (`None` for success).
pub fn classify(status: u16, body: &[u8]) -> Option<Failure> {
    if (200..300).contains(&status) {
        return None;
    }
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| match &v["error"] {
            Value::String(s) => Some(s.clone()),
            error => error["message"].as_str().map(str::to_owned),
        })
        .unwrap_or_else(|| preview(body));
    let reason = format!("HTTP {status}: {message}");
    Some(if status == 429 || status >= 500 {
        Failure::Retry(reason)
    } else {
        Failure::Fatal(reason)
    })
}

/// The wait before retry number `attempt` (0 first): 10 s, 1 min, 5 min,
/// then every 15 min, times `scale`.
pub fn retry_delay(attempt: u32, scale: f64) -> Duration {
    let seconds = match attempt {
        0 => 10,
        1 => 60,
        2 => 300,
        _ => 900,
    };
    Duration::from_secs_f64(seconds as f64 * scale)
}

/// The journal's `model.retry` (contract, section 3): why the request
/// failed (`status` when the model answered at all), which retry comes next
/// (1 for the first) and in how many seconds.
pub fn retry_event(status: Option<u16>, message: &str, retry: u32, wait: Duration) -> Value {
    let mut event = json!({"type": "model.retry", "message": message, "retry": retry,
        "seconds": (wait.as_secs_f64() * 1000.0).round() / 1000.0});
    if let Some(status) = status {
        event["status"] = json!(status);
    }
    event
}

/// The journal's `input` of a call: the arguments as JSON, or the text as
/// it was when it is not JSON.
pub fn input_of(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()))
}

/// The arguments of a call as an object, or why they are not one.
pub fn arguments(call: &ToolCall) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the arguments must be a JSON object".to_owned()),
        Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
    }
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}
