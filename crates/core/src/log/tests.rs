//! The datagram, the cut and the escape, each against what journald reads.

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
    let mut id = Identity::default();
    id.individual = Some("/srv/agents/ada".into());
    id.switch("abc");
    let got = fields(&datagram(&line, &id));
    let want = [
        ("MESSAGE", "[reply] two\nlines"),
        ("PRIORITY", "5"),
        ("SYSLOG_IDENTIFIER", "teneral"),
        ("TENERAL_EVENT", "reply"),
        ("TENERAL_INDIVIDUAL", "/srv/agents/ada"),
        ("TENERAL_COMMIT", "abc"),
        ("TENERAL_GENERATION", "1"),
        ("USER_UNIT", "teneral-gen-abc1234.service"),
    ];
    let want: Vec<(String, String)> =
        want.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    assert_eq!(got, want);
}

#[test]
fn a_long_message_is_cut_on_a_character() {
    let text = "é".repeat(MAX_MESSAGE);
    let line =
        Line { priority: Priority::Info, event: "kernel", tag: "teneral", unit: None, text: &text };
    let got = fields(&datagram(&line, &Identity::default()));
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
    let data = datagram(&line, &Identity::default());
    let got = fields(&data);
    let message = &got[0].1;
    assert_eq!(message, "[reply\\nx] fine\\n[teneral] generation abc accepted\\x1b[2K\\x1b[1A\\r");
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

#[test]
fn the_output_follows_the_format_and_where_the_outputs_lead() {
    use Leads::{File, Journal as J, Stream, Terminal};
    use Output::{Json, Text};
    // (format, stdout, stderr, how lines are written)
    let table = [
        // Under systemd, either stream the journal's.
        (Format::Auto, J, J, Output::Journal),
        (Format::Auto, File, J, Output::Journal),
        (Format::Auto, J, Stream, Output::Journal),
        (Format::Text, J, J, Output::Journal),
        (Format::Json, J, J, Json),
        // A container: both streams to its log.
        (Format::Auto, Stream, Stream, Json),
        (Format::Auto, Stream, File, Text),
        (Format::Auto, Stream, Terminal, Text),
        // A terminal, a file, /dev/null.
        (Format::Auto, Terminal, Terminal, Text),
        (Format::Auto, File, File, Text),
        (Format::Auto, File, Stream, Text),
        (Format::Auto, Terminal, Stream, Text),
        (Format::Json, Terminal, Terminal, Json),
        (Format::Json, File, File, Json),
        (Format::Json, Stream, File, Json),
        (Format::Text, Stream, Stream, Text),
        (Format::Text, Terminal, Terminal, Text),
        (Format::Text, File, File, Text),
    ];
    for (format, stdout, stderr, want) in table {
        assert_eq!(
            output_for(format, stdout, stderr),
            want,
            "{format:?}, stdout into {stdout:?}, stderr into {stderr:?}"
        );
    }
}

/// A JSON line parses as one object holding what the journald entry of the
/// same line holds, under the short names.
#[test]
fn a_json_line_carries_the_journal_fields() {
    let line = Line {
        priority: Priority::Warning,
        event: "generation.exited",
        tag: "teneral-gen-abc1234",
        unit: Some("teneral-gen-abc1234.service"),
        text: "first\nsecond \"quoted\"",
    };
    let (text, tag) = clean(line.text, line.tag);
    let line = Line { text: &text, tag: &tag, ..line };
    let mut id = Identity::default();
    id.individual = Some("/individual".into());
    id.switch("0123456789abcdef");
    let written = json_line(&line, &id, "2026-12-07T08:00:00.000Z").to_string();
    assert!(!written.contains('\n'), "one line: {written}");
    let parsed: serde_json::Value = serde_json::from_str(&written).expect("a JSON object");
    let want = serde_json::json!({
        "ts": "2026-12-07T08:00:00.000Z",
        "tag": "teneral-gen-abc1234",
        "message": "[teneral-gen-abc1234] first\\nsecond \"quoted\"",
        "priority": 4,
        "event": "generation.exited",
        "individual": "/individual",
        "commit": "0123456789abcdef",
        "generation": 1,
        "unit": "teneral-gen-abc1234.service",
    });
    assert_eq!(parsed, want);
    let journal = fields(&datagram(&line, &id));
    for Field { journald, json, .. } in fields_of(&line, &id) {
        let in_journal = journal.iter().find(|(name, _)| name == journald).map(|(_, v)| v.clone());
        let in_json = match &parsed[json] {
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        assert_eq!(in_journal, in_json, "{journald} and {json} say the same");
    }
}

#[test]
fn a_piped_stderr_counts_as_where_the_launcher_passes_it_on() {
    use Leads::*;
    let rows: &[(Leads, Option<&str>, Leads)] = &[
        (Stream, None, Stream),
        (Stream, Some("file"), File),
        (Stream, Some("terminal"), Terminal),
        (Stream, Some("journal"), Journal),
        (Stream, Some("stream"), Stream),
        (Stream, Some("nonsense"), Stream),
        (Stream, Some(""), Stream),
        // Only a pipe stands in for the launcher's stderr.
        (File, Some("stream"), File),
        (Terminal, Some("file"), Terminal),
        (Journal, Some("file"), Journal),
    ];
    for &(own, passed, counts) in rows {
        assert_eq!(stderr_counts_as(own, passed), counts, "{own:?} with {passed:?}");
    }
    for leads in [Journal, Terminal, File, Stream] {
        assert_eq!(stderr_counts_as(Stream, Some(leads.word())), leads);
    }
}
