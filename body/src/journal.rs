//! Reading the journal back, once, at start.
//!
//! The journal (`memory/journal.jsonl`) is the kernel's: the body reads it
//! and never writes it (its events go through [`crate::events`]). A reader
//! passes over lines it cannot use: a torn last line left by a crash, and
//! types it does not know. Names of an older body are read as today's
//! (`molt.requested` as `mutation.requested`, `molt.rejected` as
//! `mutation.rejected`).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use serde_json::{Map, Value};

/// Where the journal lies under the individual's root.
pub const PATH: &str = "memory/journal.jsonl";

/// Parses one line into an event with its type in today's name.
pub fn parse_line(line: &[u8]) -> Option<Map<String, Value>> {
    let Ok(Value::Object(mut event)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let kind = event.get("type")?.as_str()?;
    let renamed = match kind {
        "molt.requested" => "mutation.requested",
        "molt.rejected" => "mutation.rejected",
        _ => return Some(event),
    };
    event.insert("type".into(), Value::String(renamed.into()));
    Some(event)
}

/// Calls `each` with every whole event of the journal under `home`, in
/// order. A missing journal is an empty one.
pub fn read(home: &Path, mut each: impl FnMut(&Map<String, Value>)) -> io::Result<()> {
    let file = match File::open(home.join(PATH)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if let Some(event) = parse_line(&line) {
            each(&event);
        }
    }
}
