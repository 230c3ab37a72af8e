//! The two test requests and the model list: what is sent, how an answer is
//! judged, and the thin HTTP calls that carry them.
//!
//! Invariants: the requests and the judging are pure ([`text_request`],
//! [`tool_request`], [`judge`], [`provider_message`], [`model_ids`]); the key
//! goes only into the `Authorization` header and never into a message; every
//! failure says the provider's status and message where there is one.
use std::time::Duration;

use serde_json::{json, Value};

/// Which API the provider is spoken to with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST /chat/completions`.
    Chat,
    /// `POST /responses`.
    Responses,
}

/// Where and how to reach the model.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub protocol: Protocol,
    /// Without a trailing slash: `https://api.openai.com/v1`.
    pub base_url: String,
    pub key: String,
    pub model: String,
    /// For a ChatGPT plan: the account the token is for, sent as
    /// `chatgpt-account-id`.
    pub account: Option<String>,
}

/// The tool the tool test offers.
pub const TOOL: &str = "record_word";
const TEXT_PROMPT: &str = "This is a connection test. Reply with one short sentence.";
const TOOL_PROMPT: &str =
    "This is a tool test. Call the record_word tool with the word \"ready\". Do not answer in text.";

/// What an answer came back as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Words and no tool call.
    Words(String),
    /// A call of the named tool.
    ToolCall(String),
    /// Neither words nor a tool call.
    Nothing,
}

/// Why a test failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot reach {url}: {reason}; check the address and that the provider is up")]
    Unreachable { url: String, reason: String },
    #[error(
        "the {test} test request was refused: the provider answered {status}: {message}{hint}"
    )]
    Refused { test: &'static str, status: u16, message: String, hint: &'static str },
    #[error(
        "the {test} test's answer is not what {url} should answer ({what}); check the address"
    )]
    Garbled { test: &'static str, url: String, what: String },
    #[error(
        "the model answered the tool test in words instead of calling the tool (it said: {said:?}); \
         teneral's agent works only through tool calls: choose a model that supports them"
    )]
    ToolInWords { said: String },
    #[error("the model's answer to the {test} test was empty; try again, or choose another model")]
    Empty { test: &'static str },
    #[error("the model answered the text test with a tool call although it was offered none; choose another model")]
    TextAsCall,
}

/// The path and body of the text test.
pub fn text_request(protocol: Protocol, model: &str) -> (&'static str, Value) {
    match protocol {
        Protocol::Chat => (
            "/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": TEXT_PROMPT}]}),
        ),
        Protocol::Responses => {
            ("/responses", json!({"model": model, "input": TEXT_PROMPT, "store": false}))
        }
    }
}

/// The path and body of the tool test: one tool offered, the model left to
/// choose (`auto`), as the agent's own requests do.
pub fn tool_request(protocol: Protocol, model: &str) -> (&'static str, Value) {
    let parameters = json!({
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
    });
    let description = "Records one word.";
    match protocol {
        Protocol::Chat => (
            "/chat/completions",
            json!({
                "model": model,
                "messages": [{"role": "user", "content": TOOL_PROMPT}],
                "tools": [{"type": "function", "function": {
                    "name": TOOL, "description": description, "parameters": parameters}}],
                "tool_choice": "auto",
            }),
        ),
        Protocol::Responses => (
            "/responses",
            json!({
                "model": model,
                "input": TOOL_PROMPT,
                "store": false,
                "tools": [{"type": "function", "name": TOOL, "description": description,
                    "parameters": parameters}],
                "tool_choice": "auto",
            }),
        ),
    }
}

/// What a successful answer holds: a tool call first, else its words.
pub fn judge(protocol: Protocol, answer: &Value) -> Option<Judged> {
    let (call, words) = match protocol {
        Protocol::Chat => {
            let message = answer.get("choices")?.get(0)?.get("message")?;
            let call = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .and_then(|calls| calls.first())
                .and_then(|c| c.get("function")?.get("name")?.as_str());
            let words = message.get("content").and_then(Value::as_str).unwrap_or("");
            (call.map(str::to_owned), words.to_owned())
        }
        Protocol::Responses => {
            let output = answer.get("output")?.as_array()?;
            let call = output
                .iter()
                .find(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
                .and_then(|item| item.get("name")?.as_str());
            let words: String = output
                .iter()
                .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
                .filter_map(|item| item.get("content")?.as_array())
                .flatten()
                .filter_map(|part| part.get("text")?.as_str())
                .collect();
            (call.map(str::to_owned), words)
        }
    };
    Some(match call {
        Some(name) => Judged::ToolCall(name),
        None if words.trim().is_empty() => Judged::Nothing,
        None => Judged::Words(words.trim().to_owned()),
    })
}

/// The provider's own message from an error answer (the OpenAI error
/// object's `message`), else the start of the body as text.
pub fn provider_message(status: u16, body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error.get("message").and_then(Value::as_str).or_else(|| error.as_str())
    });
    match message {
        Some(message) => message.to_owned(),
        None if body.trim().is_empty() => format!("no message (HTTP {status})"),
        None => body.trim().chars().take(300).collect(),
    }
}

/// What to do next after a refusal with this status.
pub fn hint(status: u16) -> &'static str {
    match status {
        401 => "; check the key (a wrong or revoked key is refused so)",
        403 => "; the key may not use this model or this API: check its permissions",
        404 => "; check the address and the model's name",
        429 => "; the account's rate limit or quota is reached: check its usage and billing",
        500..=599 => "; the provider has trouble: try again later",
        _ => "",
    }
}

/// The model ids of a `GET /models` answer, sorted.
pub fn model_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list
        .get("data")
        .and_then(Value::as_array)
        .map(|data| data.iter().filter_map(|m| m.get("id")?.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    ids.sort();
    ids.dedup();
    ids
}

/// The HTTP side: one client for all the requests of a setup.
pub struct Client {
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new() -> Result<Client, ProbeError> {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| ProbeError::Unreachable {
                url: "the provider".into(),
                reason: format!("no HTTP client: {e}"),
            })?;
        Ok(Client { http })
    }

    /// The provider's model ids, or `None` when it does not list them.
    pub fn models(&self, base_url: &str, key: &str, account: Option<&str>) -> Option<Vec<String>> {
        let mut request = self.http.get(format!("{base_url}/models")).bearer_auth(key);
        if let Some(account) = account {
            request = request.header(teneral_core::chatgpt::ACCOUNT_HEADER, account);
        }
        let response = request.send().ok()?;
        if !response.status().is_success() {
            return None;
        }
        let ids = model_ids(&serde_json::from_str::<Value>(&response.text().ok()?).ok()?);
        (!ids.is_empty()).then_some(ids)
    }

    /// Sends one test request and judges its answer.
    fn ask(
        &self,
        endpoint: &Endpoint,
        test: &'static str,
        (path, body): (&str, Value),
    ) -> Result<Judged, ProbeError> {
        let url = format!("{}{path}", endpoint.base_url);
        let mut request = self
            .http
            .post(&url)
            .bearer_auth(&endpoint.key)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(account) = &endpoint.account {
            request = request.header(teneral_core::chatgpt::ACCOUNT_HEADER, account);
        }
        // A ChatGPT plan takes its requests streamed (docs/chatgpt.md).
        let plan = endpoint.account.is_some();
        let body = body.to_string().into_bytes();
        let body = match teneral_core::chatgpt::as_streamed(&body).filter(|_| plan) {
            Some((streamed, _)) => streamed,
            None => body,
        };
        let response = request
            .body(body)
            .send()
            .map_err(|e| ProbeError::Unreachable { url: url.clone(), reason: reason(&e) })?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .map_err(|e| ProbeError::Unreachable { url: url.clone(), reason: reason(&e) })?;
        if !(200..300).contains(&status) {
            let message = provider_message(status, &text);
            return Err(ProbeError::Refused { test, status, message, hint: hint(status) });
        }
        let garbled = |what: String| ProbeError::Garbled { test, url: url.clone(), what };
        let json: Value = if plan {
            teneral_core::chatgpt::whole_response(&text).map_err(garbled)?
        } else {
            serde_json::from_str(&text).map_err(|e| garbled(format!("not JSON: {e}")))?
        };
        judge(endpoint.protocol, &json).ok_or_else(|| garbled("no answer in it".into()))
    }

    /// The text test: it must come back in words.
    pub fn text_test(&self, endpoint: &Endpoint) -> Result<String, ProbeError> {
        let test = "text";
        match self.ask(endpoint, test, text_request(endpoint.protocol, &endpoint.model))? {
            Judged::Words(words) => Ok(words),
            Judged::ToolCall(_) => Err(ProbeError::TextAsCall),
            Judged::Nothing => Err(ProbeError::Empty { test }),
        }
    }

    /// The tool test: it must come back as a call of [`TOOL`].
    pub fn tool_test(&self, endpoint: &Endpoint) -> Result<String, ProbeError> {
        let test = "tool";
        match self.ask(endpoint, test, tool_request(endpoint.protocol, &endpoint.model))? {
            Judged::ToolCall(name) => Ok(name),
            Judged::Words(said) => Err(ProbeError::ToolInWords { said }),
            Judged::Nothing => Err(ProbeError::Empty { test }),
        }
    }
}

/// A transport error in words, with its innermost cause (connection refused,
/// DNS, TLS).
fn reason(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    if e.is_timeout() {
        "no answer in time".to_owned()
    } else {
        source.to_string()
    }
}

#[cfg(test)]
mod tests;
