//! Reading the journal: parsing one line, and walking lines from the end.
//!
//! Readers pass over what they cannot use: a line that is not a JSON object
//! with a `type` (such as the torn last line a crash leaves), and types they
//! do not know. Reading from the end keeps the cost of attaching bounded by
//! what is shown, not by the size of the journal.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use serde_json::{Map, Value};

use super::rules::canonical_type;

/// One journaled event as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The type, with old names read as new (`molt.*` as `mutation.*`).
    pub kind: String,
    pub seq: u64,
    pub ts: String,
    pub commit: String,
    /// The whole event as written, `type` included.
    pub fields: Map<String, Value>,
}

impl Event {
    /// A string field of the event, or "".
    pub fn text(&self, name: &str) -> &str {
        self.fields.get(name).and_then(Value::as_str).unwrap_or_default()
    }
}

/// Parses one journal line; `None` for anything that is not a whole event.
pub fn parse_line(line: &[u8]) -> Option<Event> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let kind = canonical_type(fields.get("type")?.as_str()?).to_owned();
    let seq = fields.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let ts = fields.get("ts").and_then(Value::as_str).unwrap_or_default().to_owned();
    let commit = fields.get("commit").and_then(Value::as_str).unwrap_or_default().to_owned();
    Some(Event { kind, seq, ts, commit, fields })
}

/// Lines of a file from the last to the first, read in blocks from the end.
///
/// Each item is one line without its `\n`. A last line with no `\n` after it
/// (torn by a crash, or being written right now) is yielded too; callers that
/// must not see it use [`parse_line`], which passes it over unless whole.
pub struct Backwards {
    file: File,
    /// File offset where the bytes not yet read end.
    pos: u64,
    /// Bytes read from `pos` on that are not yet handed out as lines.
    buf: Vec<u8>,
    /// True until the first `\n` from the end was dealt with: an empty piece
    /// after it is the file's final terminator, not a line.
    at_end: bool,
    done: bool,
    /// How many bytes at the start of `buf` may hold a `\n` not yet looked
    /// for: a line longer than a block is read in several, and each byte is
    /// searched once.
    unscanned: usize,
}

const BLOCK: u64 = 64 * 1024;

impl Backwards {
    /// Starts at the current end of `file`.
    pub fn new(mut file: File) -> io::Result<Self> {
        let pos = file.seek(SeekFrom::End(0))?;
        Ok(Self::at(file, pos))
    }

    /// Starts at byte `end` of `file`; nothing after it is read.
    pub fn at(file: File, end: u64) -> Self {
        Self { file, pos: end, buf: Vec::new(), at_end: true, done: false, unscanned: 0 }
    }

    /// The next line towards the start, or `None` past the first line.
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            let unscanned = self.unscanned.min(self.buf.len());
            if let Some(cut) = memchr::memrchr(b'\n', &self.buf[..unscanned]) {
                let line = self.buf.split_off(cut + 1);
                self.buf.truncate(cut);
                self.unscanned = cut;
                let terminator = std::mem::replace(&mut self.at_end, false) && line.is_empty();
                if terminator {
                    continue;
                }
                return Ok(Some(line));
            }
            if self.pos == 0 {
                if self.done || (self.at_end && self.buf.is_empty()) {
                    return Ok(None);
                }
                self.done = true;
                self.unscanned = 0;
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
            let take = BLOCK.min(self.pos);
            self.pos -= take;
            let mut chunk = vec![0; take as usize];
            self.file.seek(SeekFrom::Start(self.pos))?;
            self.file.read_exact(&mut chunk)?;
            chunk.extend_from_slice(&self.buf);
            self.buf = chunk;
            self.unscanned = take as usize;
        }
    }
}

/// The last `n` whole events of the journal at `path` that `keep` accepts,
/// oldest first, and the file's length when read (where following starts).
/// A missing journal is empty; a link is refused ([`super::open_file`]).
pub fn last_events(
    path: &std::path::Path,
    n: usize,
    mut keep: impl FnMut(&Event) -> bool,
) -> io::Result<(Vec<Event>, u64)> {
    let file = match super::open_file(path, super::Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut lines = Backwards::new(file)?;
    let end = lines.pos;
    let mut found = Vec::new();
    while found.len() < n {
        let Some(line) = lines.next_line()? else { break };
        if let Some(event) = parse_line(&line) {
            if keep(&event) {
                found.push(event);
            }
        }
    }
    found.reverse();
    Ok((found, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(content: &[u8]) -> Vec<String> {
        let mut f = tempfile::tempfile().expect("a temporary file can be made");
        f.write_all(content).expect("the temporary file takes the content");
        let mut b = Backwards::at(f, content.len() as u64);
        let mut out = Vec::new();
        while let Some(l) = b.next_line().expect("the temporary file reads back") {
            out.push(String::from_utf8_lossy(&l).into_owned());
        }
        out
    }

    #[test]
    fn walks_lines_backwards() {
        let table: [(&[u8], &[&str]); 6] = [
            (b"", &[]),
            (b"a\n", &["a"]),
            (b"a\nb\n", &["b", "a"]),
            (b"a\nb", &["b", "a"]),
            (b"\n", &[""]),
            (b"a\n\nb\n", &["b", "", "a"]),
        ];
        for (content, want) in table {
            assert_eq!(lines_of(content), want, "{:?}", String::from_utf8_lossy(content));
        }
    }

    #[test]
    fn lines_longer_than_a_block() {
        let long = "x".repeat(200_000);
        let content = format!("first\n{long}\nlast\n");
        assert_eq!(lines_of(content.as_bytes()), vec!["last", long.as_str(), "first"]);
    }

    #[test]
    fn torn_last_line_is_passed_over_by_parse() {
        assert!(parse_line(br#"{"type":"reply","text":"whole","seq":3}"#).is_some());
        assert!(parse_line(br#"{"type":"reply","te"#).is_none());
        assert!(parse_line(b"").is_none());
        assert!(parse_line(br#"{"no_type":1}"#).is_none());
        let old = parse_line(br#"{"type":"molt.requested","seq":1}"#);
        assert_eq!(old.map(|e| e.kind), Some("mutation.requested".to_owned()));
    }
}
