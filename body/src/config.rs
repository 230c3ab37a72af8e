//! The environment the kernel starts a body with (contract, section 2).
//!
//! Everything the body knows about its place comes from here. A variable the
//! contract promises that is missing or malformed stops the body at once with
//! a message naming it (exit status 2), rather than letting it half work.
//!
//! Two settings are for tests only and never set by the kernel:
//! `TENERAL_TEST_RETRY_SCALE` multiplies the waits between retries of a
//! failed model request (`0.001` turns 10 s into 10 ms), and
//! `TENERAL_HEARTBEAT_MINUTES` accepts a fraction (`0.01`) so a test can see
//! the clock tick.

use std::path::PathBuf;
use std::time::Duration;

/// The wire protocol of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Chat completions: `POST {url}/chat/completions`.
    Chat,
    /// The Responses API: `POST {url}/responses`.
    Responses,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The individual's root; also the working directory.
    pub home: PathBuf,
    /// The commit of this generation.
    pub commit: String,
    /// The kernel's event socket.
    pub events: PathBuf,
    pub provider: String,
    pub protocol: Protocol,
    /// Base URL of the model, `http://127.0.0.1:<port>/v1`.
    pub model_url: String,
    pub model: String,
    pub api_key: String,
    pub reasoning_effort: Option<String>,
    /// Time between clock stimuli; `None` when the clock is off.
    pub heartbeat: Option<Duration>,
    /// Characters of context per request.
    pub context_chars: usize,
    /// Factor on the waits between retries (1 unless a test sets it).
    pub retry_scale: f64,
}

/// The contract version this body speaks.
pub const CONTRACT: &str = "1";

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `get`, so tests need no real environment.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let need = |name: &str| match get(name) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => {
                Err(format!("{name} is not set; the kernel sets it (docs/contract.md, section 2)"))
            }
        };
        let bad = |name: &str, value: &str, want: &str| format!("{name}={value:?}: {want}");

        let contract = need("TENERAL_CONTRACT")?;
        if contract != CONTRACT {
            return Err(bad("TENERAL_CONTRACT", &contract, "this body speaks contract 1"));
        }
        let protocol = match need("TENERAL_PROTOCOL")?.as_str() {
            "chat" => Protocol::Chat,
            "responses" => Protocol::Responses,
            other => return Err(bad("TENERAL_PROTOCOL", other, "expected chat or responses")),
        };
        let model_url = need("TENERAL_MODEL_URL")?;
        if !model_url.starts_with("http://") {
            return Err(bad(
                "TENERAL_MODEL_URL",
                &model_url,
                "expected http://127.0.0.1:<port>/v1",
            ));
        }
        let minutes = need("TENERAL_HEARTBEAT_MINUTES")?;
        let minutes: f64 = match minutes.parse() {
            Ok(m) if m >= 0.0 && f64::is_finite(m) => m,
            _ => {
                return Err(bad(
                    "TENERAL_HEARTBEAT_MINUTES",
                    &minutes,
                    "expected minutes, 0 for none",
                ))
            }
        };
        let clock_on = match need("TENERAL_CLOCK")?.as_str() {
            "on" => true,
            "off" => false,
            other => return Err(bad("TENERAL_CLOCK", other, "expected on or off")),
        };
        let chars = need("TENERAL_CONTEXT_CHARS")?;
        let context_chars = match chars.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return Err(bad("TENERAL_CONTEXT_CHARS", &chars, "expected a positive number")),
        };
        let retry_scale = match get("TENERAL_TEST_RETRY_SCALE") {
            None => 1.0,
            Some(s) => match s.parse::<f64>() {
                Ok(f) if f >= 0.0 && f.is_finite() => f,
                _ => {
                    return Err(bad(
                        "TENERAL_TEST_RETRY_SCALE",
                        &s,
                        "expected a factor such as 0.001",
                    ))
                }
            },
        };
        Ok(Config {
            home: PathBuf::from(need("TENERAL_HOME")?),
            commit: need("TENERAL_COMMIT")?,
            events: PathBuf::from(need("TENERAL_EVENTS")?),
            provider: need("TENERAL_PROVIDER")?,
            protocol,
            model_url: model_url.trim_end_matches('/').to_owned(),
            model: need("TENERAL_MODEL")?,
            api_key: need("TENERAL_API_KEY")?,
            reasoning_effort: get("TENERAL_REASONING_EFFORT").filter(|v| !v.is_empty()),
            heartbeat: (clock_on && minutes > 0.0).then(|| Duration::from_secs_f64(minutes * 60.0)),
            context_chars,
            retry_scale,
        })
    }

    /// The endpoint of this protocol.
    pub fn endpoint(&self) -> String {
        match self.protocol {
            Protocol::Chat => format!("{}/chat/completions", self.model_url),
            Protocol::Responses => format!("{}/responses", self.model_url),
        }
    }
}
