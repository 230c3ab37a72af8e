//! The kernel's log: the one place that writes it.
//!
//! Under systemd (stderr is the journal's stream, as `JOURNAL_STREAM` says)
//! every line goes to journald over its native protocol, with fields a query
//! can select on: `PRIORITY`, `SYSLOG_IDENTIFIER=teneral`, `TENERAL_COMMIT`
//! (the generation the line is about), `TENERAL_EVENT` (what kind of line:
//! `kernel`, a journal event type such as `reply` or `tool.call`, or
//! `output` for what a child wrote), and for a child's output the unit it
//! ran in as `USER_UNIT`, so `journalctl --user-unit teneral-gen-<short>`
//! finds it. Anywhere else (a terminal, a test capturing stderr) each line is
//! `[teneral] ...` or `[tag] ...` on stderr, and so is a line journald would
//! not take.
//!
//! Every line is one line: text that a body, a model or a child wrote is
//! escaped ([`escape`]) before it is written, so it can neither start a line
//! of its own (a forged `[teneral] ...`) nor carry a terminal's escape
//! sequences, and journald always stores its `MESSAGE` as text.
//!
//! The datagrams are written here rather than through `tracing-journald`:
//! the format is a few lines, and the kernel has no use for the rest of a
//! tracing stack.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::sync::{Mutex, OnceLock};

/// journald's socket for the native protocol.
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";
/// Longest message sent as one line; longer ones are cut (with a mark).
const MAX_MESSAGE: usize = 32 * 1024;

/// syslog priorities, as journald takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Error = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
}

/// One line with what journald keeps besides its text.
struct Line<'a> {
    priority: Priority,
    /// What kind of line: `kernel`, a journal event type, `output`.
    event: &'a str,
    /// How a terminal shows it: `teneral`, `reply`, `teneral-gen-abc1234`.
    tag: &'a str,
    /// The unit a child's output came from.
    unit: Option<&'a str>,
    text: &'a str,
}

/// The generation the kernel is about, put on every line.
fn commit() -> &'static Mutex<Option<String>> {
    static COMMIT: OnceLock<Mutex<Option<String>>> = OnceLock::new();
    COMMIT.get_or_init(|| Mutex::new(None))
}

/// Sets the commit every following line carries as `TENERAL_COMMIT`.
pub fn set_commit(hex: &str) {
    *commit().lock().unwrap_or_else(|p| p.into_inner()) = Some(hex.to_owned());
}

/// The socket to journald, when stderr is the journal's stream.
fn journal() -> Option<&'static UnixDatagram> {
    static JOURNAL: OnceLock<Option<UnixDatagram>> = OnceLock::new();
    JOURNAL
        .get_or_init(|| {
            if !stderr_is_journal() {
                return None;
            }
            let socket = UnixDatagram::unbound().ok()?;
            socket.connect(JOURNAL_SOCKET).ok()?;
            Some(socket)
        })
        .as_ref()
}

/// Whether systemd connected stderr to the journal: `JOURNAL_STREAM` holds
/// the device and inode of that stream, and they are stderr's.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else { return false };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else { return false };
    dev.parse::<u64>().ok() == Some(stat.st_dev) && ino.parse::<u64>().ok() == Some(stat.st_ino)
}

/// `text` with every control character shown instead of acted on: `\n`,
/// `\r`, `\t`, `\x1b` (C0 controls, DEL and C1 controls alike), and the
/// characters that reorder text on screen or break lines as `\u{...}`.
/// Everything else, backslashes included, is kept as it is.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    let shown = |c: char| !(c.is_control() || is_invisible_format(c));
    if text.chars().all(shown) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !shown(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Characters that end a line or reorder text without being controls.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` cut to at most `max` bytes on a character, the cut said.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{} [cut: {} bytes in all]", &text[..end], text.len()))
}

/// Text and tag as they are written: cut, then escaped. Cut first, so a
/// huge text is never copied whole.
fn clean<'a>(text: &'a str, tag: &'a str) -> (String, std::borrow::Cow<'a, str>) {
    (escape(&cut(text, MAX_MESSAGE)).into_owned(), escape(tag))
}

fn write(line: Line<'_>) {
    let (text, tag) = clean(line.text, line.tag);
    let line = Line { text: &text, tag: &tag, ..line };
    if let Some(socket) = journal() {
        let datagram =
            datagram(&line, commit().lock().unwrap_or_else(|p| p.into_inner()).as_deref());
        if socket.send(&datagram).is_ok() {
            return;
        }
    }
    let _ = writeln!(std::io::stderr().lock(), "[{}] {}", line.tag, line.text);
}

/// The native protocol: `NAME=value\n`, or for a value with a newline,
/// `NAME\n`, its length as 64-bit little endian, the value and `\n`.
fn datagram(line: &Line<'_>, commit: Option<&str>) -> Vec<u8> {
    let text = cut(line.text, MAX_MESSAGE);
    let message =
        if line.tag == "teneral" { text.into_owned() } else { format!("[{}] {text}", line.tag) };
    let priority = (line.priority as u8).to_string();
    let mut fields: Vec<(&str, &str)> = vec![
        ("MESSAGE", &message),
        ("PRIORITY", &priority),
        ("SYSLOG_IDENTIFIER", "teneral"),
        ("TENERAL_EVENT", line.event),
    ];
    if let Some(commit) = commit {
        fields.push(("TENERAL_COMMIT", commit));
    }
    if let Some(unit) = line.unit {
        fields.push(("USER_UNIT", unit));
    }
    let mut out = Vec::with_capacity(message.len() + 256);
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        if value.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value.as_bytes());
        } else {
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// One line of the kernel's own.
pub fn info(msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line {
        priority: Priority::Info,
        event: "kernel",
        tag: "teneral",
        unit: None,
        text: &text,
    });
}

/// A line of the kernel's own at another priority (a failure, a refusal).
pub fn at(priority: Priority, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line { priority, event: "kernel", tag: "teneral", unit: None, text: &text });
}

/// A line about a journal event of type `kind` (the kernel's own events,
/// such as `generation.exited`, with a notice priority).
pub fn event(kind: &str, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line {
        priority: Priority::Notice,
        event: kind,
        tag: "teneral",
        unit: None,
        text: &text,
    });
}

/// A line about the agent's work (`[reply] ...`, `[tool] ...`), as
/// `journalctl` and a terminal running `teneral run` show it; `kind` is the
/// journal event it comes from.
pub fn agent(tag: &str, kind: &str, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line { priority: Priority::Info, event: kind, tag, unit: None, text: &text });
}

/// A line a child wrote (`[teneral-gen-abc1234] ...`), with the unit it ran in.
pub fn output(tag: &str, unit: Option<&str>, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line { priority: Priority::Info, event: "output", tag, unit, text: &text });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits a datagram back into its fields, as journald reads it.
    fn fields(mut data: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let nl = data.iter().position(|b| *b == b'\n').unwrap_or(data.len());
            let head = &data[..nl];
            if let Some(eq) = head.iter().position(|b| *b == b'=') {
                let name = String::from_utf8_lossy(&head[..eq]).into_owned();
                out.push((name, String::from_utf8_lossy(&head[eq + 1..]).into_owned()));
                data = &data[(nl + 1).min(data.len())..];
            } else {
                let name = String::from_utf8_lossy(head).into_owned();
                let mut len = [0u8; 8];
                len.copy_from_slice(&data[nl + 1..nl + 9]);
                let len = u64::from_le_bytes(len) as usize;
                let value = &data[nl + 9..nl + 9 + len];
                out.push((name, String::from_utf8_lossy(value).into_owned()));
                data = &data[nl + 9 + len + 1..];
            }
        }
        out
    }

    #[test]
    fn a_datagram_carries_the_fields_and_survives_newlines() {
        let line = Line {
            priority: Priority::Notice,
            event: "reply",
            tag: "reply",
            unit: Some("teneral-gen-abc1234.service"),
            text: "two\nlines",
        };
        let got = fields(&datagram(&line, Some("abc")));
        let want = [
            ("MESSAGE", "[reply] two\nlines"),
            ("PRIORITY", "5"),
            ("SYSLOG_IDENTIFIER", "teneral"),
            ("TENERAL_EVENT", "reply"),
            ("TENERAL_COMMIT", "abc"),
            ("USER_UNIT", "teneral-gen-abc1234.service"),
        ];
        let want: Vec<(String, String)> =
            want.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_long_message_is_cut_on_a_character() {
        let text = "é".repeat(MAX_MESSAGE);
        let line = Line {
            priority: Priority::Info,
            event: "kernel",
            tag: "teneral",
            unit: None,
            text: &text,
        };
        let got = fields(&datagram(&line, None));
        let message = &got[0].1;
        assert!(message.len() < MAX_MESSAGE + 100, "{}", message.len());
        assert!(message.ends_with(&format!("[cut: {} bytes in all]", text.len())), "cut is said");
    }

    #[test]
    fn escape_table() {
        let table = [
            ("plain text, unicode › ● ✓", "plain text, unicode › ● ✓"),
            ("two\nlines", "two\\nlines"),
            ("cr\rlf\r\n", "cr\\rlf\\r\\n"),
            ("tab\there", "tab\\there"),
            ("\u{1b}[31mred\u{1b}[0m", "\\x1b[31mred\\x1b[0m"),
            ("\u{1b}]0;title\u{7}", "\\x1b]0;title\\x07"),
            ("nul\u{0}del\u{7f}", "nul\\x00del\\x7f"),
            ("c1 csi \u{9b}2J next line \u{85}", "c1 csi \\x9b2J next line \\x85"),
            ("ls \u{2028} ps \u{2029}", "ls \\u{2028} ps \\u{2029}"),
            ("bidi \u{202e}exe.txt\u{2066}", "bidi \\u{202e}exe.txt\\u{2066}"),
            ("a backslash \\n stays", "a backslash \\n stays"),
        ];
        for (input, want) in table {
            assert_eq!(escape(input), want, "{input:?}");
        }
    }

    #[test]
    fn a_body_text_stays_one_printable_line() {
        let forged = "fine\n[teneral] generation abc accepted\u{1b}[2K\u{1b}[1A\r";
        let (text, tag) = clean(forged, "reply\nx");
        let line =
            Line { priority: Priority::Info, event: "reply", tag: &tag, unit: None, text: &text };
        let data = datagram(&line, None);
        let got = fields(&data);
        let message = &got[0].1;
        assert_eq!(
            message,
            "[reply\\nx] fine\\n[teneral] generation abc accepted\\x1b[2K\\x1b[1A\\r"
        );
        assert!(
            data.starts_with(b"MESSAGE=["),
            "MESSAGE is sent as text, never in the binary form journald shows as a blob"
        );
        let printable = |c: char| !c.is_control();
        assert!(message.chars().all(printable), "{message:?}");
    }

    #[test]
    fn a_huge_text_is_cut_before_it_is_escaped() {
        let text = "\n".repeat(4 * MAX_MESSAGE);
        let (clean_text, _) = clean(&text, "teneral");
        assert!(clean_text.len() <= 2 * MAX_MESSAGE + 64, "{}", clean_text.len());
        assert!(clean_text.ends_with(&format!("[cut: {} bytes in all]", text.len())));
    }
}
