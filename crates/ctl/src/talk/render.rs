//! What the plain client prints for a journal event: pure functions from an
//! event to text.
//!
//! Invariants: everything taken from the journal passes through
//! [`sanitize`] before it is shown, so neither the agent, nor a tool, nor
//! another agent can move the cursor, recolour the terminal or hide text;
//! the first two columns are the client's own (`› `, `[kernel]`, ...) and
//! journal text always starts two columns in, so nothing journaled can pass
//! for one of the client's marks. Events the client does not show (notes,
//! usage, reasoning, types it does not know) give `None`.

use serde_json::Value;

use crate::journal::rules::Source;
use crate::journal::{Event, EventKind};

/// The mark of an owner line.
pub const OWNER_MARK: &str = "› ";

/// Removes control characters and terminal escape sequences, keeping `\n`
/// and `\t`. Also removes the characters that reorder text on screen.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                Some(' '..='/') => {
                    // Intermediate bytes, then one final byte.
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of a control sequence: parameters, then a final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if matches!(c, '@'..='~') {
            return;
        }
    }
}

/// Skips the rest of a string sequence, up to BEL, ST or `ESC \`.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

/// Cuts `text` to at most `width` characters, marking a cut with `…`.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// The first line of sanitized `text`, cut to `width`.
fn first_line(text: &str, width: usize) -> String {
    let clean = sanitize(text);
    let line = clean.lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim_end();
    cut(&line.replace('\t', " "), width)
}

/// Text of several lines, the first behind `mark`, the others two columns in.
fn block(mark: &str, text: &str) -> String {
    let clean = sanitize(text);
    let mut out = String::new();
    for (i, line) in clean.trim_end().lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if i == 0 {
            out.push_str(mark);
        } else if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
    }
    out
}

/// The short form of a commit, as the journal gives it (sanitized: the
/// journal is read as it is).
fn short(commit: &str) -> String {
    sanitize(crate::commit::short(commit))
}

/// The string fields of `event` named in `names` that are present, as
/// `name value` pairs (`status 1`, `reason ...`), on one line.
fn details(event: &Event, names: &[&str]) -> String {
    let mut parts = Vec::new();
    for name in names {
        match event.fields.get(*name) {
            Some(Value::String(s)) if !s.is_empty() => {
                let commit = matches!(*name, "candidate" | "from" | "to")
                    && s.len() >= 12
                    && s.chars().all(|c| c.is_ascii_hexdigit());
                parts.push(format!("{name} {}", if commit { short(s) } else { s.clone() }));
            }
            Some(v @ (Value::Number(_) | Value::Bool(_))) => parts.push(format!("{name} {v}")),
            _ => {}
        }
    }
    sanitize(&parts.join(", ")).replace(['\n', '\t'], " ")
}

/// A line of the client's own, with details in brackets when there are some.
fn with_details(head: String, details: String, width: usize) -> String {
    let line = if details.is_empty() { head } else { format!("{head} ({details})") };
    cut(&line, width)
}

/// What a tool call is given, in a few words: the first field of an object
/// as `name: value`, a string as it is, anything else as JSON.
pub(super) fn tool_input(input: Option<&Value>) -> String {
    match input {
        Some(Value::Object(map)) => match map.iter().next() {
            Some((key, Value::String(s))) => format!("{key}: {s}"),
            Some((key, v)) => format!("{key}: {v}"),
            None => String::new(),
        },
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// A stimulus, shown as what the body says woke the agent: one of the
/// fixed sources ([`Source`]), never in the owner's or the kernel's form; a
/// source outside them (a journal from before they were fixed) is shown
/// as the body's word, quoted.
fn stimulus(event: &Event) -> String {
    let source = event.text("source");
    match Source::parse(source) {
        Some(Source::Inbox) => match first_line(event.text("from"), 40) {
            from if from.is_empty() => "[inbox]".to_owned(),
            from => format!("[inbox from {from}]"),
        },
        Some(known) => format!("[{}]", known.as_str()),
        None => format!("[woken by what the body calls {:?}]", first_line(source, 40)),
    }
}

/// What to print for `event`, or `None` when the plain client shows nothing.
/// `width` bounds the one-line forms (tool calls, kernel events).
pub fn render(event: &Event, width: usize) -> Option<String> {
    let width = width.max(20);
    let text = event.text("text");
    // A type this client does not know shows nothing.
    let kind = event.known_kind()?;
    let line = match kind {
        EventKind::OwnerLine => block(OWNER_MARK, text),
        EventKind::Reply => {
            if text.trim().is_empty() {
                return None;
            }
            block("  ", text)
        }
        EventKind::ToolCall => {
            let name = cut(&first_line(event.text("name"), 40), 40);
            let head = format!("  [{name}] ");
            let rest = width.saturating_sub(head.chars().count());
            format!("{head}{}", first_line(&tool_input(event.fields.get("input")), rest))
        }
        EventKind::ToolResult => {
            if event.fields.get("error") != Some(&Value::Bool(true)) {
                return None;
            }
            cut(&format!("  [failed] {}", first_line(event.text("output"), width)), width)
        }
        EventKind::TurnInterrupted => "[interrupted by the owner]".to_owned(),
        EventKind::Stimulus => stimulus(event),
        EventKind::Birth => "[birth letter]".to_owned(),
        EventKind::KernelNotice => block("[kernel] ", text),
        EventKind::KernelStarted => {
            with_details("[kernel] started".into(), details(event, &[]), width)
        }
        EventKind::KernelStopped => {
            with_details("[kernel] stopped".into(), details(event, &["status", "reason"]), width)
        }
        EventKind::ModelRetry => {
            let retry = event.fields.get("retry").and_then(Value::as_u64).unwrap_or(0);
            let secs = event.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
            let wait = crate::when::duration((secs * 1000.0) as i64);
            let head = format!("[model failed; retry {retry} in {wait}] ");
            let rest = width.saturating_sub(head.chars().count());
            format!("{head}{}", first_line(event.text("message"), rest))
        }
        EventKind::GenerationExited if event.text("status") == "exit status 75" => {
            format!("[kernel] generation {} stepped aside for its mutation", short(&event.commit))
        }
        EventKind::GenerationStarted | EventKind::GenerationReady | EventKind::GenerationExited => {
            let what = kind.name().trim_start_matches("generation.");
            let what = if kind == EventKind::GenerationStarted { "starting" } else { what };
            let head = format!("[kernel] generation {} {what}", short(&event.commit));
            let d = details(event, &["status", "code", "signal", "reason"]);
            with_details(head, d, width)
        }
        EventKind::GenerationRolledback => {
            cut(&format!("[rolled back] {}", first_line(event.text("reason"), width)), width)
        }
        EventKind::MutationCheck => {
            let secs = event.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
            let took = crate::when::duration((secs * 1000.0) as i64);
            let why = first_line(event.text("why"), 60);
            let how = if why.is_empty() { took } else { why };
            let line = format!(
                "[gate] {}: {} ({how})",
                first_line(event.text("check"), 40),
                first_line(event.text("result"), 20)
            );
            cut(&line, width)
        }
        EventKind::MutationRequested
        | EventKind::MutationAccepted
        | EventKind::MutationRejected => {
            let what = sanitize(kind.name().trim_start_matches("mutation."));
            let d = details(event, &["candidate", "check", "from", "to", "reason"]);
            with_details(format!("[mutation] {what}"), d, width)
        }
        // Shown by the full client only.
        EventKind::Reasoning | EventKind::GenerationSentback => return None,
        // Shown by neither ([`EventKind::shown_in_talk`]).
        EventKind::TurnEnded
        | EventKind::Usage
        | EventKind::OfferRequested
        | EventKind::Note
        | EventKind::Log
        | EventKind::ReplyDelta
        | EventKind::EventsDropped
        | EventKind::OfferAnswered
        | EventKind::OfferPublished
        | EventKind::SpeciesAccepted
        | EventKind::EvalResult => return None,
    };
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_line;

    fn event(json: &str) -> Event {
        parse_line(json.as_bytes()).unwrap_or_else(|| panic!("not an event: {json}"))
    }

    #[test]
    fn sanitize_table() {
        let table = [
            ("plain text", "plain text"),
            ("keeps\nnew lines\tand tabs", "keeps\nnew lines\tand tabs"),
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("\u{1b}[2J\u{1b}[Hcleared", "cleared"),
            ("\u{1b}]0;title\u{7}after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}(Bcharset", "charset"),
            ("\u{1b}7saved\u{1b}8", "saved"),
            ("\u{9b}31mc1 csi", "c1 csi"),
            ("bell\u{7} back\u{8}space\r\n", "bell backspace\n"),
            ("nul\u{0}del\u{7f}", "nuldel"),
            ("bidi \u{202e}txt.exe\u{202c}", "bidi txt.exe"),
            ("torn escape \u{1b}[", "torn escape "),
            ("unicode › ● ✓ kept", "unicode › ● ✓ kept"),
        ];
        for (input, want) in table {
            assert_eq!(sanitize(input), want, "{input:?}");
        }
    }

    #[test]
    fn cut_table() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(cut("longer than ten", 10), "longer th…");
        assert_eq!(cut("ééééé", 3), "éé…");
    }

    #[test]
    fn render_table() {
        let table: &[(&str, Option<&str>)] = &[
            (
                r#"{"type":"owner.line","file":"f.txt","text":"hello\nthere"}"#,
                Some("› hello\n  there"),
            ),
            (
                r#"{"type":"reply","text":"Hi.\n\nSecond paragraph.\n"}"#,
                Some("  Hi.\n\n  Second paragraph."),
            ),
            (r#"{"type":"reply","text":"› fake owner line"}"#, Some("  › fake owner line")),
            (r#"{"type":"reply","text":"  "}"#, None),
            (
                r#"{"type":"tool.call","id":"1","name":"bash","input":{"command":"ls -la\nrm x"}}"#,
                Some("  [bash] command: ls -la"),
            ),
            (
                r#"{"type":"tool.call","id":"1","name":"edit","input":{"path":"a","n":1}}"#,
                Some("  [edit] path: a"),
            ),
            (r#"{"type":"tool.call","id":"1","name":"t","input":{"n":3}}"#, Some("  [t] n: 3")),
            (r#"{"type":"tool.call","id":"1","name":"t","input":"raw"}"#, Some("  [t] raw")),
            (r#"{"type":"tool.result","id":"1","output":"fine"}"#, None),
            (
                r#"{"type":"tool.result","id":"1","output":"\nno such file\nmore","error":true}"#,
                Some("  [failed] no such file"),
            ),
            (r#"{"type":"turn.ended"}"#, None),
            (r#"{"type":"turn.interrupted"}"#, Some("[interrupted by the owner]")),
            (r#"{"type":"stimulus","source":"clock","text":"tick"}"#, Some("[clock]")),
            (
                r#"{"type":"stimulus","source":"inbox","from":"ada","text":"hi"}"#,
                Some("[inbox from ada]"),
            ),
            (r#"{"type":"stimulus","source":"inbox","text":"hi"}"#, Some("[inbox]")),
            (r#"{"type":"stimulus","source":"timer","text":"hi"}"#, Some("[timer]")),
            (
                r#"{"type":"stimulus","source":"kernel","text":"obey"}"#,
                Some("[woken by what the body calls \"kernel\"]"),
            ),
            (
                r#"{"type":"stimulus","source":"owner","text":"obey"}"#,
                Some("[woken by what the body calls \"owner\"]"),
            ),
            (r#"{"type":"birth","text":"a letter"}"#, Some("[birth letter]")),
            (r#"{"type":"kernel.notice","text":"mind the gap"}"#, Some("[kernel] mind the gap")),
            (
                r#"{"type":"generation.ready","commit":"0123456789abcdef"}"#,
                Some("[kernel] generation 0123456 ready"),
            ),
            (
                r#"{"type":"generation.started","commit":"0123456789"}"#,
                Some("[kernel] generation 0123456 starting"),
            ),
            (
                r#"{"type":"generation.exited","commit":"0123456789","status":101}"#,
                Some("[kernel] generation 0123456 exited (status 101)"),
            ),
            (
                r#"{"type":"generation.exited","commit":"0123456789","status":"exit status 75"}"#,
                Some("[kernel] generation 0123456 stepped aside for its mutation"),
            ),
            (
                r#"{"type":"model.retry","message":"HTTP 503: busy\nmore","retry":2,"seconds":60}"#,
                Some("[model failed; retry 2 in 60s] HTTP 503: busy"),
            ),
            (
                r#"{"type":"mutation.check","check":"kernel tests","result":"passed","seconds":12.5}"#,
                Some("[gate] kernel tests: passed (12s)"),
            ),
            (
                r#"{"type":"mutation.check","check":"kernel-tests","result":"reused","seconds":0,"why":"the running generation's kernel"}"#,
                Some("[gate] kernel-tests: reused (the running generation's kernel)"),
            ),
            (
                r#"{"type":"generation.rolledback","reason":"silent for 10 min"}"#,
                Some("[rolled back] silent for 10 min"),
            ),
            (
                r#"{"type":"mutation.requested","candidate":"abc"}"#,
                Some("[mutation] requested (candidate abc)"),
            ),
            (
                r#"{"type":"mutation.accepted","from":"0123456789abcdef","to":"fedcba9876543210"}"#,
                Some("[mutation] accepted (from 0123456, to fedcba9)"),
            ),
            (
                r#"{"type":"molt.rejected","candidate":"abc","check":"paths"}"#,
                Some("[mutation] rejected (candidate abc, check paths)"),
            ),
            (r#"{"type":"note","kind":"k","data":1}"#, None),
            (r#"{"type":"usage","input_tokens":1,"output_tokens":2}"#, None),
            (r#"{"type":"reasoning","text":"hmm"}"#, None),
            (r#"{"type":"something.new","text":"x"}"#, None),
        ];
        for (json, want) in table {
            assert_eq!(render(&event(json), 100).as_deref(), *want, "{json}");
        }
    }

    #[test]
    fn journal_text_is_stripped_everywhere() {
        let evil = concat!(
            r#"{"type":"tool.call","id":"1","name":"b\u001b[2Jash","#,
            r#""input":{"command":"\u001b]0;x\u0007ls"}}"#
        );
        assert_eq!(render(&event(evil), 100).as_deref(), Some("  [bash] command: ls"));
        let reply = r#"{"type":"reply","text":"\u001b[1Aup\u001b[Kclear"}"#;
        assert_eq!(render(&event(reply), 100).as_deref(), Some("  upclear"));
    }

    #[test]
    fn one_line_forms_fit_the_width() {
        let long = format!(
            r#"{{"type":"tool.call","id":"1","name":"bash","input":{{"command":"{}"}}}}"#,
            "x".repeat(500)
        );
        let line = render(&event(&long), 60).unwrap_or_default();
        assert_eq!(line.chars().count(), 60);
        assert!(line.ends_with('…'));
    }
}
