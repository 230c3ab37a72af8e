//! The script: JSON Lines of steps that successive requests consume in order,
//! on either endpoint.
//!
//! A step is an object with any of `reply` (text), `tool_calls`
//! (`[{"name", "arguments"}]`, arguments any JSON, or a string sent as it is),
//! `reasoning` (a summary), `error` (`{"status", "message"?, "type"?, "code"?}`),
//! `delay_ms` (before the answer), `chunk_ms` (between the frames of an answer
//! the request asked to stream) and `expect` (a substring the newest user or tool input must
//! contain). Blank lines and lines starting with `#` are ignored.
//!
//! Invariants: a script that loads is one every request can be answered from,
//! so every mistake is refused at load with its line number; a step is used up
//! only when it answers, so a request that is off script (409) leaves the step
//! waiting for a request that matches; once the steps are used up every
//! request gets the default reply.
use std::time::Duration;

use serde_json::{Map, Value};

use super::turn::{default_reply, Newest};

const KEYS: &[&str] =
    &["reply", "tool_calls", "reasoning", "error", "delay_ms", "chunk_ms", "expect"];

/// A script line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ScriptError {
    pub line: usize,
    pub reason: String,
}

/// A tool call a step asks for; the server numbers it when it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCall {
    pub name: String,
    pub arguments: String,
}

/// An error a step answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedError {
    pub status: u16,
    pub message: String,
    pub kind: String,
    pub code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Say { reply: Option<String>, reasoning: Option<String>, calls: Vec<PlannedCall> },
    Fail(ScriptedError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    line: usize,
    expect: Option<String>,
    delay: Duration,
    gap: Duration,
    action: Action,
}

/// What to do with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answer with this (text absent only when there are tool calls).
    Say { text: Option<String>, reasoning: Option<String>, calls: Vec<PlannedCall> },
    /// Answer with this error.
    Fail(ScriptedError),
    /// The waiting step expects other input: answer 409 with this message.
    OffScript(String),
}

/// The answer to one request and how long to wait before giving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub delay: Duration,
    /// Between the frames of a streamed answer.
    pub gap: Duration,
    pub outcome: Outcome,
}

impl Decision {
    /// An answer with no wait before it or between its frames.
    pub fn now(outcome: Outcome) -> Decision {
        Decision { delay: Duration::ZERO, gap: Duration::ZERO, outcome }
    }
}

/// The steps and how many are used up.
#[derive(Debug, Clone, Default)]
pub struct Script {
    steps: Vec<Step>,
    next: usize,
}

impl Script {
    /// Reads a script; the first unusable line is refused with its number.
    pub fn parse(text: &str) -> Result<Script, ScriptError> {
        let mut steps = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let step = parse_step(trimmed, line).map_err(|reason| ScriptError { line, reason })?;
            steps.push(step);
        }
        Ok(Script { steps, next: 0 })
    }

    /// Steps not yet used up.
    pub fn remaining(&self) -> usize {
        self.steps.len() - self.next
    }

    /// Answers a request whose newest input is `newest`, using up the waiting
    /// step if it matches.
    pub fn decide(&mut self, newest: &Newest) -> Decision {
        let Some(step) = self.steps.get(self.next) else {
            return Decision::now(say_default(newest, None));
        };
        if let Some(expected) = &step.expect {
            if !newest.text().contains(expected.as_str()) {
                let seen: String = newest.text().chars().take(200).collect();
                let message = format!(
                    "Off script: step {} (script line {}) expects the newest user or tool input \
                     to contain {expected:?}, but it is {seen:?}.",
                    self.next + 1,
                    step.line,
                );
                return Decision::now(Outcome::OffScript(message));
            }
        }
        self.next += 1;
        let outcome = match &step.action {
            Action::Fail(error) => Outcome::Fail(error.clone()),
            Action::Say { reply: None, reasoning, calls } if calls.is_empty() => {
                say_default(newest, reasoning.clone())
            }
            Action::Say { reply, reasoning, calls } => Outcome::Say {
                text: reply.clone(),
                reasoning: reasoning.clone(),
                calls: calls.clone(),
            },
        };
        Decision { delay: step.delay, gap: step.gap, outcome }
    }
}

fn say_default(newest: &Newest, reasoning: Option<String>) -> Outcome {
    Outcome::Say { text: Some(default_reply(newest)), reasoning, calls: Vec::new() }
}

fn parse_step(text: &str, line: usize) -> Result<Step, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("a step must be a JSON object".into());
    };
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key {key:?} (a step may have {})", KEYS.join(", ")));
    }
    let reply = opt_string(&map, "reply")?;
    let reasoning = opt_string(&map, "reasoning")?;
    let expect = opt_string(&map, "expect")?;
    if expect.as_deref() == Some("") {
        return Err("\"expect\" must not be empty".into());
    }
    let delay = millis(&map, "delay_ms")?;
    let gap = millis(&map, "chunk_ms")?;
    let calls = match map.get("tool_calls") {
        None => Vec::new(),
        Some(v) => parse_calls(v)?,
    };
    let action = match map.get("error") {
        Some(_) if reply.is_some() || reasoning.is_some() || !calls.is_empty() => {
            return Err(
                "a step with \"error\" cannot also have reply, reasoning or tool_calls".into()
            )
        }
        Some(v) => Action::Fail(parse_error(v)?),
        None => Action::Say { reply, reasoning, calls },
    };
    Ok(Step { line, expect, delay, gap, action })
}

fn millis(map: &Map<String, Value>, key: &str) -> Result<Duration, String> {
    match map.get(key) {
        None => Ok(Duration::ZERO),
        Some(v) => v
            .as_u64()
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{key:?} must be a whole number of milliseconds, 0 or more")),
    }
}

fn opt_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{key:?} must be a string")),
    }
}

fn parse_calls(value: &Value) -> Result<Vec<PlannedCall>, String> {
    let items = match value {
        Value::Array(items) if !items.is_empty() => items,
        _ => return Err("\"tool_calls\" must be a non-empty array".into()),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(call) = item else {
                return Err(format!("tool_calls[{i}] must be an object"));
            };
            if let Some(key) = call.keys().find(|k| *k != "name" && *k != "arguments") {
                return Err(format!("tool_calls[{i}] has unknown key {key:?} (name, arguments)"));
            }
            let name = match call.get("name") {
                Some(Value::String(name)) if !name.is_empty() => name.clone(),
                _ => return Err(format!("tool_calls[{i}] needs \"name\", a non-empty string")),
            };
            let arguments = match call.get("arguments") {
                None => "{}".to_owned(),
                Some(Value::String(raw)) => raw.clone(),
                Some(other) => other.to_string(),
            };
            Ok(PlannedCall { name, arguments })
        })
        .collect()
}

fn parse_error(value: &Value) -> Result<ScriptedError, String> {
    let Value::Object(map) = value else {
        return Err("\"error\" must be an object with \"status\"".into());
    };
    if let Some(key) =
        map.keys().find(|k| !["status", "message", "type", "code"].contains(&k.as_str()))
    {
        return Err(format!("\"error\" has unknown key {key:?} (status, message, type, code)"));
    }
    let status = map
        .get("status")
        .and_then(Value::as_u64)
        .filter(|s| (400..=599).contains(s))
        .ok_or("\"error\" needs \"status\", a number from 400 to 599")?;
    let status = u16::try_from(status).map_err(|e| e.to_string())?;
    let message = opt_string(map, "message")?
        .unwrap_or_else(|| format!("The stand-in was scripted to fail with status {status}."));
    let kind = opt_string(map, "type")?.unwrap_or_else(|| {
        match status {
            429 => "rate_limit_exceeded",
            500..=599 => "server_error",
            _ => "invalid_request_error",
        }
        .to_owned()
    });
    let code = match opt_string(map, "code")? {
        Some(code) => Some(code),
        None if status == 429 => Some("rate_limit_exceeded".to_owned()),
        None => None,
    };
    Ok(ScriptedError { status, message, kind, code })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Script {
        Script::parse(text).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn user(text: &str) -> Newest {
        Newest::User(text.into())
    }

    #[test]
    fn refusals_name_the_line_and_the_fault() {
        let table: &[(&str, &str)] = &[
            ("{", "not JSON"),
            ("[1]", "must be a JSON object"),
            (r#"{"reply":"a","rpely":"b"}"#, "unknown key \"rpely\""),
            (r#"{"reply":3}"#, "\"reply\" must be a string"),
            (r#"{"tool_calls":[]}"#, "non-empty array"),
            (r#"{"tool_calls":[{"arguments":{}}]}"#, "needs \"name\""),
            (r#"{"tool_calls":[{"name":"a","id":"x"}]}"#, "unknown key \"id\""),
            (r#"{"error":{"status":200}}"#, "from 400 to 599"),
            (r#"{"error":{"status":500,"retry":1}}"#, "unknown key \"retry\""),
            (r#"{"error":{"status":500},"reply":"x"}"#, "cannot also have"),
            (r#"{"delay_ms":-1}"#, "delay_ms"),
            (r#"{"chunk_ms":1.5}"#, "\"chunk_ms\" must be a whole number"),
            (r#"{"expect":""}"#, "must not be empty"),
        ];
        for (line, fault) in table {
            let text = format!("# comment\n\n{line}\n");
            match Script::parse(&text) {
                Err(e) => {
                    assert_eq!(e.line, 3, "{line}");
                    assert!(e.reason.contains(fault), "{line}: {}", e.reason);
                }
                Ok(_) => unreachable!("{line} was accepted"),
            }
        }
    }

    #[test]
    fn steps_are_used_in_order_then_the_default() {
        let mut script = parse(
            r#"{"reply":"one","reasoning":"thinking"}
               {"tool_calls":[{"name":"bash","arguments":{"cmd":"ls"}},{"name":"raw","arguments":"{bad"}]}
               {"delay_ms":250,"chunk_ms":20}"#,
        );
        assert_eq!(script.remaining(), 3);
        let first = script.decide(&user("hi"));
        assert_eq!(
            first.outcome,
            Outcome::Say {
                text: Some("one".into()),
                reasoning: Some("thinking".into()),
                calls: vec![]
            }
        );
        let second = script.decide(&user("hi"));
        let Outcome::Say { text: None, calls, .. } = second.outcome else {
            unreachable!("{second:?}")
        };
        assert_eq!(calls[0].arguments, r#"{"cmd":"ls"}"#);
        assert_eq!(calls[1].arguments, "{bad");
        let third = script.decide(&Newest::Tool("done".into()));
        assert_eq!(
            (third.delay, third.gap),
            (Duration::from_millis(250), Duration::from_millis(20))
        );
        assert_eq!(first.gap, Duration::ZERO);
        assert_eq!(
            third.outcome,
            Outcome::Say {
                text: Some("Stand-in model here. The tool said: done".into()),
                reasoning: None,
                calls: vec![]
            }
        );
        assert_eq!(script.remaining(), 0);
        let after = script.decide(&user("again"));
        assert_eq!(after.delay, Duration::ZERO);
        assert_eq!(
            after.outcome,
            Outcome::Say {
                text: Some("Stand-in model here. You said: again".into()),
                reasoning: None,
                calls: vec![]
            }
        );
    }

    #[test]
    fn expect_holds_the_step_until_the_input_matches() {
        let mut script = parse("{\"expect\":\"ready\",\"reply\":\"go\"}");
        let off = script.decide(&user("not yet"));
        let Outcome::OffScript(message) = off.outcome else { unreachable!("{off:?}") };
        assert!(message.contains("step 1 (script line 1)"), "{message}");
        assert!(message.contains("\"ready\"") && message.contains("\"not yet\""), "{message}");
        assert_eq!(script.remaining(), 1);
        let on = script.decide(&user("we are ready"));
        assert_eq!(
            on.outcome,
            Outcome::Say { text: Some("go".into()), reasoning: None, calls: vec![] }
        );
    }

    #[test]
    fn scripted_errors_get_a_type_by_status() {
        let mut script = parse(
            r#"{"error":{"status":429,"message":"slow down"}}
               {"error":{"status":503}}
               {"error":{"status":400,"type":"insufficient_quota","code":"quota"}}"#,
        );
        let kinds: Vec<_> = (0..3)
            .map(|_| match script.decide(&Newest::Nothing).outcome {
                Outcome::Fail(e) => (e.status, e.kind, e.code),
                other => unreachable!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (429, "rate_limit_exceeded".into(), Some("rate_limit_exceeded".into())),
                (503, "server_error".into(), None),
                (400, "insufficient_quota".into(), Some("quota".into())),
            ]
        );
    }
}
