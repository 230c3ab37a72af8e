//! What the full client prints for the journal's events, as styled rows,
//! and what it learns from them for the live region (what the agent does,
//! the tool calls that have not finished).
//!
//! Invariants: every text from the journal goes through [`sanitize`] (or
//! [`markdown::layout`], which sanitizes); each row starts with the client's
//! two columns; a tool call is printed once, when its result arrives (it
//! waits in the live region until then); the decisions are pure over the
//! events given, so history and live events go through the same code.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

use super::markdown;
use super::render::{cut, sanitize};
use super::theme::{Role, Theme};
use crate::journal::rules::Source;
use crate::journal::{Event, EventKind};
pub use crate::when::{clock, duration, parse_ts};

/// What the agent is doing, for the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// Nothing: at rest.
    Resting,
    /// Its first start, before its first words.
    Waking,
    Thinking,
    Running(String),
    /// It asked for a mutation; the kernel has not answered (the gate's
    /// current step, when one was journaled).
    Mutating(Option<String>),
    /// A request to the model failed; retry number `retry` comes at `at`
    /// (milliseconds since the epoch, when the journal's time was read).
    Retrying {
        retry: u64,
        at: Option<i64>,
    },
    /// The kernel is there and no body runs.
    Starting,
}

impl Doing {
    /// Whether Esc would stop something now.
    pub fn interruptible(&self) -> bool {
        matches!(self, Doing::Thinking | Doing::Running(_) | Doing::Waking | Doing::Retrying { .. })
    }
}

/// A tool call waiting for its result.
#[derive(Debug, Clone)]
pub struct Pending {
    pub id: String,
    /// The call's one line (name and input), sanitized.
    pub line: String,
    ts: String,
}

/// The full client's reading of the conversation.
#[derive(Debug)]
pub struct View {
    pub theme: Theme,
    pub width: usize,
    pub pending: Vec<Pending>,
    pub doing: Doing,
    /// Show a few rows of each tool call's output (`/tools`, Tab).
    pub tools: bool,
    /// The last reply asked a question and nothing arrived since.
    pub question: bool,
    /// The short commit of the mutation asked for last, as the kernel's
    /// status names it.
    candidate: String,
}

/// The candidate and the step under way in the kernel's status text
/// (`checking mutation 0123abc: lint-body, body-tests (about 40 s, from the
/// last run)`), sanitized; `None` for any other state.
pub fn gate_step(status: &str) -> Option<(String, String)> {
    let rest = status.strip_prefix("checking mutation ")?;
    let (candidate, step) = rest.split_once(": ")?;
    let step = first_line(step.split("; meanwhile").next().unwrap_or_default());
    (!step.is_empty()).then(|| (first_line(candidate), cut(&step, 100)))
}

/// The first non-blank line of sanitized `text`, tabs as blanks.
fn first_line(text: &str) -> String {
    let clean = sanitize(text);
    clean.lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().replace('\t', " ")
}

/// The last `n` non-blank lines of sanitized `text`.
fn last_lines(text: &str, n: usize) -> Vec<String> {
    let clean = sanitize(text).replace('\t', " ");
    let lines: Vec<&str> = clean.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| (*l).to_owned()).collect()
}

impl View {
    pub fn new(theme: Theme, width: usize) -> Self {
        Self {
            theme,
            width,
            pending: Vec::new(),
            doing: Doing::Resting,
            tools: false,
            question: false,
            candidate: String::new(),
        }
    }

    fn row(&self, mark: &str, text: &str, role: Role) -> Line<'static> {
        let style = self.theme.style(role);
        let text = cut(text, self.width.saturating_sub(mark.width()).max(4));
        Line::from(vec![Span::styled(mark.to_owned(), style), Span::styled(text, style)])
    }

    /// A coloured block behind a bar: a head row, then detail rows.
    fn block(&self, role: Role, head: String, details: Vec<String>) -> Vec<Line<'static>> {
        let bar = self.theme.marks.bar;
        let mut rows = vec![self.row(bar, &head, role)];
        for d in details {
            let style: Style = self.theme.style(Role::Dim);
            let text = cut(&d, self.width.saturating_sub(bar.width() + 2).max(4));
            rows.push(Line::from(vec![
                Span::styled(bar.to_owned(), self.theme.style(role)),
                Span::styled(format!("  {text}"), style),
            ]));
        }
        rows
    }

    /// A failed request to the model that will be tried again: the
    /// provider's words, which retry, and when.
    fn retry(&mut self, e: &Event) -> Vec<Line<'static>> {
        let retry = e.fields.get("retry").and_then(Value::as_u64).unwrap_or(0);
        let secs = e.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
        let wait = (secs * 1000.0) as i64;
        let at = parse_ts(&e.ts).map(|t| t + wait);
        self.doing = Doing::Retrying { retry, at };
        let when = match at {
            Some(at) => format!("in {} (at {} UTC)", duration(wait), clock(at)),
            None => format!("in {}", duration(wait)),
        };
        let head = format!("the model failed: {}", first_line(e.text("message")));
        self.block(Role::Warn, head, vec![format!("retry {retry} {when}; Esc gives up the turn")])
    }

    /// What the kernel's status says of the gate (`.teneral/status`): a row
    /// when a step starts, while a mutation is under way.
    pub fn gate_status(&mut self, status: &str) -> Vec<Line<'static>> {
        let Doing::Mutating(now) = &self.doing else { return Vec::new() };
        let Some((candidate, step)) = gate_step(status) else { return Vec::new() };
        if candidate != self.candidate {
            return Vec::new(); // an older status, or another candidate's
        }
        if now.as_deref() == Some(step.as_str()) {
            return Vec::new();
        }
        self.doing = Doing::Mutating(Some(step.clone()));
        vec![self.row("  ", &format!("gate {step} …"), Role::Dim)]
    }

    /// The rows to print for `event` (often none) and what it changes.
    pub fn event(&mut self, e: &Event) -> Vec<Line<'static>> {
        let m = self.theme.marks;
        let short = |s: &str| sanitize(crate::commit::short(s));
        // A type this client does not know shows nothing.
        let Some(kind) = e.known_kind() else { return Vec::new() };
        match kind {
            EventKind::OwnerLine => {
                self.doing = Doing::Thinking;
                self.question = false;
                let text = sanitize(e.text("text"));
                let mut rows = Vec::new();
                let mut images = 0;
                for (i, line) in text.trim_end().split('\n').enumerate() {
                    let mark = if i == 0 { m.owner } else { "  " };
                    match super::image::referenced(line) {
                        Some((ext, hash)) => {
                            images += 1;
                            let dot = if m.ok.is_ascii() { " - " } else { " · " };
                            let chip = format!("[image {images}{dot}{ext}{dot}{}]", &hash[..7]);
                            rows.push(self.row(mark, &chip, Role::Dim));
                        }
                        None => rows.push(self.row(mark, line, Role::Owner)),
                    }
                }
                rows
            }
            EventKind::Reply => {
                self.doing = Doing::Thinking;
                let text = e.text("text");
                if text.trim().is_empty() {
                    return Vec::new();
                }
                self.question = text.trim_end().ends_with('?');
                let mut rows = Vec::new();
                if e.text("from") == "body" {
                    rows.push(self.row(m.warn, "not from the model", Role::Warn));
                }
                rows.extend(markdown::layout(text, self.width, m.reply, &self.theme));
                if e.fields.get("interrupted") == Some(&Value::Bool(true)) {
                    rows.push(self.row("  ", "(cut short: you interrupted it)", Role::Dim));
                }
                rows
            }
            EventKind::Reasoning => {
                let text = first_line(e.text("text"));
                let style =
                    self.theme.style(Role::Dim).add_modifier(ratatui::style::Modifier::ITALIC);
                let text = cut(&text, self.width.saturating_sub(2).max(4));
                vec![Line::from(vec![Span::styled(m.reasoning, style), Span::styled(text, style)])]
            }
            EventKind::ToolCall => {
                let name = cut(&first_line(e.text("name")), 40);
                self.doing = Doing::Running(name.clone());
                let input = first_line(&super::render::tool_input(e.fields.get("input")));
                let line = if input.is_empty() { name } else { format!("{name}  {input}") };
                self.pending.push(Pending { id: e.text("id").to_owned(), line, ts: e.ts.clone() });
                Vec::new()
            }
            EventKind::ToolResult => {
                self.doing = Doing::Thinking;
                let at = self.pending.iter().position(|p| p.id == e.text("id"));
                let Some(call) = at.map(|i| self.pending.remove(i)) else { return Vec::new() };
                let failed = e.fields.get("error") == Some(&Value::Bool(true));
                let took = match (parse_ts(&call.ts), parse_ts(&e.ts)) {
                    (Some(a), Some(b)) => format!(" {}", duration(b - a)),
                    _ => String::new(),
                };
                let verdict = if failed { m.failed } else { m.ok };
                let end = format!(" {verdict}{took}");
                let room = self.width.saturating_sub(m.tool.width() + end.width()).max(4);
                let dim = self.theme.style(Role::Dim);
                let mut rows = vec![Line::from(vec![
                    Span::styled(m.tool, dim),
                    Span::styled(cut(&call.line, room), dim),
                    Span::styled(
                        end,
                        self.theme.style(if failed { Role::Bad } else { Role::Good }),
                    ),
                ])];
                if self.tools || failed {
                    let n = if self.tools { 4 } else { 1 };
                    for line in last_lines(e.text("output"), n) {
                        rows.push(self.row("    ", &line, Role::Dim));
                    }
                }
                rows
            }
            EventKind::TurnEnded => {
                self.doing = Doing::Resting;
                self.pending.clear();
                Vec::new()
            }
            EventKind::TurnInterrupted => {
                self.doing = Doing::Resting;
                self.pending.clear();
                vec![self.row("  ", "interrupted by you", Role::Dim)]
            }
            EventKind::Stimulus => {
                self.doing = Doing::Thinking;
                let what = match Source::parse(e.text("source")) {
                    Some(Source::Clock) => "the clock".to_owned(),
                    Some(Source::Inbox) => match first_line(e.text("from")) {
                        f if f.is_empty() => "a message in the inbox".to_owned(),
                        f => format!("a message from {f}: {}", first_line(e.text("text"))),
                    },
                    Some(known) => format!("the body's {}", known.as_str()),
                    None => format!("what the body calls {:?}", first_line(e.text("source"))),
                };
                vec![self.row("  ", &format!("woken by {what}"), Role::Dim)]
            }
            EventKind::Birth => {
                self.doing = Doing::Waking;
                vec![self.row("  ", "the birth letter", Role::Dim)]
            }
            EventKind::GenerationStarted | EventKind::KernelStarted => {
                self.doing = Doing::Starting;
                Vec::new()
            }
            EventKind::GenerationReady => {
                self.doing = Doing::Resting;
                Vec::new()
            }
            EventKind::ModelRetry => self.retry(e),
            EventKind::GenerationExited => {
                self.pending.clear();
                if matches!(self.doing, Doing::Mutating(_)) {
                    // The body left for its mutation: the gate goes on.
                    return vec![self.row("  ", "the body stepped aside for the gate", Role::Dim)];
                }
                self.doing = Doing::Starting;
                match first_line(e.text("status")) {
                    s if s.is_empty() || s == "exit status 0" => Vec::new(),
                    s => vec![self.row(m.warn, &format!("the body ended ({s})"), Role::Warn)],
                }
            }
            EventKind::KernelStopped => {
                self.doing = Doing::Starting;
                self.pending.clear();
                let why = first_line(e.text("reason"));
                vec![self.row("  ", &format!("the kernel stopped {why}"), Role::Warn)]
            }
            EventKind::KernelNotice => {
                let text = sanitize(e.text("text"));
                let mut lines = text.trim_end().lines().map(str::to_owned);
                let head = lines.next().unwrap_or_default();
                self.block(Role::Accent, format!("kernel: {head}"), lines.collect())
            }
            EventKind::MutationRequested => {
                self.doing = Doing::Mutating(None);
                let c = short(e.text("candidate"));
                self.candidate = c.clone();
                vec![self.row("  ", &format!("asked for a mutation to {c}"), Role::Dim)]
            }
            EventKind::MutationCheck => {
                let check = first_line(e.text("check"));
                let result = first_line(e.text("result"));
                let secs = e.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                // The step under way stays (a check of a group may end while
                // the others run): it is not said again.
                if !matches!(self.doing, Doing::Mutating(_)) {
                    self.doing = Doing::Mutating(None);
                }
                let took = duration((secs * 1000.0) as i64);
                let (said, role) = match result.as_str() {
                    "failed" => (m.failed.to_owned(), Role::Bad),
                    _ => (format!("{} {result}", m.ok), Role::Dim),
                };
                // A check that did not run says why (the running kernel, a kept pass).
                let why = first_line(e.text("why"));
                if !why.is_empty() {
                    return vec![self.row("  ", &format!("gate {check} {said}: {why}"), role)];
                }
                vec![self.row("  ", &format!("gate {check} {said} {took}"), role)]
            }
            EventKind::MutationAccepted => {
                self.doing = Doing::Starting;
                let head = format!(
                    "mutation accepted: {} → {}",
                    short(e.text("from")),
                    short(e.text("to"))
                );
                self.block(Role::Good, head, Vec::new())
            }
            EventKind::MutationRejected => {
                let head = format!(
                    "mutation to {} rejected at gate {}",
                    short(e.text("candidate")),
                    first_line(e.text("check"))
                );
                self.block(Role::Bad, head, last_lines(e.text("output"), 4))
            }
            EventKind::GenerationRolledback => {
                let head = format!("rolled back: {}", first_line(e.text("reason")));
                self.block(Role::Warn, head, last_lines(e.text("stderr"), 3))
            }
            EventKind::GenerationSentback => {
                let head = format!(
                    "sent back by you: {} → {}",
                    short(e.text("from")),
                    short(e.text("to"))
                );
                self.block(Role::Warn, head, Vec::new())
            }
            // What this client shows nothing for, and that changes nothing
            // it says of the agent.
            EventKind::Usage
            | EventKind::OfferRequested
            | EventKind::Note
            | EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
