//! The reply being written: the words a body streams (`reply.delta`), kept
//! where the owner's clients read them, never in the journal.
//!
//! The kernel appends each delta as one JSON line, `{"text":"..."}`, to
//! [`LIVE_PATH`], and empties the file before it journals an event that
//! ends the reply in progress ([`ends_reply`]), so the file holds the words
//! of that one reply. A client follows it as it follows the journal; a file
//! shorter than what the client read was emptied, and what it showed is
//! over (the journal has the reply whole).
//!
//! Invariants: the file never grows past [`MAX_BYTES`] (a delta that would
//! pass it is refused); only whole lines are read ([`read_texts`]); the file
//! is a plain file beneath `.teneral/`, never a link.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{json, Value};

use crate::journal::kind::EventKind;

/// The reply in progress, beneath the individual's directory.
pub const LIVE_PATH: &str = ".teneral/live-reply.jsonl";

/// The most the file holds.
pub const MAX_BYTES: u64 = 1 << 20;

/// Whether journaling an event of `kind` ends the reply in progress: the
/// reply itself, the turn's end, or a retry (the model starts again).
pub fn ends_reply(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Reply
            | EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::ModelRetry
    )
}

/// Appends one delta's `text` to the file of the individual at `home`.
pub fn append(home: &Path, text: &str) -> Result<(), String> {
    let mut line = json!({ "text": text }).to_string();
    line.push('\n');
    let path = home.join(LIVE_PATH);
    refuse_a_link(&path)
        .map_err(|e| format!("the kernel could not keep the reply in progress: {e}"))?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("the kernel could not keep the reply in progress: {e}"))?;
    let held = file.metadata().map(|m| m.len()).unwrap_or_default();
    if held + line.len() as u64 > MAX_BYTES {
        return Err(format!(
            "the reply in progress is over {MAX_BYTES} bytes; journal it as a reply, or send \
             its words in fewer, larger pieces"
        ));
    }
    file.write_all(line.as_bytes())
        .map_err(|e| format!("the kernel could not keep the reply in progress: {e}"))
}

/// Refuses a path that is anything but a plain file or nothing.
fn refuse_a_link(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a plain file; remove it", path.display()),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Empties the file, when it holds anything.
pub fn clear(home: &Path) -> io::Result<()> {
    let path = home.join(LIVE_PATH);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() > 0 => {
            OpenOptions::new().write(true).truncate(true).open(&path)?;
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The texts of the whole lines in `bytes`, joined, and how many bytes
/// those lines take (a partial last line is left for later).
pub fn read_texts(bytes: &[u8]) -> (String, usize) {
    let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
        return (String::new(), 0);
    };
    let mut text = String::new();
    for line in bytes[..end].split(|&b| b == b'\n') {
        if let Ok(Value::Object(delta)) = serde_json::from_slice::<Value>(line) {
            text.push_str(delta.get("text").and_then(Value::as_str).unwrap_or_default());
        }
    }
    (text, end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_kept_then_emptied_and_read_by_whole_lines() -> Result<(), String> {
        let home = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::create_dir(home.path().join(".teneral")).map_err(|e| e.to_string())?;
        append(home.path(), "Hello")?;
        append(home.path(), " there\n\"you\"")?;
        let bytes = std::fs::read(home.path().join(LIVE_PATH)).map_err(|e| e.to_string())?;
        assert_eq!(read_texts(&bytes), ("Hello there\n\"you\"".to_owned(), bytes.len()));
        let (text, used) = read_texts(&bytes[..bytes.len() - 3]);
        assert_eq!(
            (text.as_str(), used),
            ("Hello", bytes.iter().position(|&b| b == b'\n').unwrap_or(0) + 1)
        );
        clear(home.path()).map_err(|e| e.to_string())?;
        assert_eq!(std::fs::metadata(home.path().join(LIVE_PATH)).map(|m| m.len()).ok(), Some(0));
        let big = "x".repeat(MAX_BYTES as usize);
        let refused = append(home.path(), &big);
        assert!(refused.is_err_and(|e| e.contains("over 1048576 bytes")));
        Ok(())
    }

    #[test]
    fn what_ends_the_reply_in_progress() {
        let ending: Vec<&str> =
            EventKind::ALL.iter().filter(|k| ends_reply(**k)).map(|k| k.name()).collect();
        assert_eq!(ending, ["reply", "turn.ended", "turn.interrupted", "model.retry"]);
    }
}
