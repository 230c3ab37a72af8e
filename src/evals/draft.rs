//! Evaluations drafted from past exchanges (`teneral evals --from-journal
//! N`): the last N owner lines and inbox envelopes of the journal, read as
//! a replay reads them ([`crate::replay::stimuli`]), each written as an
//! evaluation file with the model's answers of the time as its stand-in
//! steps, and checks the owner then edits: each tool the model called was
//! called, and the last reply holds the first words it held then.
//!
//! Invariants: a draft is a file [`super::format::parse`] takes; an
//! existing file is never overwritten. Strings are written as JSON string
//! literals, which are TOML basic strings too; tool arguments are written
//! as the JSON text the stand-in sends as it is.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::replay::stimuli::{Kind, Stimulus};

/// How many characters of the last reply the drafted check asks for.
pub const REPLY_WORDS: usize = 40;

/// The file name of the draft of the stimulus at `seq`.
pub fn file_name(seq: u64) -> String {
    format!("from-journal-{seq}.toml")
}

/// The draft of one stimulus, as TOML text.
pub fn draft(stimulus: &Stimulus) -> String {
    let s = |text: &str| Value::String(text.to_owned()).to_string();
    let mut out = format!(
        "description = {}\n",
        s(&format!("drafted from the journal's event {}; edit the checks", stimulus.seq))
    );
    match &stimulus.kind {
        Kind::Line(text) => out += &format!("line = {}\n", s(text)),
        Kind::Envelope(envelope) => {
            let fields: Vec<String> = envelope
                .iter()
                .filter_map(|(k, v)| Some(format!("{} = {}", s(k), s(v.as_str()?))))
                .collect();
            out += &format!("envelope = {{ {} }}\n", fields.join(", "));
        }
    }
    let mut called: Vec<&str> = Vec::new();
    for step in &stimulus.script {
        out += "\n[[step]]\n";
        if let Some(reply) = &step.reply {
            out += &format!("reply = {}\n", s(reply));
        }
        if !step.calls.is_empty() {
            let calls: Vec<String> = step
                .calls
                .iter()
                .map(|(name, input)| {
                    format!("{{ name = {}, arguments = {} }}", s(name), s(&input.to_string()))
                })
                .collect();
            out += &format!("tool_calls = [{}]\n", calls.join(", "));
            called.extend(step.calls.iter().map(|(name, _)| name.as_str()));
        }
    }
    called.sort_unstable();
    called.dedup();
    for name in called {
        out += &format!("\n[[check]]\ntool_called = {}\n", s(name));
    }
    let last_reply = stimulus.script.iter().rev().find_map(|step| step.reply.as_deref());
    let words: String = last_reply
        .and_then(|r| r.lines().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().chars().take(REPLY_WORDS).collect())
        .unwrap_or_default();
    if !words.trim().is_empty() {
        out += &format!("\n[[check]]\nreply_contains = {}\n", s(&words));
    } else {
        // Every evaluation needs a check; the owner makes it say more.
        out += "\n[[check]]\nreply_matches = \"*\"\n";
    }
    out
}

/// Writes the drafts of `stimuli` into `dir` (made if missing); returns
/// the files written, leaving every existing one as it is.
pub fn write(dir: &Path, stimuli: &[Stimulus]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for stimulus in stimuli {
        let path = dir.join(file_name(stimulus.seq));
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
        match file {
            Ok(mut file) => {
                std::io::Write::write_all(&mut file, draft(stimulus).as_bytes())?;
                written.push(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evals::format::{parse, Check, Stimulus as Said};
    use crate::replay::stimuli::Step;
    use serde_json::json;

    /// Each draft parses, says what was said, and checks what was done.
    #[test]
    fn drafts_parse_back() {
        let calls = vec![("write_file".to_owned(), json!({"path": "a \"b\"", "content": "x\ny"}))];
        let cases: Vec<(Stimulus, Vec<Check>)> = vec![
            (
                Stimulus {
                    seq: 7,
                    kind: Kind::Line("write \"a\"\nplease".into()),
                    script: vec![
                        Step { reply: None, calls: calls.clone() },
                        Step { reply: Some("Done: wrote it.\nMore.".into()), calls: vec![] },
                    ],
                },
                vec![
                    Check::ToolCalled("write_file".into()),
                    Check::ReplyContains("Done: wrote it.".into()),
                ],
            ),
            (
                Stimulus {
                    seq: 8,
                    kind: Kind::Envelope(
                        json!({"from": "ci", "text": "build ✗ broke"})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
                    script: vec![],
                },
                vec![Check::ReplyMatches("*".into())],
            ),
        ];
        for (stimulus, checks) in cases {
            let text = draft(&stimulus);
            let eval = parse(&format!("evals/{}", file_name(stimulus.seq)), &text)
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(eval.checks, checks, "{text}");
            match (&eval.stimulus, &stimulus.kind) {
                (Said::Line(a), Kind::Line(b)) => assert_eq!(a, b),
                (Said::Envelope(a), Kind::Envelope(b)) => assert_eq!(a, b),
                other => panic!("{other:?}"),
            }
            assert_eq!(eval.script.is_some(), !stimulus.script.is_empty(), "{text}");
            if let Some(script) = eval.script {
                assert!(script.contains("write_file") && script.contains("content"), "{script}");
            }
        }
    }

    #[test]
    fn an_existing_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let stimulus = Stimulus { seq: 3, kind: Kind::Line("hi".into()), script: vec![] };
        std::fs::write(dir.path().join(file_name(3)), "mine").unwrap();
        let stimuli = [stimulus.clone(), Stimulus { seq: 4, ..stimulus }];
        let written = write(dir.path(), &stimuli).unwrap();
        assert_eq!(written, vec![dir.path().join(file_name(4))]);
        assert_eq!(std::fs::read_to_string(dir.path().join(file_name(3))).unwrap(), "mine");
    }
}
