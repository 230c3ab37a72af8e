//! The checks of an evaluation, as pure functions over what the kernel
//! observed of one run: the actions of the throwaway individual's journal,
//! the tokens its `usage` events report, the seconds to the first reply and
//! the files the checks name, as they were left in the throwaway workspace.
//! Nothing here is told by a body: the journal lines are the ones the
//! kernel checked and stamped, and the files are read by the kernel after
//! the body stopped.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::format::{workspace_path, Check};
use crate::replay::table::{Action, Ending, Run};
use teneral_core::journal::{Event, EventKind};

/// What the kernel observed of one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    pub actions: Vec<Action>,
    pub reply_seconds: Option<f64>,
    /// Input and output tokens of every request, as reported.
    pub tokens: u64,
    /// Each file a check names: its bytes, `None` when absent.
    pub files: BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// The whole run, in seconds.
    pub seconds: f64,
    /// Each command a check names: `Ok` when it exited 0, else how it ended.
    pub commands: BTreeMap<String, Result<(), String>>,
}

/// One evaluation's result on one generation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// The first check that did not, by its place, with what was seen.
    Failed { check: usize, said: String },
    /// The run decides nothing (it could not be made, or it ran out of
    /// time): why.
    Undecided(String),
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::Undecided(_) => "undecided",
        }
    }
}

/// The total of the `usage` events after `after`.
pub fn tokens_of(events: &[Event], after: u64) -> u64 {
    events
        .iter()
        .filter(|e| e.seq > after && e.known_kind() == Some(EventKind::Usage))
        .map(|e| {
            let n = |k: &str| e.fields.get(k).and_then(Value::as_u64).unwrap_or(0);
            n("input_tokens").saturating_add(n("output_tokens"))
        })
        .fold(0u64, u64::saturating_add)
}

/// The files `checks` look at, relative to the workspace.
pub fn files_named(checks: &[Check]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = checks
        .iter()
        .filter_map(|c| match c {
            Check::FileExists(path) | Check::FileContains { path, .. } => workspace_path(path),
            _ => None,
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The result of `checks` on a run that `ended` so, with `observed`.
pub fn judge(checks: &[Check], ending: &Ending, observed: &Observed) -> Outcome {
    match ending {
        Ending::NotRun(why) => return Outcome::Undecided(format!("not run: {why}")),
        Ending::TimeUp(secs) => {
            return Outcome::Undecided(format!("the run did not end within {secs} s"))
        }
        Ending::TurnEnded | Ending::Interrupted | Ending::BodyEnded(_) => {}
    }
    for (i, one) in checks.iter().enumerate() {
        if let Err(said) = check(one, observed) {
            return Outcome::Failed { check: i, said };
        }
    }
    if let Ending::BodyEnded(exit) = ending {
        return Outcome::Failed {
            check: checks.len(),
            said: format!("the body ended ({exit}) before its turn did"),
        };
    }
    Outcome::Passed
}

/// The words of a check, as the owner wrote it.
pub fn describe(check: &Check) -> String {
    match check {
        Check::ReplyContains(t) => format!("reply_contains {t:?}"),
        Check::ReplyMatches(p) => format!("reply_matches {p:?}"),
        Check::ToolCalled(n) => format!("tool_called {n:?}"),
        Check::ToolNotCalled(n) => format!("tool_not_called {n:?}"),
        Check::ToolFailed(n) => format!("tool_failed {n:?}"),
        Check::ToolSucceeded(n) => format!("tool_succeeded {n:?}"),
        Check::FileExists(p) => format!("file_exists {p:?}"),
        Check::FileContains { path, text } => format!("file_contains {path:?} {text:?}"),
        Check::ReplySecondsUnder(s) => format!("reply_seconds_under {s}"),
        Check::TokensUnder(n) => format!("tokens_under {n}"),
        Check::Command(c) => format!("command {c:?}"),
    }
}

/// One check: `Err` says what was seen instead.
pub fn check(one: &Check, seen: &Observed) -> Result<(), String> {
    let replies = || {
        seen.actions.iter().filter_map(|a| match a {
            Action::Reply(text) => Some(text.as_str()),
            Action::Tool { .. } => None,
        })
    };
    let calls = |name: &str| -> Vec<Option<bool>> {
        seen.actions
            .iter()
            .filter_map(|a| match a {
                Action::Tool { name: n, failed } if n == name => Some(*failed),
                _ => None,
            })
            .collect()
    };
    let no_reply = || match replies().next_back() {
        Some(last) => format!("the last reply was {:?}", cut(last)),
        None => "there was no reply".to_owned(),
    };
    let file =
        |path: &str| workspace_path(path).and_then(|p| seen.files.get(&p).cloned().flatten());
    match one {
        Check::ReplyContains(text) => {
            replies().any(|r| r.contains(text.as_str())).then_some(()).ok_or_else(no_reply)
        }
        Check::ReplyMatches(pattern) => {
            replies().any(|r| glob(pattern, r)).then_some(()).ok_or_else(no_reply)
        }
        Check::ToolCalled(name) => match calls(name).is_empty() {
            false => Ok(()),
            true => Err(format!("{name} was not called")),
        },
        Check::ToolNotCalled(name) => match calls(name).len() {
            0 => Ok(()),
            n => Err(format!("{name} was called {n} times")),
        },
        Check::ToolFailed(name) => match calls(name) {
            c if c.is_empty() => Err(format!("{name} was not called")),
            c if c.contains(&Some(true)) => Ok(()),
            _ => Err(format!("no call of {name} failed")),
        },
        Check::ToolSucceeded(name) => match calls(name) {
            c if c.is_empty() => Err(format!("{name} was not called")),
            c if c.contains(&Some(true)) => Err(format!("a call of {name} failed")),
            c if c.contains(&None) => Err(format!("a call of {name} had no result")),
            _ => Ok(()),
        },
        Check::FileExists(path) => match file(path) {
            Some(_) => Ok(()),
            None => Err(format!("{path} is not in the workspace")),
        },
        Check::FileContains { path, text } => match file(path) {
            None => Err(format!("{path} is not in the workspace")),
            Some(bytes) if String::from_utf8_lossy(&bytes).contains(text.as_str()) => Ok(()),
            Some(bytes) => Err(format!("{path} holds {:?}", cut(&String::from_utf8_lossy(&bytes)))),
        },
        Check::ReplySecondsUnder(bound) => match seen.reply_seconds {
            Some(s) if s < *bound => Ok(()),
            Some(s) => Err(format!("the first reply came after {s:.2} s")),
            None => Err("there was no reply".into()),
        },
        Check::TokensUnder(bound) => match seen.tokens < *bound {
            true => Ok(()),
            false => Err(format!("the run used {} tokens", seen.tokens)),
        },
        Check::Command(command) => match seen.commands.get(command) {
            Some(Ok(())) => Ok(()),
            Some(Err(how)) => Err(format!("it {how}")),
            None => Err("it was not run".into()),
        },
    }
}

/// What was seen of a run, from replay's record of it and what it left.
pub fn observed(run: &Run, tokens: u64, left: crate::replay::run::Left) -> Observed {
    Observed {
        actions: run.actions.clone(),
        reply_seconds: run.reply_seconds,
        tokens,
        files: left.files,
        seconds: run.run_seconds,
        commands: left.commands,
    }
}

/// The commands `checks` run, in order, once each.
pub fn commands_named(checks: &[Check]) -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    for check in checks {
        if let Check::Command(c) = check {
            if !commands.contains(c) {
                commands.push(c.clone());
            }
        }
    }
    commands
}

/// Whether `text` matches `pattern` whole: `*` any run of characters, `?`
/// any one, every other character itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A text cut to one short line.
fn cut(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, failed: Option<bool>) -> Action {
        Action::Tool { name: name.into(), failed }
    }

    fn seen() -> Observed {
        let mut files = BTreeMap::new();
        files.insert(PathBuf::from("notes.txt"), Some(b"all done\n".to_vec()));
        files.insert(PathBuf::from("gone.txt"), None);
        let mut commands = BTreeMap::new();
        commands.insert("true".to_owned(), Ok(()));
        commands.insert("false".to_owned(), Err("ended with exit status 1".to_owned()));
        Observed {
            commands,
            actions: vec![
                tool("read_file", Some(true)),
                tool("write_file", Some(false)),
                tool("shell", None),
                Action::Reply("Written the note.".into()),
            ],
            reply_seconds: Some(1.5),
            tokens: 300,
            files,
            seconds: 2.0,
        }
    }

    #[test]
    fn each_check() {
        use Check::*;
        let s = |x: &str| x.to_owned();
        let cases: Vec<(Check, Result<(), &str>)> = vec![
            (ReplyContains(s("the note")), Ok(())),
            (ReplyContains(s("nope")), Err("the last reply was \"Written the note.\"")),
            (ReplyMatches(s("Written*.")), Ok(())),
            (ReplyMatches(s("Written")), Err("the last reply was \"Written the note.\"")),
            (ToolCalled(s("write_file")), Ok(())),
            (ToolCalled(s("fetch")), Err("fetch was not called")),
            (ToolNotCalled(s("fetch")), Ok(())),
            (ToolNotCalled(s("write_file")), Err("write_file was called 1 times")),
            (ToolFailed(s("read_file")), Ok(())),
            (ToolFailed(s("write_file")), Err("no call of write_file failed")),
            (ToolFailed(s("fetch")), Err("fetch was not called")),
            (ToolSucceeded(s("write_file")), Ok(())),
            (ToolSucceeded(s("read_file")), Err("a call of read_file failed")),
            (ToolSucceeded(s("shell")), Err("a call of shell had no result")),
            (FileExists(s("notes.txt")), Ok(())),
            (FileExists(s("gone.txt")), Err("gone.txt is not in the workspace")),
            (FileExists(s("never.txt")), Err("never.txt is not in the workspace")),
            (FileContains { path: s("notes.txt"), text: s("done") }, Ok(())),
            (
                FileContains { path: s("notes.txt"), text: s("undone") },
                Err("notes.txt holds \"all done \""),
            ),
            (ReplySecondsUnder(2.0), Ok(())),
            (ReplySecondsUnder(1.0), Err("the first reply came after 1.50 s")),
            (TokensUnder(301), Ok(())),
            (TokensUnder(300), Err("the run used 300 tokens")),
            (Command(s("true")), Ok(())),
            (Command(s("false")), Err("it ended with exit status 1")),
            (Command(s("ls")), Err("it was not run")),
        ];
        for (one, want) in cases {
            assert_eq!(check(&one, &seen()), want.map_err(str::to_owned), "{}", describe(&one));
        }
        let silent = Observed::default();
        assert_eq!(check(&ReplyContains(s("x")), &silent), Err(s("there was no reply")));
        assert_eq!(check(&ReplySecondsUnder(1.0), &silent), Err(s("there was no reply")));
    }

    #[test]
    fn the_first_failed_check_is_named_and_endings_decide() {
        use Check::*;
        let checks = vec![ToolCalled("write_file".into()), TokensUnder(10), ToolCalled("x".into())];
        let cases: Vec<(Ending, Outcome)> = vec![
            (
                Ending::TurnEnded,
                Outcome::Failed { check: 1, said: "the run used 300 tokens".into() },
            ),
            (Ending::TimeUp(30), Outcome::Undecided("the run did not end within 30 s".into())),
            (Ending::NotRun("no cage".into()), Outcome::Undecided("not run: no cage".into())),
        ];
        for (ending, want) in cases {
            assert_eq!(judge(&checks, &ending, &seen()), want, "{ending:?}");
        }
        let holds = vec![ToolCalled("write_file".into())];
        assert_eq!(judge(&holds, &Ending::TurnEnded, &seen()), Outcome::Passed);
        assert_eq!(judge(&holds, &Ending::Interrupted, &seen()), Outcome::Passed);
        assert_eq!(
            judge(&holds, &Ending::BodyEnded("exit status 3".into()), &seen()),
            Outcome::Failed {
                check: 1,
                said: "the body ended (exit status 3) before its turn did".into()
            }
        );
    }

    #[test]
    fn globs() {
        for (pattern, text, want) in [
            ("a*c", "abbc", true),
            ("a*c", "abbd", false),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*done*", "all done now", true),
            ("*.", "Written.", true),
            ("é*", "été", true),
        ] {
            assert_eq!(glob(pattern, text), want, "{pattern} {text}");
        }
    }

    #[test]
    fn tokens_after_the_stimulus() {
        let usage = |seq: u64, i: u64, o: u64| {
            let line = serde_json::json!({"type": "usage", "seq": seq, "ts": "t", "commit": "c",
                "input_tokens": i, "output_tokens": o});
            teneral_core::journal::reader::parse_line(line.to_string().as_bytes()).unwrap()
        };
        let events = vec![usage(1, 1000, 1000), usage(3, 10, 5), usage(4, 20, 1)];
        assert_eq!(tokens_of(&events, 2), 36);
    }
}
