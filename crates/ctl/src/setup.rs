//! `teneralctl setup`: choosing the model provider. It asks for the
//! provider, its address, key and model (offering the provider's model list
//! where it has one), sends two test requests (one answered in words, one
//! that must come back as a tool call) and only then writes the provider's
//! settings into `.env`, keeping every other setting.
//!
//! Invariants: nothing is written unless both tests passed (and for an
//! existing `.env`, the owner said yes first); `.env` is replaced atomically
//! with mode 0600; the key is never printed; with no terminal and no
//! `--plain` it asks nothing and says what it would need.
//!
//! For `chatgpt` it signs in instead of asking for a key ([`chatgpt`]) and
//! writes the tokens to `.teneral/auth/chatgpt.json` (0600) only once both
//! tests passed, then `.env`; should `.env` fail, the token file is put back
//! as it was.
//!
//! At a terminal (without `--plain`) the same questions are full-screen
//! pages ([`full`]: [`pages`] is their logic, [`screen`] draws them); both
//! ways end in the same writing step ([`write`]).
pub mod ask;
pub mod chatgpt;
pub mod env;
pub mod full;
pub mod pages;
pub mod probe;
pub mod screen;
pub mod write;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use ask::{AskError, Asker};
use probe::{Endpoint, ProbeError, Protocol};

/// OpenAI's API address, the `openai` provider's default.
pub const OPENAI_URL: &str = "https://api.openai.com/v1";

/// The providers setup offers, as written in `.env`.
pub const PROVIDERS: &[&str] = &["openai", "compatible", "standin", "chatgpt"];

/// What `teneralctl setup` was asked to do.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// The individual's directory.
    pub home: PathBuf,
    /// Questions as lines even without a terminal.
    pub plain: bool,
}

/// Why setup stopped. Every one of them leaves `.env` as it was.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0} is not a directory; give the individual's directory with --dir (or -d)")]
    NoDir(PathBuf),
    #[error(
        "{0} is not a teneral individual or checkout (no .teneral/, .env or .env.example); \
         give the individual's directory with --dir (or -d)"
    )]
    NotHere(PathBuf),
    // The causes are in the message itself, not chained as sources, so
    // that `{:#}` does not print them twice.
    #[error("{0}; nothing was written{hint}", hint = plain_hint(.0))]
    Ask(AskError),
    #[error("{0}; nothing was written")]
    Probe(ProbeError),
    #[error("{0}; nothing was written")]
    SignIn(chatgpt::SignInError),
    #[error("{0}; nothing was written")]
    Value(env::BadValue),
    #[error("cannot read {}: {source}; nothing was written", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}; .env is as it was", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot use the terminal: {0}; nothing was written. Answer in lines with `teneralctl setup --plain`")]
    Terminal(std::io::Error),
}

impl From<AskError> for SetupError {
    fn from(e: AskError) -> Self {
        SetupError::Ask(e)
    }
}

impl From<ProbeError> for SetupError {
    fn from(e: ProbeError) -> Self {
        SetupError::Probe(e)
    }
}

impl From<chatgpt::SignInError> for SetupError {
    fn from(e: chatgpt::SignInError) -> Self {
        SetupError::SignIn(e)
    }
}

impl From<env::BadValue> for SetupError {
    fn from(e: env::BadValue) -> Self {
        SetupError::Value(e)
    }
}

/// After input that ended: what `--plain` reads.
fn plain_hint(e: &AskError) -> String {
    match e {
        AskError::Ended { .. } => format!(". {ANSWERS}"),
        _ => String::new(),
    }
}

/// The answers `--plain` reads, in order; said when input is missing.
pub const ANSWERS: &str = "With --plain give one answer a line: y when asked to replace an existing .env; \
    the provider (openai, compatible, standin or chatgpt); for chatgpt, once the browser came \
    back, the model; for openai the address (an empty line for \
    https://api.openai.com/v1), the key and the model; for compatible the address, the key and the model";

/// Runs setup on the process's stdin and stdout; the exit status.
pub fn run(options: &SetupOptions) -> Result<i32, SetupError> {
    let terminal = std::io::stdin().is_terminal();
    if !terminal && !options.plain {
        eprintln!(
            "teneralctl setup: stdin is not a terminal, so there is nobody to ask; nothing was written. \
             Run it at a terminal, or answer from a pipe with `teneralctl setup --plain`. {ANSWERS}."
        );
        return Ok(1);
    }
    if terminal && !options.plain {
        check_home(&options.home)?;
        let existing = read_env(&options.home)?;
        return full::run(&options.home, existing);
    }
    let stdin = std::io::stdin();
    let mut asker = Asker { input: stdin.lock(), out: std::io::stdout(), terminal };
    setup(&options.home, &mut asker)
}

/// The text of `home`'s `.env`, or `None` when there is none.
fn read_env(home: &Path) -> Result<Option<String>, SetupError> {
    let path = home.join(".env");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SetupError::Read { path, source }),
    }
}

/// The whole conversation over `asker`; the exit status.
pub fn setup<R: BufRead, W: Write>(
    home: &Path,
    asker: &mut Asker<R, W>,
) -> Result<i32, SetupError> {
    check_home(home)?;
    let path = home.join(".env");
    let existing = read_env(home)?;
    if existing.is_some() {
        asker.say(&format!(
            "{} exists. Setup replaces its provider settings ({}) and keeps every other line.",
            path.display(),
            env::PROVIDER_NAMES.join(", ")
        ));
        if !asker.yes("whether to replace the provider settings", "Go on? [y/N]")? {
            asker.say("Nothing was written; .env is as it was.");
            return Ok(0);
        }
    }
    let options: Vec<String> = PROVIDERS.iter().map(|p| (*p).to_owned()).collect();
    asker.say("Which model provider?");
    let provider = asker.choose("the provider", &options, false, "Provider (number or name):")?;
    let mut tokens = None;
    let settings: Vec<(&str, String)> = match provider.as_str() {
        "chatgpt" => {
            let signed_in = chatgpt::sign_in(asker)?;
            let endpoint = plan_endpoint(&signed_in, asker)?;
            test(&endpoint, asker)?;
            tokens = Some(signed_in);
            settings_for("chatgpt", Some(&endpoint))
        }
        "standin" => {
            asker.say(
                "The stand-in model runs inside the kernel: no address, key or test requests.",
            );
            settings_for("standin", None)
        }
        remote => {
            let endpoint = ask_endpoint(remote, asker)?;
            test(&endpoint, asker)?;
            settings_for(remote, Some(&endpoint))
        }
    };
    for line in write::settings(home, existing, &settings, tokens.as_ref())? {
        asker.say(&line);
    }
    Ok(0)
}

/// Pure: the `.env` settings for `provider` reached at `endpoint` (none
/// for `standin`).
pub fn settings_for(provider: &str, endpoint: Option<&Endpoint>) -> Vec<(&'static str, String)> {
    let mut settings = vec![("TENERAL_PROVIDER", provider.to_owned())];
    let Some(endpoint) = endpoint else { return settings };
    let default_url = match provider {
        "chatgpt" => Some(teneral_core::chatgpt::BACKEND_URL),
        "openai" => Some(OPENAI_URL),
        _ => None,
    };
    if default_url != Some(endpoint.base_url.as_str()) {
        settings.push(("TENERAL_BASE_URL", endpoint.base_url.clone()));
    }
    if provider != "chatgpt" {
        settings.push(("TENERAL_API_KEY", endpoint.key.clone()));
    }
    settings.push(("TENERAL_MODEL", endpoint.model.clone()));
    settings
}

pub(crate) fn check_home(home: &Path) -> Result<(), SetupError> {
    let shown = || home.canonicalize().unwrap_or_else(|_| home.to_owned());
    if !home.is_dir() {
        return Err(SetupError::NoDir(shown()));
    }
    let marks = [".teneral", ".env", ".env.example", crate::journal::JOURNAL_PATH];
    if marks.iter().any(|mark| home.join(mark).exists()) {
        Ok(())
    } else {
        Err(SetupError::NotHere(shown()))
    }
}

/// Address, key and model for `openai` or `compatible`.
fn ask_endpoint<R: BufRead, W: Write>(
    provider: &str,
    asker: &mut Asker<R, W>,
) -> Result<Endpoint, SetupError> {
    let (protocol, base_url) = if provider == "openai" {
        let url = asker.line("the address", &format!("Address (Enter for {OPENAI_URL}):"))?;
        (Protocol::Responses, if url.is_empty() { OPENAI_URL.to_owned() } else { url })
    } else {
        asker.say(
            "The endpoint's base address speaks OpenAI's chat completions, e.g. https://host/v1.",
        );
        (Protocol::Chat, asker.line("the address", "Address:")?)
    };
    env::check_address(&base_url)?;
    let base_url = base_url.trim_end_matches('/').to_owned();
    let key = asker.secret("the key", "API key:")?;
    env::check_value("the key", &key)?;
    let client = probe::Client::new()?;
    let model = match client.models(&base_url, &key, None) {
        Some(ids) => {
            asker.say(&format!(
                "{base_url} offers these models (choose one that supports tool calls):"
            ));
            asker.choose("the model", &ids, true, "Model (number or name):")?
        }
        None => asker.line("the model", "Model (its name; it must support tool calls):")?,
    };
    env::check_value("the model's name", &model)?;
    Ok(Endpoint { protocol, base_url, key, model, account: None })
}

/// The plan's endpoint and the model, for tokens just signed in.
fn plan_endpoint<R: BufRead, W: Write>(
    tokens: &teneral_core::chatgpt::Tokens,
    asker: &mut Asker<R, W>,
) -> Result<Endpoint, SetupError> {
    let base_url = std::env::var(chatgpt::URL_VARIABLE)
        .unwrap_or_else(|_| teneral_core::chatgpt::BACKEND_URL.to_owned());
    let base_url = base_url.trim_end_matches('/').to_owned();
    let client = probe::Client::new()?;
    let account = Some(tokens.account_id.as_str());
    let model = match client.models(&base_url, &tokens.access_token, account) {
        Some(ids) => {
            asker.say("Your plan offers these models (choose one that supports tool calls):");
            asker.choose("the model", &ids, true, "Model (number or name):")?
        }
        None => {
            asker.line("the model", "Model (its name, e.g. gpt-5; it must support tool calls):")?
        }
    };
    env::check_value("the model's name", &model)?;
    Ok(Endpoint {
        protocol: Protocol::Responses,
        base_url,
        key: tokens.access_token.clone(),
        model,
        account: Some(tokens.account_id.clone()),
    })
}

/// The two test requests, with their progress.
fn test<R: BufRead, W: Write>(
    endpoint: &Endpoint,
    asker: &mut Asker<R, W>,
) -> Result<(), SetupError> {
    let client = probe::Client::new()?;
    asker.say(&format!("Test 1 of 2: asking {} for a sentence ...", endpoint.model));
    let words = client.text_test(endpoint)?;
    let shown: String = words.chars().take(120).collect();
    asker.say(&format!("  answered in words: {shown:?}"));
    asker.say("Test 2 of 2: asking it to call a tool ...");
    let name = client.tool_test(endpoint)?;
    asker.say(&format!("  called the tool {name}."));
    Ok(())
}

/// Pure: the advice for a kernel that runs or not, in a unit or not.
pub fn advice(running: bool, unit: Option<&str>) -> String {
    match (running, unit) {
        (false, _) => "teneral reads it when it starts next.".to_owned(),
        (true, Some(unit)) => format!(
            "The running kernel keeps its configuration until it is restarted; restart it with:\n  systemctl --user restart {}",
            shell_word(unit)
        ),
        (true, None) => "The running kernel keeps its configuration until it is restarted: stop it \
             (Ctrl-C where `teneral run` runs) and start it again."
            .to_owned(),
    }
}

/// `word` as the shell reads it back: as it is when it is plain, else in
/// single quotes (an instance unit's name has `\x2d` escapes).
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@._:-/".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_as_the_shell_reads_them() {
        let table: &[(&str, &str)] = &[
            ("teneral.service", "teneral.service"),
            ("teneral@srv-agents-ada.service", "teneral@srv-agents-ada.service"),
            (r"teneral@home-a\x2db.service", r"'teneral@home-a\x2db.service'"),
            ("it's", r"'it'\''s'"),
        ];
        for (unit, shown) in table {
            assert_eq!(shell_word(unit), *shown);
        }
    }

    #[test]
    fn restart_advice_by_case() {
        assert!(advice(false, Some("teneral.service")).contains("when it starts next"));
        assert!(advice(true, Some("teneral.service"))
            .ends_with("\n  systemctl --user restart teneral.service"));
        assert!(advice(true, None).contains("Ctrl-C"));
    }
}
