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
use crate::journal::Event;

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
    /// The kernel is there and no body runs.
    Starting,
}

impl Doing {
    /// Whether Esc would stop something now.
    pub fn interruptible(&self) -> bool {
        matches!(self, Doing::Thinking | Doing::Running(_) | Doing::Waking)
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
}

/// Milliseconds since the epoch of an RFC 3339 time in UTC
/// (`2026-11-30T19:52:33.123Z`), as the journal writes them.
pub fn parse_ts(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !ts.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, min, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = match ts.get(19..ts.len() - 1) {
        Some(frac) if frac.starts_with('.') => {
            let digits = format!("{:0<3}", &frac[1..]);
            digits.get(..3)?.parse::<i64>().ok()?
        }
        _ => 0,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + min) * 60_000 + s * 1000 + ms)
}

/// A duration as people read it: `0.3s`, `12s`, `4 min`.
pub fn duration(ms: i64) -> String {
    match ms.max(0) {
        ms if ms < 10_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 120_000 => format!("{}s", ms / 1000),
        ms => format!("{} min", ms / 60_000),
    }
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

    /// The rows to print for `event` (often none) and what it changes.
    pub fn event(&mut self, e: &Event) -> Vec<Line<'static>> {
        let m = self.theme.marks;
        let short = |s: &str| sanitize(crate::commit::short(s));
        match e.kind.as_str() {
            "owner.line" => {
                self.doing = Doing::Thinking;
                self.question = false;
                let text = sanitize(e.text("text"));
                let mut rows = Vec::new();
                for (i, line) in text.trim_end().split('\n').enumerate() {
                    let mark = if i == 0 { m.owner } else { "  " };
                    rows.push(self.row(mark, line, Role::Owner));
                }
                rows
            }
            "reply" => {
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
                rows
            }
            "reasoning" => {
                let text = first_line(e.text("text"));
                let style =
                    self.theme.style(Role::Dim).add_modifier(ratatui::style::Modifier::ITALIC);
                let text = cut(&text, self.width.saturating_sub(2).max(4));
                vec![Line::from(vec![Span::styled(m.reasoning, style), Span::styled(text, style)])]
            }
            "tool.call" => {
                let name = cut(&first_line(e.text("name")), 40);
                self.doing = Doing::Running(name.clone());
                let input = first_line(&super::render::tool_input(e.fields.get("input")));
                let line = if input.is_empty() { name } else { format!("{name}  {input}") };
                self.pending.push(Pending { id: e.text("id").to_owned(), line, ts: e.ts.clone() });
                Vec::new()
            }
            "tool.result" => {
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
            "turn.ended" => {
                self.doing = Doing::Resting;
                self.pending.clear();
                Vec::new()
            }
            "turn.interrupted" => {
                self.doing = Doing::Resting;
                self.pending.clear();
                vec![self.row("  ", "interrupted by you", Role::Dim)]
            }
            "stimulus" => {
                self.doing = Doing::Thinking;
                let what = match e.text("source") {
                    "clock" => "the clock".to_owned(),
                    "inbox" => match first_line(e.text("from")) {
                        f if f.is_empty() => "a message in the inbox".to_owned(),
                        f => format!("a message from {f}: {}", first_line(e.text("text"))),
                    },
                    other => first_line(other),
                };
                vec![self.row("  ", &format!("woken by {what}"), Role::Dim)]
            }
            "birth" => {
                self.doing = Doing::Waking;
                vec![self.row("  ", "the birth letter", Role::Dim)]
            }
            "generation.started" | "kernel.started" => {
                self.doing = Doing::Starting;
                Vec::new()
            }
            "generation.ready" => {
                self.doing = Doing::Resting;
                Vec::new()
            }
            "generation.exited" | "kernel.stopped" => {
                self.doing = Doing::Starting;
                self.pending.clear();
                if e.kind == "kernel.stopped" {
                    let why = first_line(e.text("reason"));
                    return vec![self.row("  ", &format!("the kernel stopped {why}"), Role::Warn)];
                }
                Vec::new()
            }
            "kernel.notice" => {
                let text = sanitize(e.text("text"));
                let mut lines = text.trim_end().lines().map(str::to_owned);
                let head = lines.next().unwrap_or_default();
                self.block(Role::Accent, format!("kernel: {head}"), lines.collect())
            }
            "mutation.requested" => {
                self.doing = Doing::Mutating(None);
                let c = short(e.text("candidate"));
                vec![self.row("  ", &format!("asked for a mutation to {c}"), Role::Dim)]
            }
            "mutation.check" => {
                let check = first_line(e.text("check"));
                let result = first_line(e.text("result"));
                let secs = e.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                self.doing = Doing::Mutating(Some(check.clone()));
                let role = if result == "failed" { Role::Bad } else { Role::Dim };
                vec![self.row("  ", &format!("gate {check}: {result} ({secs:.1}s)"), role)]
            }
            "mutation.accepted" => {
                self.doing = Doing::Starting;
                let head = format!(
                    "mutation accepted: {} → {}",
                    short(e.text("from")),
                    short(e.text("to"))
                );
                self.block(Role::Good, head, Vec::new())
            }
            "mutation.rejected" => {
                let head = format!(
                    "mutation to {} rejected at gate {}",
                    short(e.text("candidate")),
                    first_line(e.text("check"))
                );
                self.block(Role::Bad, head, last_lines(e.text("output"), 4))
            }
            "generation.rolledback" => {
                let head = format!("rolled back: {}", first_line(e.text("reason")));
                self.block(Role::Warn, head, last_lines(e.text("stderr"), 3))
            }
            "generation.sentback" => {
                let head = format!(
                    "sent back by you: {} → {}",
                    short(e.text("from")),
                    short(e.text("to"))
                );
                self.block(Role::Warn, head, Vec::new())
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_line;

    fn ev(json: &str) -> Event {
        parse_line(json.as_bytes()).unwrap_or_else(|| panic!("not an event: {json}"))
    }

    fn text(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect()).collect()
    }

    #[test]
    fn times_and_durations() {
        assert_eq!(parse_ts("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ts("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(parse_ts("2000-03-01T00:00:00.000Z"), Some(951_868_800_000));
        assert_eq!(parse_ts("not a time"), None);
        assert_eq!(duration(300), "0.3s");
        assert_eq!(duration(42_000), "42s");
        assert_eq!(duration(240_000), "4 min");
    }

    #[test]
    fn events_table() {
        let table: &[(&[&str], &[&str])] = &[
            (&[r#"{"type":"owner.line","text":"hi\nthere"}"#], &["› hi", "  there"]),
            (&[r#"{"type":"reply","text":"**Yes.**"}"#], &["● Yes."]),
            (
                &[
                    r#"{"type":"tool.call","id":"1","name":"bash","input":{"command":"ls"},"ts":"2026-01-01T00:00:00.000Z"}"#,
                    r#"{"type":"tool.result","id":"1","output":"a","ts":"2026-01-01T00:00:00.300Z"}"#,
                ],
                &["▪ bash  command: ls ✓ 0.3s"],
            ),
            (
                &[
                    r#"{"type":"tool.call","id":"2","name":"t","input":{}}"#,
                    r#"{"type":"tool.result","id":"2","output":"x\nboom","error":true}"#,
                ],
                &["▪ t ✗ failed", "    boom"],
            ),
            (&[r#"{"type":"turn.interrupted"}"#], &["  interrupted by you"]),
            (&[r#"{"type":"stimulus","source":"clock"}"#], &["  woken by the clock"]),
            (
                &[r#"{"type":"mutation.accepted","from":"0123456789ab","to":"fedcba987654"}"#],
                &["│ mutation accepted: 0123456 → fedcba9"],
            ),
            (
                &[
                    r#"{"type":"mutation.rejected","candidate":"0123456789ab","check":"tests","output":"ok\nFAILED x"}"#,
                ],
                &["│ mutation to 0123456 rejected at gate tests", "│   ok", "│   FAILED x"],
            ),
            (
                &[r#"{"type":"reply","text":"said","from":"body"}"#],
                &["! not from the model", "● said"],
            ),
            (&[r#"{"type":"usage","input_tokens":1,"output_tokens":1}"#], &[]),
        ];
        for (events, want) in table {
            let mut view = View::new(Theme::new(false, true), 80);
            let rows: Vec<Line<'_>> = events.iter().flat_map(|e| view.event(&ev(e))).collect();
            assert_eq!(text(&rows), *want, "{events:?}");
        }
    }

    #[test]
    fn the_live_state_follows_the_turn() {
        let mut view = View::new(Theme::new(false, true), 80);
        view.event(&ev(r#"{"type":"owner.line","text":"go"}"#));
        assert_eq!(view.doing, Doing::Thinking);
        view.event(&ev(r#"{"type":"tool.call","id":"1","name":"bash","input":{}}"#));
        assert_eq!(view.doing, Doing::Running("bash".into()));
        assert_eq!(view.pending.len(), 1);
        view.event(&ev(r#"{"type":"reply","text":"Done?"}"#));
        view.event(&ev(r#"{"type":"turn.ended"}"#));
        assert_eq!(
            (view.doing.clone(), view.pending.len(), view.question),
            (Doing::Resting, 0, true)
        );
    }
}
