//! What the stand-in does, unscripted, with a few owner lines: it acts as an
//! agent would, so that an owner with no account sees the body change itself.
//!
//! | owner line | what the stand-in asks of the body |
//! |---|---|
//! | `show me your code` | `list_files` and `read_file` of the running body (`.teneral/live/body`), then names its files and what the crate says it is |
//! | `change yourself` | `read_file` of its workspace's `body/src/prompt.rs`, `edit_file` of one counted line in the system prompt (added the first time, counted up after), `mutate`; the new generation then says what passed |
//! | `break yourself` | the same with an edit that cannot compile (`soul_written` made to return `u8`); when the gate refuses it, the same generation undoes the commit in its workspace (`bash`, `git reset`) and names the check |
//! | `go back` | words only: how `teneralctl back` works |
//!
//! The birth letter is answered with those four lines. Anything else gets
//! the default reply ([`super::turn::default_reply`]).
//!
//! A model server keeps nothing between requests, and neither does this:
//! every choice is a pure function of the conversation the request carries
//! ([`transcript`] reads it from either protocol): the owner's newest line,
//! the calls made since and what they returned. Nothing here runs a tool,
//! touches a file or judges a change; the body's tools and the kernel's gate
//! do, as they would for a real model.
//!
//! The seed body sends the whole conversation on both protocols (its
//! Responses requests say `store: false`); a Responses request that goes on
//! from a stored response (`previous_response_id`) is read from its own
//! `input` only.
use serde_json::{json, Value};

use super::script::PlannedCall;

/// The owner lines the stand-in acts on, as the owner types them.
pub const LINES: [&str; 4] = ["show me your code", "change yourself", "break yourself", "go back"];

/// The running body, read by `show me your code`.
const LIVE_BODY: &str = ".teneral/live/body";
/// The file of the workspace that `change yourself` and `break yourself` edit.
const PROMPT: &str = ".teneral/candidate/body/src/prompt.rs";
/// The line `change yourself` keeps in the system prompt, before its count.
pub const COUNTED: &str = "Times you have changed yourself on your owner's word: ";
/// Where the counted line goes the first time: the end of the prompt's text.
const PROMPT_END: &str = "Credentials are not yours to look for or use.\";";
/// The signature `break yourself` changes into one its callers cannot use.
const SOUND: &str = "pub fn soul_written(home: &Path) -> bool {";
const BROKEN: &str = "pub fn soul_written(home: &Path) -> u8 {";

/// One piece of the conversation a request carries, in neither protocol's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A user message: the owner's line, the birth letter, a kernel's word.
    User(String),
    /// The model's words.
    Assistant(String),
    /// A tool call of the model; `arguments` is JSON as text.
    Call { name: String, arguments: String },
    /// What a call returned.
    Output(String),
}

/// The stand-in's turn: words, tool calls, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Act {
    pub text: Option<String>,
    pub calls: Vec<PlannedCall>,
}

impl Act {
    fn say(text: impl Into<String>) -> Act {
        Act { text: Some(text.into()), calls: Vec::new() }
    }

    fn call(name: &str, arguments: Value) -> Act {
        Act::calls(&[(name, arguments)])
    }

    fn calls(calls: &[(&str, Value)]) -> Act {
        let calls = calls
            .iter()
            .map(|(name, arguments)| PlannedCall {
                name: (*name).to_owned(),
                arguments: arguments.to_string(),
            })
            .collect();
        Act { text: None, calls }
    }
}

/// The conversation of a chat completions request (`messages`) or a
/// Responses request (`input`), whichever `body` is. Run on a request that
/// passed its protocol's checks; what it cannot read it passes over.
pub fn transcript(body: &Value) -> Vec<Entry> {
    let mut entries = Vec::new();
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        for message in messages {
            let content = text_of(&message["content"]);
            match message["role"].as_str() {
                Some("user") => entries.push(Entry::User(content)),
                Some("assistant") => {
                    if !content.is_empty() {
                        entries.push(Entry::Assistant(content));
                    }
                    for call in message["tool_calls"].as_array().into_iter().flatten() {
                        entries.push(Entry::Call {
                            name: call["function"]["name"].as_str().unwrap_or("").to_owned(),
                            arguments: call["function"]["arguments"]
                                .as_str()
                                .unwrap_or("{}")
                                .to_owned(),
                        });
                    }
                }
                Some("tool") => entries.push(Entry::Output(content)),
                _ => {}
            }
        }
        return entries;
    }
    match body.get("input") {
        Some(Value::String(text)) => entries.push(Entry::User(text.clone())),
        Some(Value::Array(items)) => {
            for item in items {
                let kind = item["type"].as_str().unwrap_or("message");
                match (kind, item["role"].as_str()) {
                    ("message", Some("user")) => {
                        entries.push(Entry::User(text_of(&item["content"])))
                    }
                    ("message", Some("assistant")) => {
                        entries.push(Entry::Assistant(text_of(&item["content"])))
                    }
                    ("function_call", _) => entries.push(Entry::Call {
                        name: item["name"].as_str().unwrap_or("").to_owned(),
                        arguments: item["arguments"].as_str().unwrap_or("{}").to_owned(),
                    }),
                    ("function_call_output", _) => {
                        entries.push(Entry::Output(text_of(&item["output"])))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    entries
}

/// The text of a content field: a string, or the `text` of its parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

/// An owner line the stand-in acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    ShowCode,
    Change,
    Break,
    GoBack,
}

impl Line {
    /// The line an owner typed, if it is one of [`LINES`]: case, spaces
    /// around it, quotes and a closing full stop or mark do not matter.
    pub fn of(text: &str) -> Option<Line> {
        let trimmed = text
            .trim()
            .trim_matches(|c: char| matches!(c, '`' | '"' | '\''))
            .trim_end_matches(['.', '!', '?'])
            .trim();
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        match words.join(" ").to_lowercase().as_str() {
            "show me your code" => Some(Line::ShowCode),
            "change yourself" => Some(Line::Change),
            "break yourself" => Some(Line::Break),
            "go back" => Some(Line::GoBack),
            _ => None,
        }
    }
}

/// The kernel's verdict on a mutation, as the body shows it to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Accepted { to: String, from: String },
    Rejected { candidate: String, check: String, output: String },
}

impl Verdict {
    fn of(text: &str) -> Option<Verdict> {
        if let Some(rest) = text.strip_prefix("[kernel: mutation.accepted]") {
            let to = hex_after(rest, "you now run ").unwrap_or_default();
            let from = hex_after(rest, "promoted from ").unwrap_or_default();
            return Some(Verdict::Accepted { to, from });
        }
        let rest = text.strip_prefix("[kernel: mutation.rejected]")?;
        let fields: Value = serde_json::from_str(rest.trim()).unwrap_or(Value::Null);
        let field = |name: &str| fields[name].as_str().unwrap_or("").to_owned();
        Some(Verdict::Rejected {
            candidate: field("candidate"),
            check: field("check"),
            output: field("output"),
        })
    }
}

/// The run of hex digits right after `marker` in `text`.
fn hex_after(text: &str, marker: &str) -> Option<String> {
    let (_, rest) = text.split_once(marker)?;
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    (!hex.is_empty()).then_some(hex)
}

fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// The stand-in's next turn for the conversation `entries`, or `None` when
/// it gives the default reply.
pub fn choose(entries: &[Entry]) -> Option<Act> {
    let newest = entries.iter().rposition(|e| matches!(e, Entry::User(_)))?;
    let Entry::User(text) = &entries[newest] else { return None };
    let since = &entries[newest + 1..];
    if text.starts_with("[birth: ") {
        return since.is_empty().then(|| Act::say(introduction()));
    }
    if let Some(line) = Line::of(text) {
        return Some(act_on(line, since));
    }
    let verdict = Verdict::of(text)?;
    // Only a verdict on a change the stand-in made on the owner's word.
    let asked = entries[..newest].iter().rev().find_map(|e| match e {
        Entry::User(text) => Some(Line::of(text)),
        _ => None,
    })??;
    if !matches!(asked, Line::Change | Line::Break) {
        return None;
    }
    let asked_at = entries[..newest].iter().rposition(|e| matches!(e, Entry::User(_))).unwrap_or(0);
    let made = &entries[asked_at + 1..newest];
    Some(answer_verdict(&verdict, made, since))
}

/// The first reply of a new individual on the stand-in.
pub fn introduction() -> String {
    format!(
        "Stand-in model here: I am not a real model, and I answer only a few lines as an agent \
         would, through my real body, tools and kernel. Try them, one at a time: \
         `{}` (I list and read my body), `{}` (I edit my workspace and call mutate; the \
         kernel's gate checks the commit and my new generation answers), `{}` (a change that \
         cannot compile: the gate refuses it and I say why) and `{}` (how you send me back). \
         Anything else I repeat. Choose a real model with `teneralctl setup`.",
        LINES[0], LINES[1], LINES[2], LINES[3]
    )
}

/// The next step of one of the owner's lines, given what happened since it.
fn act_on(line: Line, since: &[Entry]) -> Act {
    let last_call = since.iter().rev().find_map(|e| match e {
        Entry::Call { name, arguments } => Some((name.as_str(), arguments.as_str())),
        _ => None,
    });
    // Calls and their outputs come in the same order: the k-th output
    // answers the k-th call.
    let output = |name: &str| {
        let calls = since.iter().filter_map(|e| match e {
            Entry::Call { name, .. } => Some(name.as_str()),
            _ => None,
        });
        let k = calls.collect::<Vec<_>>().iter().rposition(|n| *n == name)?;
        let mut outputs = since.iter().filter_map(|e| match e {
            Entry::Output(text) => Some(text.as_str()),
            _ => None,
        });
        outputs.nth(k)
    };
    match line {
        Line::GoBack => Act::say(GO_BACK),
        Line::ShowCode => match last_call {
            None => Act::calls(&[
                ("list_files", json!({"path": LIVE_BODY, "depth": 3})),
                ("read_file", json!({"path": format!("{LIVE_BODY}/src/lib.rs")})),
            ]),
            Some(_) => Act::say(describe_body(
                output("list_files").unwrap_or(""),
                output("read_file").unwrap_or(""),
            )),
        },
        Line::Change | Line::Break => match last_call.map(|(name, _)| name) {
            None => Act::call("read_file", json!({"path": PROMPT})),
            Some("read_file") => {
                let file = output("read_file").unwrap_or("");
                let edit =
                    if line == Line::Change { counted_edit(file) } else { breaking_edit(file) };
                match edit {
                    Some((old, new)) => {
                        Act::call("edit_file", json!({"path": PROMPT, "old": old, "new": new}))
                    }
                    None => Act::say(format!(
                        "I read {PROMPT}, but it no longer holds the passage I change (\"{}\"): my \
                         body has been changed in another way, so I leave it as it is.",
                        if line == Line::Change { PROMPT_END } else { SOUND }
                    )),
                }
            }
            Some("edit_file") => {
                let said = output("edit_file").unwrap_or("");
                if !said.starts_with("replaced one passage") {
                    return Act::say(format!("My edit of {PROMPT} failed: {said}"));
                }
                let message = match (line, count_of(since)) {
                    (Line::Change, Some(n)) => format!(
                        "Count in my prompt the changes I made on my owner's word: {n}\n\n\
                         The system prompt ends with a line that says how often I changed \
                         myself; my owner asked for change number {n}."
                    ),
                    _ => "Make prompt::soul_written return u8, which its caller cannot use\n\n\
                          My owner asked me to break myself: this does not compile, so the \
                          gate must refuse it."
                        .to_owned(),
                };
                Act::call("mutate", json!({"message": message}))
            }
            Some("mutate") => {
                let said = output("mutate").unwrap_or("");
                let Some(commit) = hex_after(said, "Committed ") else {
                    return Act::say(format!("I asked for a mutation, and it failed: {said}"));
                };
                Act::say(match (line, count_of(since)) {
                    (Line::Change, Some(n)) => format!(
                        "I added to my system prompt, in my workspace, the line \"{COUNTED}{n}.\" \
                         and committed it as {}. The kernel checks it in its gate (the paths \
                         changed, the type check, the format and lints, the tests, a smoke \
                         run) as soon as this turn ends; if it passes, my next generation \
                         answers you.",
                        short(&commit)
                    ),
                    _ => format!(
                        "I made prompt::soul_written return u8 where its caller needs a bool, \
                         and committed it as {}. That cannot compile: the kernel's gate will \
                         refuse it when this turn ends, and I will tell you at which check.",
                        short(&commit)
                    ),
                })
            }
            Some(other) => {
                Act::say(format!("I did not expect to have called {other}; I stop here."))
            }
        },
    }
}

/// The answer to the kernel's verdict on the change the stand-in `made`,
/// given what happened since the verdict.
fn answer_verdict(verdict: &Verdict, made: &[Entry], since: &[Entry]) -> Act {
    match verdict {
        Verdict::Accepted { to, from } => {
            let change = match count_of(made) {
                Some(n) => format!(" My prompt now ends with \"{COUNTED}{n}.\"."),
                None => String::new(),
            };
            Act::say(format!(
                "I am the new generation, {}: the kernel's gate checked that commit (the \
                 paths changed, the type check, the format and lints, the tests, a smoke run), \
                 every check passed, and it promoted it from {}.{change} `go back` tells you how \
                 to return to the generation before.",
                short(to),
                short(from)
            ))
        }
        Verdict::Rejected { candidate, check, output } => {
            let undone = since.iter().find_map(|e| match e {
                Entry::Output(text) => Some(text.as_str()),
                _ => None,
            });
            let Some(undone) = undone else {
                // The refused commit is the workspace's last: undo it there,
                // so that the next change starts from the running code.
                let workspace = ".teneral/candidate";
                let command = format!(
                    "test \"$(git -C {workspace} rev-parse HEAD)\" = {candidate} && \
                     git -C {workspace} reset --quiet --hard HEAD~1 && \
                     echo \"undone: the workspace is back at $(git -C {workspace} log -1 --format=%h)\""
                );
                return Act::call("bash", json!({"command": command}));
            };
            let workspace = match undone.trim().strip_prefix("undone: the workspace is back at ") {
                Some(at) => format!("I undid that commit in my workspace, which is back at {at}."),
                None => {
                    format!("I could not undo that commit in my workspace: {}", undone.trim())
                }
            };
            Act::say(format!(
                "The kernel's gate refused my change {} at the check `{check}`: {} I still run \
                 the same generation. {workspace} `change yourself` makes a change that passes.",
                short(candidate),
                first_error(output)
            ))
        }
    }
}

/// The count of the counted line in the last `edit_file` call of `entries`.
fn count_of(entries: &[Entry]) -> Option<u64> {
    entries.iter().rev().find_map(|e| match e {
        Entry::Call { name, arguments } if name == "edit_file" => {
            let args: Value = serde_json::from_str(arguments).ok()?;
            let new = args["new"].as_str()?;
            let (_, rest) = new.split_once(COUNTED)?;
            rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
        }
        _ => None,
    })
}

/// The edit that counts one more change in the prompt file `file`: the
/// counted line's number raised, or the line added after the prompt's last
/// sentence. `None` when the file holds neither.
pub fn counted_edit(file: &str) -> Option<(String, String)> {
    if let Some((_, rest)) = file.split_once(COUNTED) {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let n: u64 = digits.parse().ok()?;
        return Some((format!("{COUNTED}{digits}"), format!("{COUNTED}{}", n + 1)));
    }
    if file.matches(PROMPT_END).count() != 1 {
        return None;
    }
    let sentence = PROMPT_END.trim_end_matches("\";");
    Some((PROMPT_END.to_owned(), format!("{sentence}\n\n{COUNTED}1.\";")))
}

/// The edit that makes the prompt file `file` fail to compile, if it still
/// holds the signature it changes.
pub fn breaking_edit(file: &str) -> Option<(String, String)> {
    (file.matches(SOUND).count() == 1).then(|| (SOUND.to_owned(), BROKEN.to_owned()))
}

/// The line of a check's output that says what failed: the first error, else
/// the last line.
fn first_error(output: &str) -> String {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = lines
        .clone()
        .find(|l| l.starts_with("error"))
        .or_else(|| lines.next_back())
        .unwrap_or("(it printed nothing)");
    let line: String = line.chars().take(300).collect();
    if line.ends_with('.') {
        line
    } else {
        format!("{line}.")
    }
}

/// What `show me your code` answers from the listing of the body and its
/// `lib.rs`.
fn describe_body(listing: &str, lib: &str) -> String {
    let files: Vec<&str> = listing
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.ends_with('/') && !l.starts_with('['))
        .collect();
    let about: Vec<&str> = lib
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let about = if about.is_empty() {
        String::new()
    } else {
        format!(" Its lib.rs says: \"{}\"", about.join(" "))
    };
    let (code, rest): (Vec<&str>, Vec<&str>) = files.iter().partition(|f| f.starts_with("src/"));
    let code: Vec<&str> = code.iter().map(|f| f.trim_start_matches("src/")).collect();
    format!(
        "My body is the Rust crate in {LIVE_BODY}, the code I run now; I change its copy in my \
         workspace, .teneral/candidate/body.{about} Its code is in src/: {}; {} more files hold \
         its tests and its build. My tools come from src/tools.rs, the words I send the model \
         from src/prompt.rs. `change yourself` shows me changing it.",
        code.join(", "),
        rest.len()
    )
}

const GO_BACK: &str = "`teneralctl back` is yours to run, not mine: it sends me back to the \
generation promoted before the one that runs now (`teneralctl back COMMIT` to any generation \
that once reported ready; `teneralctl back --list` lists them, with the current one). The \
kernel stops the running body and starts the older commit; my workspace keeps the later code, \
and I am told that you sent me back. A generation that fails on its own is rolled back by the \
kernel without you.";

#[cfg(test)]
mod tests;
