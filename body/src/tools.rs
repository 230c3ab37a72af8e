//! The tools the model can call, each a plain function from arguments to an
//! [`Outcome`]: what it returned and whether that is an error.
//!
//! Paths are relative to the individual's directory unless absolute
//! (`Path::join` with an absolute path gives that path). Every
//! output is bounded so one call cannot fill the context. The turn loop
//! ([`crate::turn`]) journals each call before it runs and its result after.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::{json, Map, Value};

use crate::cancel::Cancel;
use crate::events::{Events, SendError};
use crate::model::ToolSpec;
use crate::{clock, inbox, mutate, shell};

/// Characters of a file `read_file` returns.
pub const READ_MAX: usize = 60_000;
/// Entries `list_files` returns.
pub const LIST_MAX: usize = 500;

/// What a tool needs from the body.
#[derive(Clone)]
pub struct ToolEnv {
    pub home: PathBuf,
    pub events: Arc<Events>,
    pub cancel: Arc<Cancel>,
    /// The commit a `mutate` call asked for; the body exits when it is set
    /// and the turn ends.
    pub mutation: Arc<OnceLock<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub output: String,
    pub error: bool,
}

fn ok(output: impl Into<String>) -> Outcome {
    Outcome { output: output.into(), error: false }
}

fn fail(output: impl Into<String>) -> Outcome {
    Outcome { output: output.into(), error: true }
}

/// The tools, as the model is told of them.
pub fn specs() -> Vec<ToolSpec> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    let string = |description: &str| json!({"type": "string", "description": description});
    vec![
        ToolSpec {
            name: "bash",
            description: "Run a bash command in your directory. It may run two minutes; then it \
                is killed with everything it started. Output is cut past 30,000 bytes.",
            parameters: object(json!({"command": string("the command")}), &["command"]),
        },
        ToolSpec {
            name: "read_file",
            description: "Read a text file (up to 60,000 characters).",
            parameters: object(json!({"path": string("the file")}), &["path"]),
        },
        ToolSpec {
            name: "write_file",
            description: "Write a whole file, making its directories; replaces what was there.",
            parameters: object(
                json!({"path": string("the file"), "content": string("the new content")}),
                &["path", "content"],
            ),
        },
        ToolSpec {
            name: "edit_file",
            description: "Replace one passage of a file. `old` must occur exactly once, \
                whitespace included.",
            parameters: object(
                json!({"path": string("the file"), "old": string("the exact passage"),
                       "new": string("what replaces it")}),
                &["path", "old", "new"],
            ),
        },
        ToolSpec {
            name: "list_files",
            description: "List a directory, directories ending in '/'. Skips .git and target.",
            parameters: object(
                json!({"path": string("the directory (default: your directory)"),
                       "depth": {"type": "integer", "description": "levels to descend (default 2)"}}),
                &[],
            ),
        },
        ToolSpec {
            name: "note",
            description: "Keep a record of your own in the journal: a kind (1 to 64 of a-z, 0-9, \
                '.', '_', '-') and any JSON data. Notes are not shown to you later.",
            parameters: object(
                json!({"kind": string("a short name"), "data": {"description": "any JSON"}}),
                &["kind", "data"],
            ),
        },
        ToolSpec {
            name: "send",
            description: "Send a message to another agent listed in soul/peers.json. To answer \
                a message, give its id as reply_to; an exchange ends after four replies.",
            parameters: object(
                json!({"to": string("the peer's name in soul/peers.json"),
                       "text": string("the message"),
                       "reply_to": string("the id of the message you answer, if any")}),
                &["to", "text"],
            ),
        },
        ToolSpec {
            name: "mutate",
            description: "Commit everything in your workspace (.teneral/candidate) and ask the \
                kernel to run that commit as your next generation. The kernel checks it when \
                this turn ends (only body/ and BACKLOG.md may change; the type check, the \
                tests and a smoke run must pass); its answer comes in the conversation.",
            parameters: object(
                json!({"message": string("the commit message: what the change does and why")}),
                &["message"],
            ),
        },
        ToolSpec {
            name: "offer",
            description: "Offer a change to the species (every individual), as a pull request. \
                Prepare it first in a checkout of your own: one change, committed on top of the \
                species' head, the last commit's message a title and then lines starting \
                'What it changes:', 'Why:', 'Evidence:' and 'Not verified:'. Give that commit's \
                full id. The kernel signs it with your key as offer/<name>, checks it (nothing \
                private may leave: no soul/, memory/, inbox/, no secrets) and publishes it when \
                your owner allows; its answer comes back here. Under ask, tell your owner what \
                you offer and ask again after they approved it.",
            parameters: object(
                json!({"name": string("a short name: letters, digits, '-', '_', '.'"),
                       "commit": string("the full id of the offer's last commit; by default \
                           the last commit of your workspace, .teneral/candidate")}),
                &["name"],
            ),
        },
    ]
}

/// Runs the tool `name`.
pub fn run(env: &ToolEnv, name: &str, args: &Map<String, Value>) -> Outcome {
    let text = |field: &str| args.get(field).and_then(Value::as_str);
    let need = |field: &str| text(field).ok_or_else(|| fail(format!("\"{field}\" is missing")));
    let result = (|| -> Result<Outcome, Outcome> {
        Ok(match name {
            "bash" => {
                let (output, error) =
                    shell::run(&env.home, need("command")?, &env.cancel, shell::LIMIT);
                Outcome { output, error }
            }
            "read_file" => read_file(&env.home.join(need("path")?)),
            "write_file" => write_file(&env.home.join(need("path")?), need("content")?),
            "edit_file" => edit_file(&env.home.join(need("path")?), need("old")?, need("new")?),
            "list_files" => {
                let depth = args.get("depth").and_then(Value::as_u64).unwrap_or(2);
                list_files(&env.home.join(text("path").unwrap_or(".")), depth as usize)
            }
            "note" => {
                let data = args.get("data").cloned().unwrap_or(Value::Null);
                let event = json!({"type": "note", "kind": need("kind")?, "data": data});
                match env.events.send(&event) {
                    Ok(seq) => ok(format!("noted (seq {})", seq.unwrap_or_default())),
                    Err(SendError::Refused(why)) => fail(format!("the note was refused: {why}")),
                    Err(e) => fail(e.to_string()),
                }
            }
            "send" => send(&env.home, need("to")?, need("text")?, text("reply_to")),
            "mutate" => request_mutation(env, need("message")?),
            "offer" => {
                let commit = match text("commit") {
                    Some(commit) => commit.to_owned(),
                    None => mutate::head(&env.home).map_err(fail)?,
                };
                request_offer(env, need("name")?, &commit)
            }
            other => fail(format!("there is no tool named {other:?}")),
        })
    })();
    result.unwrap_or_else(|refusal| refusal)
}

/// How long the offer tool waits for the kernel's answer.
const OFFER_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Asks the kernel to sign, check and publish an offer, and waits for its
/// one `offer.answered` in the journal.
fn request_offer(env: &ToolEnv, name: &str, commit: &str) -> Outcome {
    let event = json!({"type": "offer.requested", "name": name, "head": commit});
    let seq = match env.events.send(&event) {
        Ok(Some(seq)) => seq,
        Ok(None) => return fail("the kernel took the request but did not journal it"),
        Err(SendError::Refused(why)) => {
            return fail(format!("the kernel refused the offer: {why}"))
        }
        Err(e) => return fail(e.to_string()),
    };
    let journal = env.home.join("memory/journal.jsonl");
    let started = std::time::Instant::now();
    while started.elapsed() < OFFER_WAIT && !env.cancel.is_cancelled() {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        let answer = text
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "offer.answered" && e["request"].as_u64() == Some(seq));
        if let Some(answer) = answer {
            let message = answer["message"].as_str().unwrap_or_default();
            let state = answer["state"].as_str().unwrap_or_default();
            let report = answer["report"].as_str().unwrap_or_default();
            let text = format!("{state}: {message} (the kernel's report: {report})");
            return if matches!(state, "published" | "waits") { ok(text) } else { fail(text) };
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    ok(format!(
        "asked (request {seq}); the kernel has not answered yet: its offer.answered with \
         request {seq} comes in the journal"
    ))
}

/// Commits the workspace and asks the kernel for it, once per turn.
fn request_mutation(env: &ToolEnv, message: &str) -> Outcome {
    if let Some(asked) = env.mutation.get() {
        return fail(format!(
            "a mutation to {asked} is already requested; the kernel checks it when this turn \
             ends, so end the turn now"
        ));
    }
    let candidate = match mutate::commit(&env.home, message) {
        Ok(candidate) => candidate,
        Err(why) => return fail(why),
    };
    let event = json!({"type": "mutation.requested", "candidate": candidate});
    match env.events.send(&event) {
        Ok(_) => {
            let _ = env.mutation.set(candidate.clone());
            ok(format!(
                "Committed {candidate} in {} and asked the kernel for it. When this turn \
                 ends, this process stops and the kernel checks the commit; its answer (your \
                 new generation, or which check refused it and why) comes in the conversation. \
                 What you change from now on is not in that commit.",
                mutate::CANDIDATE
            ))
        }
        Err(SendError::Refused(why)) => {
            fail(format!("committed {candidate}, but the kernel refused the request: {why}"))
        }
        Err(e) => fail(e.to_string()),
    }
}

fn read_file(path: &Path) -> Outcome {
    match fs::read(path) {
        Err(e) => fail(format!("cannot read {}: {e}", path.display())),
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            match text.char_indices().nth(READ_MAX) {
                None => ok(text),
                Some((cut, _)) => ok(format!(
                    "{}\n[cut: the file has {} bytes and only its first {READ_MAX} characters \
                     are shown; read on with bash, e.g. tail -c +N or sed -n]",
                    &text[..cut],
                    bytes.len()
                )),
            }
        }
    }
}

fn write_file(path: &Path, content: &str) -> Outcome {
    if let Some(parent) = path.parent() {
        if let Err(e) = fs::create_dir_all(parent) {
            return fail(format!("cannot make {}: {e}", parent.display()));
        }
    }
    match fs::write(path, content) {
        Ok(()) => ok(format!("wrote {} bytes to {}", content.len(), path.display())),
        Err(e) => fail(format!("cannot write {}: {e}", path.display())),
    }
}

fn edit_file(path: &Path, old: &str, new: &str) -> Outcome {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
    };
    if old.is_empty() {
        return fail("\"old\" is empty; give the exact passage to replace");
    }
    match text.matches(old).count() {
        0 => fail(format!(
            "the passage is not in {}; read the file and copy the passage exactly, \
             whitespace included",
            path.display()
        )),
        1 => match fs::write(path, text.replacen(old, new, 1)) {
            Ok(()) => ok(format!("replaced one passage in {}", path.display())),
            Err(e) => fail(format!("cannot write {}: {e}", path.display())),
        },
        n => fail(format!(
            "the passage occurs {n} times in {}; include more of the text around it so that \
             it occurs once",
            path.display()
        )),
    }
}

fn list_files(dir: &Path, depth: usize) -> Outcome {
    fn walk(base: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if out.len() > LIST_MAX {
                return;
            }
            let path = entry.path();
            let shown = path.strip_prefix(base).unwrap_or(&path).display().to_string();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(format!("{shown}/"));
                let name = entry.file_name();
                if depth > 1 && name != ".git" && name != "target" {
                    walk(base, &path, depth - 1, out);
                }
            } else {
                out.push(shown);
            }
        }
    }
    if !dir.is_dir() {
        return fail(format!("{} is not a directory", dir.display()));
    }
    let mut out = Vec::new();
    walk(dir, dir, depth.max(1), &mut out);
    if out.len() > LIST_MAX {
        out.truncate(LIST_MAX);
        out.push(format!("[cut at {LIST_MAX} entries; list a narrower directory]"));
    }
    ok(if out.is_empty() { "(empty)".to_owned() } else { out.join("\n") })
}

/// Sends an envelope to a peer of `soul/peers.json`.
fn send(home: &Path, to: &str, text: &str, reply_to: Option<&str>) -> Outcome {
    let peers = match fs::read(home.join("soul/peers.json")) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        Err(_) => return fail("soul/peers.json does not exist; list peers there as {\"name\": \"/path/to/their/inbox\"}"),
    };
    let Some(dir) = peers.get(to).and_then(Value::as_str) else {
        return fail(format!("{to:?} is not in soul/peers.json"));
    };
    let answered = match reply_to.filter(|id| !id.is_empty()) {
        None => None,
        Some(id) => match inbox::find_seen(home, id) {
            Some(envelope) => Some(envelope),
            None => return fail(format!("no message with id {id:?} is in inbox/seen/")),
        },
    };
    let from = home.file_name().map_or("agent".into(), |n| n.to_string_lossy().into_owned());
    let envelope = match inbox::compose(&from, to, text, answered.as_ref(), &clock::now_rfc3339()) {
        Ok(envelope) => envelope,
        Err(why) => return fail(why),
    };
    match inbox::deliver(&home.join(dir), &envelope) {
        Ok(path) => ok(format!("sent as {} (id {})", path.display(), envelope["id"])),
        Err(e) => fail(format!("cannot write into {dir}: {e}")),
    }
}
