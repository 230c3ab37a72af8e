//! The evaluation file: one TOML file per evaluation in the individual's
//! `evals/`, named `<name>.toml`, read strictly. A field the format does
//! not know, a value of the wrong type, a stand-in step the stand-in would
//! refuse, a path that leaves the throwaway workspace: each is refused with
//! the file, the field and what to write (docs/evals.md shows the format).
//!
//! Invariants: an [`Evaluation`] that parses can be run as it is (its
//! script is one the stand-in loads, its paths are relative and stay
//! beneath the workspace); its `hash` is the SHA-256 of the file's bytes,
//! so two files with the same bytes are the same evaluation to the memo.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

pub use teneral_core::evals::EVALS_DIR;
/// The largest evaluation file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One evaluation, as parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The file's name without `.toml`.
    pub name: String,
    pub description: String,
    /// The SHA-256 of the file's bytes, in hex.
    pub hash: String,
    pub stimulus: Stimulus,
    /// Files placed in the throwaway workspace before the stimulus:
    /// `(relative path, text)`.
    pub files: Vec<(PathBuf, String)>,
    /// The stand-in model's answers as its script (JSON Lines); `None`: the
    /// stand-in's default answer to every request.
    pub script: Option<String>,
    /// The checks, in the owner's order; the first that fails is named.
    pub checks: Vec<Check>,
    /// `Some(tokens)` when the owner's provider answers, through the
    /// kernel's proxy, within that budget; `None`: the scripted stand-in.
    pub budget: Option<u64>,
}

/// Which model answers an evaluation, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Model {
    /// The stand-in, scripted with the steps.
    #[default]
    Standin,
    /// The owner's provider, through the kernel's proxy, within `tokens`.
    Provider,
}

/// What wakes the body in the evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Stimulus {
    /// An owner line.
    Line(String),
    /// An inbox envelope, whole.
    Envelope(Map<String, Value>),
}

/// One check of what the kernel observed of the run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// A reply holds this text.
    ReplyContains(String),
    /// A whole reply matches this pattern (`*` any run of characters, `?`
    /// any one).
    ReplyMatches(String),
    /// A tool of this name was called.
    ToolCalled(String),
    /// No tool of this name was called.
    ToolNotCalled(String),
    /// A call of this tool had an error for its result.
    ToolFailed(String),
    /// This tool was called and no call of it failed.
    ToolSucceeded(String),
    /// This file exists in the workspace after the run.
    FileExists(String),
    /// This file holds this text after the run.
    FileContains { path: String, text: String },
    /// The first reply came within this many seconds of the stimulus.
    ReplySecondsUnder(f64),
    /// The run's requests used fewer tokens than this, input and output.
    TokensUnder(u64),
    /// This owner command, run with `sh -c` in the cage on the throwaway
    /// individual after the body stopped, exits 0.
    Command(String),
}

/// The file as written; every field it may have.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    description: String,
    #[serde(default)]
    model: Model,
    tokens: Option<u64>,
    line: Option<String>,
    envelope: Option<toml::Table>,
    #[serde(default)]
    file: Vec<RawFile>,
    #[serde(default)]
    step: Vec<toml::Table>,
    #[serde(default)]
    check: Vec<Check>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
    text: String,
}

/// An evaluation file that cannot be used: the file, the field, what is
/// wrong and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the evaluation {file} cannot be used: {field}: {problem}; {fix} (docs/evals.md shows the format)")]
pub struct FormatError {
    /// The file, as the owner names it (`evals/<name>.toml`).
    pub file: String,
    /// The field, as a TOML path (`check[2].tool_called`), or `line N`
    /// where the TOML itself does not read.
    pub field: String,
    pub problem: String,
    pub fix: String,
}

/// Parses the evaluation `file` (`evals/<name>.toml`) from its `text`.
pub fn parse(file: &str, text: &str) -> Result<Evaluation, FormatError> {
    let refuse = |field: &str, problem: String, fix: &str| FormatError {
        file: file.to_owned(),
        field: field.to_owned(),
        problem,
        fix: fix.to_owned(),
    };
    let name = name_of(file).ok_or_else(|| {
        refuse(
            "file name",
            "the name is not letters, digits, '-' or '_' before .toml".into(),
            "rename the file, e.g. evals/writes-notes.toml",
        )
    })?;
    let table: toml::Table = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    // Each check is a table of one key; say which, by place, before serde
    // speaks of elements.
    if let Some(toml::Value::Array(checks)) = table.get("check") {
        for (i, check) in checks.iter().enumerate() {
            let keys: Vec<&str> = match check {
                toml::Value::Table(t) => t.keys().map(String::as_str).collect(),
                _ => vec![],
            };
            if keys.len() != 1 {
                return Err(refuse(
                    &format!("check[{i}]"),
                    format!("it has {} keys ({}), not one", keys.len(), keys.join(", ")),
                    "write one [[check]] for each check, each with one key",
                ));
            }
        }
    }
    let raw: Raw = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;

    let stimulus = match (raw.line, raw.envelope) {
        (Some(line), None) if !line.trim().is_empty() => Stimulus::Line(line),
        (Some(_), None) => {
            return Err(refuse("line", "it is empty".into(), "write what the owner says"))
        }
        (None, Some(envelope)) => {
            let Ok(Value::Object(envelope)) = serde_json::to_value(&envelope) else {
                return Err(refuse(
                    "envelope",
                    "it is not a table".into(),
                    "write envelope = { from = \"...\", text = \"...\" }",
                ));
            };
            match envelope.get("text") {
                Some(Value::String(_)) => Stimulus::Envelope(envelope),
                _ => {
                    return Err(refuse(
                        "envelope.text",
                        "it is missing or not a string".into(),
                        "write the envelope's text = \"...\"",
                    ))
                }
            }
        }
        (Some(_), Some(_)) => {
            return Err(refuse(
                "line",
                "an evaluation has one stimulus, and this has both line and envelope".into(),
                "keep one of them",
            ))
        }
        (None, None) => {
            return Err(refuse(
                "line",
                "the stimulus is missing".into(),
                "write line = \"what the owner says\", or envelope = { from = \"...\", text = \"...\" }",
            ))
        }
    };

    let mut files = Vec::with_capacity(raw.file.len());
    for (i, placed) in raw.file.into_iter().enumerate() {
        let path = workspace_path(&placed.path).ok_or_else(|| {
            refuse(
                &format!("file[{i}].path"),
                format!("{:?} is not a relative path inside the workspace", placed.path),
                "write a relative path without '..', e.g. notes/todo.txt",
            )
        })?;
        files.push((path, placed.text));
    }

    let script = match raw.step.is_empty() {
        true => None,
        false => {
            let lines: Vec<String> = raw
                .step
                .iter()
                .map(|step| serde_json::to_value(step).map(|v| v.to_string()))
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    refuse("step", e.to_string(), "write each step as the stand-in's script does")
                })?;
            let text = lines.join("\n") + "\n";
            if let Err(e) = crate::standin::script::Script::parse(&text) {
                return Err(refuse(
                    &format!("step[{}]", e.line.saturating_sub(1)),
                    e.reason,
                    "write reply, tool_calls = [{ name, arguments }], reasoning, error, delay_ms or expect (docs/standin.md)",
                ));
            }
            Some(text)
        }
    };

    let budget = match (raw.model, raw.tokens) {
        (Model::Standin, None) => None,
        (Model::Standin, Some(_)) => {
            return Err(refuse(
                "tokens",
                "a budget of tokens is for the owner's provider, and the stand-in answers here"
                    .into(),
                "write model = \"provider\" to spend it there, or remove tokens (a tokens_under check bounds the stand-in's)",
            ))
        }
        (Model::Provider, None | Some(0)) => {
            return Err(refuse(
                "tokens",
                "the owner's provider answers, and there is no budget of tokens".into(),
                "write tokens = N, the most the provider may report for the run, e.g. tokens = 20000",
            ))
        }
        (Model::Provider, Some(_)) if script.is_some() => {
            return Err(refuse(
                "step",
                "the owner's provider answers, so steps of the stand-in would never be read".into(),
                "remove the [[step]] tables, or write model = \"standin\"",
            ))
        }
        (Model::Provider, Some(tokens)) => Some(tokens),
    };

    if raw.check.is_empty() {
        return Err(refuse(
            "check",
            "there is no check, so the evaluation could never fail".into(),
            "add at least one [[check]], e.g. reply_contains = \"...\"",
        ));
    }
    for (i, check) in raw.check.iter().enumerate() {
        let field = |key: &str| format!("check[{i}].{key}");
        match check {
            Check::FileExists(path) | Check::FileContains { path, .. }
                if workspace_path(path).is_none() =>
            {
                let key = match check {
                    Check::FileExists(_) => "file_exists",
                    _ => "file_contains.path",
                };
                return Err(refuse(
                    &field(key),
                    format!("{path:?} is not a relative path inside the workspace"),
                    "write a relative path without '..', e.g. notes/todo.txt",
                ));
            }
            Check::ReplySecondsUnder(s) if !(s.is_finite() && *s > 0.0) => {
                return Err(refuse(
                    &field("reply_seconds_under"),
                    format!("{s} is not a positive number of seconds"),
                    "write e.g. reply_seconds_under = 5.0",
                ));
            }
            Check::Command(c) if c.trim().is_empty() => {
                return Err(refuse(
                    &field("command"),
                    "the command is empty".into(),
                    "write a shell command, e.g. command = \"test -s notes.txt\"",
                ));
            }
            Check::ToolCalled(n)
            | Check::ToolNotCalled(n)
            | Check::ToolFailed(n)
            | Check::ToolSucceeded(n)
                if n.trim().is_empty() =>
            {
                return Err(refuse(
                    &format!("check[{i}]"),
                    "the tool's name is empty".into(),
                    "write the tool's name, e.g. tool_called = \"write_file\"",
                ));
            }
            _ => {}
        }
    }

    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    let hash = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Evaluation {
        name,
        description: raw.description,
        hash,
        stimulus,
        files,
        script,
        checks: raw.check,
        budget,
    })
}

/// Every evaluation in `home/evals/`, by name; an empty list when there is
/// no such directory. The first file that cannot be used refuses them all.
pub fn load_all(home: &Path) -> Result<Vec<Evaluation>, LoadError> {
    let dir = home.join(EVALS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(LoadError::Read { path: dir, source }),
    };
    let mut names = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|source| LoadError::Read { path: dir.clone(), source })?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str().map(str::to_owned) else {
            return Err(LoadError::Name { path: entry.path() });
        };
        // Editors' leftovers and notes beside the evaluations are not read.
        if !file_name.ends_with(".toml") || file_name.starts_with('.') {
            continue;
        }
        names.insert(file_name, entry.path());
    }
    let mut evaluations = Vec::with_capacity(names.len());
    for (file_name, path) in names {
        let text = read_text(&path)?;
        let shown = format!("{EVALS_DIR}/{file_name}");
        evaluations.push(parse(&shown, &text)?);
    }
    Ok(evaluations)
}

/// Why the evaluations cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}; check that the owner can read it", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is larger than {MAX_FILE_BYTES} bytes; split it into smaller evaluations", path.display())]
    TooLarge { path: PathBuf },
    #[error("{} is not a name of UTF-8 text; rename it, e.g. evals/writes-notes.toml", path.display())]
    Name { path: PathBuf },
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// A regular file's text, no link followed, at most [`MAX_FILE_BYTES`].
fn read_text(path: &Path) -> Result<String, LoadError> {
    let read = |source| LoadError::Read { path: path.to_owned(), source };
    let meta = std::fs::symlink_metadata(path).map_err(read)?;
    if !meta.is_file() {
        let kind = std::io::Error::other("not a regular file (a link or a directory)");
        return Err(read(kind));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge { path: path.to_owned() });
    }
    std::fs::read_to_string(path).map_err(read)
}

/// The evaluation's name from `evals/<name>.toml`.
fn name_of(file: &str) -> Option<String> {
    let base = file.rsplit('/').next()?;
    let name = base.strip_suffix(".toml")?;
    let good = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    good.then(|| name.to_owned())
}

/// `path` as a relative path that stays beneath the workspace.
pub fn workspace_path(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let normal = p.components().all(|c| matches!(c, Component::Normal(_)));
    (normal && !path.is_empty() && !path.contains('\0')).then(|| p.to_owned())
}

/// A TOML error as the field it is in and what to write.
fn toml_error(file: &str, text: &str, error: &toml::de::Error) -> FormatError {
    let message = error.message().trim().to_owned();
    let start = error.span().map(|span| span.start.min(text.len()));
    let line = start.map(|at| text[..at].matches('\n').count() + 1);
    // The key written on that line, when there is one.
    let key = line
        .and_then(|l| text.lines().nth(l - 1))
        .and_then(|written| written.split_once('='))
        .map(|(key, _)| key.trim())
        .filter(|key| !key.is_empty() && !key.starts_with('['));
    let at = match (line, key) {
        (Some(l), Some(key)) => format!("line {l}, {key}"),
        (Some(l), None) => format!("line {l}"),
        (None, _) => "the file".into(),
    };
    let (field, fix) = if let Some(unknown) = between(&message, "unknown field `", "`") {
        (
            match at.ends_with(unknown) {
                true => at.clone(),
                false => format!("{at}, {unknown}"),
            },
            format!("remove {unknown} or write one of the fields the message names"),
        )
    } else if key == Some("model") {
        (at, "write model = \"standin\" or model = \"provider\"".into())
    } else if let Some(unknown) = between(&message, "unknown variant `", "`") {
        (
            format!("{at}, check {unknown}"),
            "write each [[check]] as one of reply_contains, reply_matches, tool_called, tool_not_called, \
             tool_failed, tool_succeeded, file_exists, file_contains, reply_seconds_under, tokens_under or command"
                .into(),
        )
    } else if let Some(missing) = between(&message, "missing field `", "`") {
        (format!("{at}, {missing}"), format!("write {missing} = ..."))
    } else {
        (
            at,
            "write the value the message asks for (a string in quotes, a number, a table), as TOML"
                .into(),
        )
    };
    FormatError { file: file.to_owned(), field, problem: message, fix }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "writes the note it is asked for"
line = "Write done to notes.txt"

[[file]]
path = "seed.txt"
text = "seed"

[[step]]
tool_calls = [{ name = "write_file", arguments = { path = "notes.txt", content = "done" } }]

[[step]]
reply = "Written."

[[check]]
tool_called = "write_file"

[[check]]
file_contains = { path = "notes.txt", text = "done" }

[[check]]
reply_matches = "Writ*."
"#;

    #[test]
    fn a_good_file() {
        let eval = parse("evals/notes.toml", GOOD).unwrap();
        assert_eq!(eval.name, "notes");
        assert_eq!(eval.stimulus, Stimulus::Line("Write done to notes.txt".into()));
        assert_eq!(eval.files, vec![(PathBuf::from("seed.txt"), "seed".into())]);
        let script = eval.script.unwrap();
        assert_eq!(script.lines().count(), 2, "{script}");
        assert!(script.contains(r#""name":"write_file""#), "{script}");
        assert_eq!(
            eval.checks,
            vec![
                Check::ToolCalled("write_file".into()),
                Check::FileContains { path: "notes.txt".into(), text: "done".into() },
                Check::ReplyMatches("Writ*.".into()),
            ]
        );
        assert_eq!(eval.hash.len(), 64);
        let again = parse("evals/other.toml", GOOD).unwrap();
        assert_eq!(again.hash, parse("evals/notes.toml", GOOD).unwrap().hash);
    }

    #[test]
    fn an_envelope_stimulus() {
        let text = "envelope = { from = \"ci\", text = \"build broke\" }\n[[check]]\nreply_contains = \"broke\"\n";
        let eval = parse("evals/ci.toml", text).unwrap();
        let Stimulus::Envelope(envelope) = eval.stimulus else { panic!("not an envelope") };
        assert_eq!(envelope["text"], "build broke");
        assert_eq!(eval.script, None);
        assert_eq!(eval.budget, None);
    }

    #[test]
    fn a_provider_evaluation() {
        let text = "model = \"provider\"\ntokens = 5000\nline = \"hi\"\n[[check]]\nreply_contains = \"hello\"\n";
        let eval = parse("evals/greets.toml", text).unwrap();
        assert_eq!(eval.budget, Some(5000));
        assert_eq!(eval.script, None);
        let standin = "model = \"standin\"\nline = \"hi\"\n[[check]]\nreply_contains = \"hello\"\n";
        assert_eq!(parse("evals/greets.toml", standin).unwrap().budget, None);
    }

    /// Each malformed file: the field named and a word of what to write.
    #[test]
    fn malformed_files_name_the_field() {
        let check = "\n[[check]]\nreply_contains = \"x\"\n";
        let cases: Vec<(&str, String, &str, &str)> = vec![
            (
                "an unknown top field",
                format!("line = \"hi\"\nlnie = 2{check}"),
                "lnie",
                "remove lnie",
            ),
            ("no stimulus", check.to_owned(), "line", "write line ="),
            (
                "two stimuli",
                format!("line = \"a\"\nenvelope = {{ text = \"b\" }}{check}"),
                "line",
                "keep one",
            ),
            ("an empty line", format!("line = \"  \"{check}"), "line", "what the owner says"),
            (
                "an envelope without text",
                format!("envelope = {{ from = \"a\" }}{check}"),
                "envelope.text",
                "text =",
            ),
            ("no check", "line = \"hi\"\n".to_owned(), "check", "add at least one"),
            (
                "an unknown check",
                "line = \"hi\"\n[[check]]\nreply_has = \"x\"\n".to_owned(),
                "reply_has",
                "reply_contains",
            ),
            (
                "a check of the wrong type",
                "line = \"hi\"\n[[check]]\ntokens_under = \"many\"\n".to_owned(),
                "line 3, tokens_under",
                "TOML",
            ),
            (
                "a file outside the workspace",
                format!("line = \"hi\"\n[[file]]\npath = \"../x\"\ntext = \"\"{check}"),
                "file[0].path",
                "without '..'",
            ),
            (
                "an absolute file",
                format!("line = \"hi\"\n[[file]]\npath = \"/etc/x\"\ntext = \"\"{check}"),
                "file[0].path",
                "relative",
            ),
            (
                "an unknown file field",
                format!("line = \"hi\"\n[[file]]\npath = \"x\"\ntext = \"\"\nmode = 1{check}"),
                "mode",
                "remove mode",
            ),
            (
                "a file check outside",
                "line = \"hi\"\n[[check]]\nfile_exists = \"../../etc/passwd\"\n".to_owned(),
                "check[0].file_exists",
                "relative",
            ),
            (
                "a contains check outside",
                "line = \"hi\"\n[[check]]\nfile_contains = { path = \"/x\", text = \"y\" }\n"
                    .to_owned(),
                "check[0].file_contains.path",
                "relative",
            ),
            (
                "a step the stand-in refuses",
                format!("line = \"hi\"\n[[step]]\nrpely = \"x\"{check}"),
                "step[0]",
                "write reply",
            ),
            (
                "a later bad step",
                format!("line = \"hi\"\n[[step]]\nreply = \"a\"\n[[step]]\ntool_calls = []{check}"),
                "step[1]",
                "tool_calls",
            ),
            (
                "no seconds",
                "line = \"hi\"\n[[check]]\nreply_seconds_under = 0.0\n".to_owned(),
                "check[0].reply_seconds_under",
                "e.g.",
            ),
            (
                "an empty tool",
                "line = \"hi\"\n[[check]]\ntool_called = \"\"\n".to_owned(),
                "check[0]",
                "tool's name",
            ),
            ("not TOML", "line = \n".to_owned(), "line 1", "TOML"),
            (
                "a provider without a budget",
                format!("model = \"provider\"\nline = \"hi\"{check}"),
                "tokens",
                "tokens = N",
            ),
            (
                "a provider with a zero budget",
                format!("model = \"provider\"\ntokens = 0\nline = \"hi\"{check}"),
                "tokens",
                "tokens = N",
            ),
            (
                "a budget for the stand-in",
                format!("tokens = 100\nline = \"hi\"{check}"),
                "tokens",
                "model = \"provider\"",
            ),
            (
                "steps for the provider",
                format!("model = \"provider\"\ntokens = 100\nline = \"hi\"\n[[step]]\nreply = \"a\"{check}"),
                "step",
                "remove the [[step]]",
            ),
            (
                "an unknown model",
                format!("model = \"gpt\"\nline = \"hi\"{check}"),
                "line 1, model",
                "model = \"provider\"",
            ),
            (
                "two keys in a check",
                "line = \"hi\"\n[[check]]\nreply_contains = \"x\"\nrpely = \"y\"\n".to_owned(),
                "check[0]",
                "one key",
            ),
        ];
        for (what, text, field, fix) in cases {
            let e = parse("evals/bad.toml", &text).expect_err(what);
            assert_eq!(e.file, "evals/bad.toml", "{what}");
            assert!(e.field.contains(field), "{what}: field {:?}, not {field:?} ({e})", e.field);
            assert!(e.fix.contains(fix) || e.to_string().contains(fix), "{what}: {e}");
            assert!(
                e.to_string().starts_with("the evaluation evals/bad.toml cannot be used"),
                "{e}"
            );
        }
    }

    #[test]
    fn file_names() {
        for (file, name) in [
            ("evals/a.toml", Some("a")),
            ("evals/writes-notes_2.toml", Some("writes-notes_2")),
            ("evals/.toml", None),
            ("evals/a b.toml", None),
            ("evals/a.json", None),
        ] {
            assert_eq!(name_of(file).as_deref(), name, "{file}");
        }
    }

    #[test]
    fn workspace_paths() {
        for (path, ok) in [
            ("a", true),
            ("a/b.txt", true),
            ("", false),
            ("/a", false),
            ("../a", false),
            ("a/../../b", false),
            ("./a", false),
        ] {
            assert_eq!(workspace_path(path).is_some(), ok, "{path}");
        }
    }
}
