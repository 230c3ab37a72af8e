//! The pages of `teneralctl setup` at a terminal, as pure logic: what a
//! key does on each page ([`key`]) and which page follows which
//! ([`next`], [`back`]). Drawing is in [`super::screen`], the I/O in
//! [`super::full`].
//!
//! Invariants: pure (no I/O, no clock); Ctrl-C gives up on every page; Esc
//! leaves on the first page and goes back one page on a page that asks for
//! a value; a value is handed on only after it passed the same checks as
//! `--plain` ([`super::env`]); the key is held here but never put into
//! anything drawn (the drawing shows its length only).
use super::ask::pick;
use super::env;

/// The providers in the order they are offered, with a line about each.
pub const PROVIDERS: [(&str, &str); 4] = [
    ("openai", "an OpenAI API key; the Responses API"),
    ("compatible", "any endpoint that speaks chat completions: an address, a key and a model"),
    ("standin", "the stand-in model inside the kernel: no account, no tests"),
    ("chatgpt", "a ChatGPT plan: sign in with your browser, no key"),
];

/// A key as the pages see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Enter,
    Esc,
    CtrlC,
    Backspace,
    /// Ctrl-U: the value typed so far, gone.
    Clear,
    Char(char),
    Paste(String),
}

/// A page and what has been typed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    Provider {
        selected: usize,
    },
    Address {
        text: String,
        problem: Option<String>,
    },
    Key {
        text: String,
        problem: Option<String>,
    },
    Model {
        options: Vec<String>,
        selected: usize,
        typed: String,
        problem: Option<String>,
    },
    /// Waiting for the browser; only giving up is up to the owner.
    SignIn,
    /// The two test requests running; only giving up is up to the owner.
    Tests,
    /// `.env` exists: replace its provider settings?
    Replace,
    /// The last page: what was written where, or why nothing was.
    Ended,
}

/// Which page, without what was typed on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Provider,
    Address,
    Key,
    Model,
    SignIn,
    Tests,
    Replace,
    Ended,
}

/// What a key asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing beyond what changed on the page: draw it again.
    Stay,
    /// The page before this one.
    Back,
    /// Esc on the first page: leave, writing nothing.
    Leave,
    /// Ctrl-C, or Esc while signing in or testing: leave, writing nothing.
    GiveUp,
    Provider(&'static str),
    /// The checked answer of an address, key or model page.
    Answer(String),
    /// The answer on [`Page::Replace`].
    Replace(bool),
    /// Any key on the last page.
    Close,
}

impl Page {
    pub fn kind(&self) -> Kind {
        match self {
            Page::Provider { .. } => Kind::Provider,
            Page::Address { .. } => Kind::Address,
            Page::Key { .. } => Kind::Key,
            Page::Model { .. } => Kind::Model,
            Page::SignIn => Kind::SignIn,
            Page::Tests => Kind::Tests,
            Page::Replace => Kind::Replace,
            Page::Ended => Kind::Ended,
        }
    }
}

/// The page after `from` for `provider`; `exists`: there is a `.env`.
pub fn next(provider: &str, from: Kind, exists: bool) -> Kind {
    let write = if exists { Kind::Replace } else { Kind::Ended };
    match (from, provider) {
        (Kind::Provider, "chatgpt") => Kind::SignIn,
        (Kind::Provider, "standin") => write,
        (Kind::Provider, _) => Kind::Address,
        (Kind::Address, _) => Kind::Key,
        (Kind::Key | Kind::SignIn, _) => Kind::Model,
        (Kind::Model, _) => Kind::Tests,
        (Kind::Tests, _) => write,
        (Kind::Replace | Kind::Ended, _) => Kind::Ended,
    }
}

/// The page Esc goes back to from `from` (a sign-in is not gone back into:
/// its code is spent).
pub fn back(provider: &str, from: Kind) -> Kind {
    match (from, provider) {
        (Kind::Key, _) => Kind::Address,
        (Kind::Model, "openai" | "compatible") => Kind::Key,
        _ => Kind::Provider,
    }
}

/// What `key` does on `page`; what was typed is kept on the page.
pub fn key(page: &mut Page, key: Key) -> Step {
    if key == Key::CtrlC {
        return Step::GiveUp;
    }
    match page {
        Page::Provider { selected } => match key {
            Key::Up => {
                *selected = selected.checked_sub(1).unwrap_or(PROVIDERS.len() - 1);
                Step::Stay
            }
            Key::Down => {
                *selected = (*selected + 1) % PROVIDERS.len();
                Step::Stay
            }
            Key::Enter => PROVIDERS.get(*selected).map_or(Step::Stay, |p| Step::Provider(p.0)),
            Key::Esc => Step::Leave,
            Key::Char(c) => match c.to_digit(10).and_then(|n| n.checked_sub(1)) {
                Some(n) => PROVIDERS.get(n as usize).map_or(Step::Stay, |p| Step::Provider(p.0)),
                None => Step::Stay,
            },
            _ => Step::Stay,
        },
        Page::Address { text, problem } => field(text, problem, key, |t| {
            env::check_address(t)?;
            Ok(t.trim_end_matches('/').to_owned())
        }),
        Page::Key { text, problem } => field(text, problem, key, |t| {
            env::check_value("the key", t)?;
            Ok(t.to_owned())
        }),
        Page::Model { options, selected, typed, problem } => match key {
            Key::Up if typed.is_empty() => {
                *selected = selected.saturating_sub(1);
                Step::Stay
            }
            Key::Down if typed.is_empty() => {
                *selected = (*selected + 1).min(options.len().saturating_sub(1));
                Step::Stay
            }
            Key::Enter => {
                let chosen = if typed.is_empty() {
                    options.get(*selected).cloned()
                } else {
                    pick(typed, options, true)
                };
                let Some(chosen) = chosen else {
                    *problem = Some("type the model's name".to_owned());
                    return Step::Stay;
                };
                match env::check_value("the model's name", &chosen) {
                    Ok(()) => Step::Answer(chosen),
                    Err(e) => {
                        *problem = Some(e.to_string());
                        Step::Stay
                    }
                }
            }
            other => edit(typed, problem, other),
        },
        Page::SignIn | Page::Tests => match key {
            Key::Esc => Step::GiveUp,
            _ => Step::Stay,
        },
        Page::Replace => match key {
            Key::Enter | Key::Char('y' | 'Y') => Step::Replace(true),
            Key::Esc | Key::Char('n' | 'N') => Step::Replace(false),
            _ => Step::Stay,
        },
        Page::Ended => match key {
            Key::Enter | Key::Esc | Key::Char('q') => Step::Close,
            _ => Step::Stay,
        },
    }
}

/// A page that asks for one value: Enter hands it on once `check` passes.
fn field(
    text: &mut String,
    problem: &mut Option<String>,
    key: Key,
    check: impl Fn(&str) -> Result<String, env::BadValue>,
) -> Step {
    match key {
        Key::Enter => match check(text.trim()) {
            Ok(value) => Step::Answer(value),
            Err(e) => {
                *problem = Some(e.to_string());
                Step::Stay
            }
        },
        other => edit(text, problem, other),
    }
}

/// Typing into a value; Esc goes back.
fn edit(text: &mut String, problem: &mut Option<String>, key: Key) -> Step {
    match key {
        Key::Esc => return Step::Back,
        Key::Backspace => {
            text.pop();
        }
        Key::Clear => text.clear(),
        Key::Char(c) if !c.is_control() => text.push(c),
        // A pasted key often ends with a line break: not part of it.
        Key::Paste(pasted) => text.push_str(pasted.trim_end_matches(['\r', '\n'])),
        _ => return Step::Stay,
    }
    *problem = None;
    Step::Stay
}

#[cfg(test)]
mod tests;
