//! Envelopes: messages between agents, through each other's `inbox/`.
//!
//! An envelope is a JSON file whose name ends in `.json`:
//!
//! ```json
//! {"v": 1, "id": "note-1", "from": "script", "to": "anyone", "replyTo": null,
//!  "ts": "2026-11-11T12:00:00Z", "hops": 0, "text": "hello"}
//! ```
//!
//! A valid one is taken in and moved to `inbox/seen/`; anything else goes to
//! `inbox/rejected/`, with the reason in a file beside it (`NAME.reason`).
//! Writers use a temporary name and rename, so no file is read half written.
//! `hops` counts the replies in an exchange: a reply carries one more than
//! the message it answers, and the `send` tool refuses a fifth, so two agents
//! cannot answer each other for ever. Nothing is signed: `from` is whatever
//! the sender wrote, and the model is told so.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};

/// The largest envelope file taken in.
pub const MAX_BYTES: u64 = 1 << 20;
/// Replies allowed in one exchange.
pub const MAX_REPLIES: u64 = 4;

/// What was found under a name in the inbox.
#[derive(Debug, PartialEq)]
pub enum Arrival {
    /// Nothing there any more (taken in already).
    Gone,
    Valid(Map<String, Value>),
    Invalid(String),
}

pub fn dir(home: &Path) -> PathBuf {
    home.join("inbox")
}

/// Whether `name` is one the inbox reads: ends in `.json`, not hidden.
pub fn is_envelope_name(name: &str) -> bool {
    name.ends_with(".json") && !name.starts_with('.')
}

/// Checks an envelope's bytes. Fields beyond the eight are let through.
pub fn check(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let Ok(Value::Object(envelope)) = serde_json::from_slice::<Value>(bytes) else {
        return Err("not a JSON object".to_owned());
    };
    if envelope.get("v") != Some(&json!(1)) {
        return Err("\"v\" must be 1".to_owned());
    }
    for field in ["id", "from", "to", "ts", "text"] {
        if !envelope.get(field).is_some_and(Value::is_string) {
            return Err(format!("\"{field}\" must be a string"));
        }
    }
    if envelope["id"].as_str().is_some_and(str::is_empty) {
        return Err("\"id\" must not be empty".to_owned());
    }
    if !matches!(envelope.get("replyTo"), Some(Value::Null | Value::String(_))) {
        return Err("\"replyTo\" must be a string or null".to_owned());
    }
    if envelope.get("hops").and_then(Value::as_u64).is_none() {
        return Err("\"hops\" must be a whole number, 0 or more".to_owned());
    }
    Ok(envelope)
}

/// Reads and checks the envelope under `name`.
pub fn read(home: &Path, name: &str) -> Arrival {
    let path = dir(home).join(name);
    match fs::metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Arrival::Gone,
        Ok(meta) if meta.len() > MAX_BYTES => {
            return Arrival::Invalid(format!("larger than {MAX_BYTES} bytes"))
        }
        _ => {}
    }
    match fs::read(&path) {
        Ok(bytes) => check(&bytes).map_or_else(Arrival::Invalid, Arrival::Valid),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Arrival::Gone,
        Err(e) => Arrival::Invalid(format!("cannot be read: {e}")),
    }
}

/// Moves a taken-in envelope to `inbox/seen/`.
pub fn settle(home: &Path, name: &str) -> io::Result<()> {
    let seen = dir(home).join("seen");
    fs::create_dir_all(&seen)?;
    fs::rename(dir(home).join(name), seen.join(name))
}

/// Moves a bad envelope to `inbox/rejected/`, with the reason beside it.
pub fn reject(home: &Path, name: &str, reason: &str) -> io::Result<()> {
    let rejected = dir(home).join("rejected");
    fs::create_dir_all(&rejected)?;
    fs::write(rejected.join(format!("{name}.reason")), format!("{reason}\n"))?;
    fs::rename(dir(home).join(name), rejected.join(name))
}

/// Finds an envelope taken in earlier by its id.
pub fn find_seen(home: &Path, id: &str) -> Option<Map<String, Value>> {
    let entries = fs::read_dir(dir(home).join("seen")).ok()?;
    entries.flatten().find_map(|entry| {
        let envelope = check(&fs::read(entry.path()).ok()?).ok()?;
        (envelope["id"] == id).then_some(envelope)
    })
}

/// A new envelope from `from` to `to`, answering `answered` when given.
pub fn compose(
    from: &str,
    to: &str,
    text: &str,
    answered: Option<&Map<String, Value>>,
    ts: &str,
) -> Result<Value, String> {
    let hops = answered.map_or(0, |a| a["hops"].as_u64().unwrap_or(0) + 1);
    if hops > MAX_REPLIES {
        return Err(format!(
            "this exchange has had {MAX_REPLIES} replies already, so it ends here; \
             start a new one only if your owner wants it"
        ));
    }
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let stamp: String = ts.chars().filter(char::is_ascii_digit).collect();
    let id =
        format!("{from}-{stamp}-{}-{}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
    Ok(json!({"v": 1, "id": id, "from": from, "to": to,
        "replyTo": answered.map(|a| a["id"].clone()), "ts": ts, "hops": hops, "text": text}))
}

/// Writes `envelope` into the inbox `dir`: a hidden temporary name, then
/// the rename that makes it appear whole.
pub fn deliver(dir: &Path, envelope: &Value) -> io::Result<PathBuf> {
    let id = envelope["id"].as_str().unwrap_or("message");
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let temp = dir.join(format!(".{safe}.json.tmp"));
    let path = dir.join(format!("{safe}.json"));
    fs::write(&temp, envelope.to_string())?;
    fs::rename(&temp, &path)?;
    Ok(path)
}
