//! The owner's settings, read from the individual's `.env`.
//!
//! Which names there are, what a left-out one means and what each is for is
//! the table in `teneral_core::setting`; the file is split into entries by
//! `teneral_core::dotenv`, the one reader of `.env` for every crate. Here
//! the entries become typed [`Settings`], with the rules each provider has.
//!
//! Invariants:
//! - The file is the whole truth: process environment variables are never
//!   consulted, so what the kernel runs with is what the file says.
//! - Values are taken exactly as written after the first `=`. A value in
//!   quotes or with a comment after it is refused rather than guessed at, and
//!   so is a misspelt `TENERAL_*` name (with the nearest known name offered).
//! - Every refusal names the file, the line (when there is one), the
//!   variable, what was wrong and what to write instead.
//! - The API key is held in a [`Secret`], which never prints, and it never
//!   appears in a message.

mod interpret;
mod limits;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use interpret::build;
use teneral_core::dotenv;

/// Where the model comes from (`TENERAL_PROVIDER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// The kernel's own scripted stand-in model; no network.
    Standin,
    /// Any OpenAI-compatible chat-completions endpoint.
    Compatible,
    /// OpenAI's API with a key, over the Responses API.
    OpenAi,
    /// A ChatGPT plan through its sign-in; no key in `.env`.
    ChatGpt,
}

/// Which API the body speaks to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `/chat/completions`.
    Chat,
    /// `/responses`.
    Responses,
}

/// `TENERAL_EVALS`: what the gate does with the evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvalsMode {
    /// They are not run.
    #[default]
    Off,
    /// They run and are journaled; they refuse nothing.
    Report,
    /// They run, are journaled, and refuse a candidate that breaks one.
    Gate,
}

/// How far the owner lets the individual go on its own (`TENERAL_SPECIES`,
/// `TENERAL_PUBLISH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Species {
    Ask,
    Auto,
    Off,
}

/// How the kernel starts its children (`TENERAL_RUNNER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerChoice {
    /// As systemd transient units when a user manager is on the session bus,
    /// else as its own children.
    Auto,
    /// As transient units; the kernel does not start without a user manager.
    Systemd,
    /// As its own children, even when a user manager is there.
    Direct,
}

/// The limits every generation's body and every gate check get
/// (`TENERAL_MEMORY_MAX`, `TENERAL_TASKS_MAX`); `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Bytes of memory, the cgroup's `MemoryMax`.
    pub memory_max: Option<u64>,
    /// Processes and threads, the cgroup's `TasksMax`.
    pub tasks_max: Option<u64>,
}

/// A credential. It prints as `<redacted>`; [`Secret::expose`] is the one way
/// to its text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// What only tests set: the `TENERAL_TEST_*` knobs of
/// `teneral_core::setting::TEST`, apart from everything an owner writes. An
/// owner's `.env` leaves them out and gets the table's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestKnobs {
    pub timing: Timing,
    /// `TENERAL_TEST_PRETEND_MISSING`: confinement features the kernel
    /// treats as missing from the running Linux, to test the refusals.
    pub pretend_missing: Vec<String>,
    /// `TENERAL_TEST_EGRESS_RESOLVE`: host names the egress proxy sends to
    /// the given local address, as if they were public.
    pub egress_resolve: Vec<(String, std::net::SocketAddr)>,
}

/// The lifecycle windows the kernel keeps. Each comes from a knob for tests
/// alone (`teneral_core::setting::TEST`); an owner's `.env` leaves them out.
/// Left out, each takes the table's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a started body has to report `generation.ready`.
    pub ready: Duration,
    /// How long a body has to give its first reply.
    pub first_reply: Duration,
    /// Between SIGTERM and SIGKILL when a body is stopped.
    pub stop_grace: Duration,
    /// The unit the crash backoff is counted in.
    pub backoff_unit: Duration,
    /// A generation that ran this long is no longer counted as crashing early.
    pub long_run: Duration,
    /// A limit for one gate check in seconds, in place of the minutes of
    /// `TENERAL_CHECK_MINUTES`.
    pub check_limit: Option<Duration>,
}

/// Everything the owner can set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub provider: Provider,
    pub protocol: Protocol,
    /// The endpoint, without a trailing slash. Set for compatible and openai;
    /// for chatgpt only when the owner wrote one; never for standin.
    pub base_url: Option<String>,
    /// Set for compatible and openai, maybe for standin, never for chatgpt.
    pub api_key: Option<Secret>,
    pub model: String,
    pub reasoning_effort: Option<String>,
    /// Minutes between clock stimuli; 0 turns the clock off.
    pub heartbeat_minutes: u32,
    /// Characters of context per request; at least 1000.
    pub context_chars: u64,
    /// Minutes one check of a mutation may run; 0 for no limit.
    pub check_minutes: u32,
    /// Seconds the smoke run has; 0 for no limit.
    pub smoke_seconds: u32,
    /// `TENERAL_EVALS`: whether the gate runs the owner's evaluations, and
    /// whether they refuse.
    pub evals: EvalsMode,
    /// The species ref, as written.
    pub upstream: Option<String>,
    pub species: Species,
    pub publish: Species,
    /// The stand-in model's script as written; a relative path is taken from
    /// the individual's directory.
    pub standin_script: Option<PathBuf>,
    /// For `standin`: append every request the stand-in gets to this file.
    pub standin_log: Option<PathBuf>,
    pub runner: RunnerChoice,
    pub quota: Quota,
    /// `TENERAL_UNSAFE_UNCONFINED=1`: the owner lets bodies and checks run
    /// without the cage (no Landlock, seccomp or namespaces).
    pub unsafe_unconfined: bool,
    /// `TENERAL_WARM_GATE`: once a generation's body has started, the
    /// gate's checks of the running tree run in the background (at the
    /// lowest priority), until a mutation stops them. On by default.
    pub warm_gate: bool,
    /// `TENERAL_CAGE_ZYGOTE`: confined launches are forked by one zygote
    /// with namespaces made ahead of need, instead of executing the cage's
    /// helper each time (under systemd, each is adopted by a scope unit).
    /// On by default.
    pub cage_zygote: bool,
    /// `TENERAL_LOG_FORMAT`: journald, lines of text, or JSON lines.
    pub log_format: teneral_core::log::Format,
    /// `TENERAL_EGRESS`: what a generation reaches through the kernel's
    /// egress proxy (public hosts by default, an allowlist, or nothing).
    pub egress: crate::egress::Policy,
    /// The knobs only tests set (`TENERAL_TEST_*`).
    pub test: TestKnobs,
}

/// Why the settings cannot be used.
pub use teneral_core::dotenv::SettingsError;

impl Settings {
    /// Reads `home/.env`, and the file its `TENERAL_ENV_FILE` names.
    pub fn load(home: &Path) -> Result<Settings, SettingsError> {
        let files = dotenv::Files::load(&home.join(".env"))?;
        build(&files.entries()?)
    }

    /// Reads the text of a `.env`; messages call it `.env`.
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        build(&dotenv::read(text, ".env")?)
    }
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The credential itself, to put in a request and nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Provider {
    /// The word written in `.env` and passed to the body.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Standin => "standin",
            Provider::Compatible => "compatible",
            Provider::OpenAi => "openai",
            Provider::ChatGpt => "chatgpt",
        }
    }
}

impl Protocol {
    /// The word passed to the body as `TENERAL_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Chat => "chat",
            Protocol::Responses => "responses",
        }
    }
}

impl Species {
    pub fn as_str(self) -> &'static str {
        match self {
            Species::Ask => "ask",
            Species::Auto => "auto",
            Species::Off => "off",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Species {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
