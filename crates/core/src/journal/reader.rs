//! Reading the journal: parsing one line, and walking lines from the end
//! or from the start.
//!
//! Readers pass over what they cannot use: a line that is not a JSON object
//! with a `type` (such as the torn last line a crash leaves), and types they
//! do not know. Reading from the end keeps the cost of attaching bounded by
//! what is shown, not by the size of the journal.
//!
//! Invariants: whatever a line holds, a reader's memory is bounded by
//! [`READ`]. A line longer than [`READ`]'s bytes is passed over as it is
//! read, never held whole; one nested deeper or holding more elements is
//! passed over after its scan ([`super::scan`]), never parsed. Both are
//! counted ([`Backwards::skipped`], [`Forwards::skipped`]); [`parse_line`]
//! refuses them too, for readers of their own.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use serde_json::{Map, Value};

use super::kind::EventKind;
use super::rules::canonical_type;
use super::scan::{scan, Limits};

/// What a journal line may cost a reader. Every line the kernel writes is
/// within it ([`super::writer::Journal::append`] refuses one that is not):
/// a body's event is bounded far below it ([`super::rules::BODY`]), and
/// stamping and writing it again can lengthen it only a little (a number
/// such as `1e2` is written `100.0`).
pub const READ: Limits = Limits { bytes: 4 * 1024 * 1024, depth: 64, elements: 131_072 };

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

    /// The event's kind, or `None` for a type this build does not know
    /// (a reader passes over it).
    pub fn known_kind(&self) -> Option<EventKind> {
        EventKind::parse(&self.kind)
    }

    /// Whether the event is of kind `kind`.
    pub fn is(&self, kind: EventKind) -> bool {
        self.known_kind() == Some(kind)
    }
}

/// Parses one journal line; `None` for anything that is not a whole event,
/// and for a line over [`READ`] (which is not parsed).
pub fn parse_line(line: &[u8]) -> Option<Event> {
    scan(line, &READ).ok()?;
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
/// A line over the limits is passed over and counted.
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
    /// The line being read is over the bytes limit: its bytes are dropped
    /// until its start.
    skipping: bool,
    skipped: u64,
    limits: Limits,
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
        Self::within(file, end, READ)
    }

    /// The same, passing over lines over `limits` rather than [`READ`].
    pub fn within(file: File, end: u64, limits: Limits) -> Self {
        Self {
            file,
            pos: end,
            buf: Vec::new(),
            at_end: true,
            done: false,
            unscanned: 0,
            skipping: false,
            skipped: 0,
            limits,
        }
    }

    /// How many lines were passed over for being over the limits.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next line within the limits towards the start, or `None` past
    /// the first line.
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            let Some(line) = self.next_piece()? else { return Ok(None) };
            if std::mem::take(&mut self.skipping) || scan(&line, &self.limits).is_err() {
                self.skipped += 1;
                continue;
            }
            return Ok(Some(line));
        }
    }

    /// The next line towards the start, empty (and `skipping` set) for one
    /// whose bytes were dropped as they were read.
    fn next_piece(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            let unscanned = self.unscanned.min(self.buf.len());
            if let Some(cut) = memchr::memrchr(b'\n', &self.buf[..unscanned]) {
                let line = self.buf.split_off(cut + 1);
                self.buf.truncate(cut);
                self.unscanned = cut;
                let at_end = std::mem::replace(&mut self.at_end, false);
                if at_end && line.is_empty() && !self.skipping {
                    continue;
                }
                return Ok(Some(line));
            }
            if self.buf.len() > self.limits.bytes {
                // Longer than any line taken: its bytes go as they come.
                self.skipping = true;
                self.buf = Vec::new();
                self.unscanned = 0;
            }
            if self.pos == 0 {
                let nothing = self.at_end && self.buf.is_empty() && !self.skipping;
                if self.done || nothing {
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

/// Lines of a reader from the first to the last, each within the limits:
/// one held at a time, a longer one dropped as it is read, never held whole.
/// A last line with no `\n` after it is yielded too.
pub struct Forwards<R> {
    read: R,
    block: Box<[u8]>,
    start: usize,
    end: usize,
    line: Vec<u8>,
    /// The line being read is over the bytes limit.
    skipping: bool,
    skipped: u64,
    limits: Limits,
}

impl<R: Read> Forwards<R> {
    /// Reads lines within [`READ`] from `read`.
    pub fn new(read: R) -> Self {
        Self::within(read, READ)
    }

    /// Reads lines within `limits` from `read`.
    pub fn within(read: R, limits: Limits) -> Self {
        Forwards {
            read,
            block: vec![0; BLOCK as usize].into_boxed_slice(),
            start: 0,
            end: 0,
            line: Vec::new(),
            skipping: false,
            skipped: 0,
            limits,
        }
    }

    /// How many lines were passed over for being over the limits.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next line within the limits, without its `\n`; `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            match self.next_piece()? {
                false => return Ok(None),
                true if std::mem::take(&mut self.skipping) => self.skipped += 1,
                true if scan(&self.line, &self.limits).is_err() => self.skipped += 1,
                true => return Ok(Some(&self.line)),
            }
        }
    }

    /// Reads the next line into `line` (emptied and `skipping` set for one
    /// over the bytes limit); false at the end of the input.
    fn next_piece(&mut self) -> io::Result<bool> {
        self.line.clear();
        let mut any = false;
        loop {
            if self.start == self.end {
                let n = loop {
                    match self.read.read(&mut self.block) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        other => break other?,
                    }
                };
                if n == 0 {
                    return Ok(any);
                }
                (self.start, self.end) = (0, n);
            }
            any = true;
            let window = &self.block[self.start..self.end];
            let newline = memchr::memchr(b'\n', window);
            let part = newline.unwrap_or(window.len());
            if !self.skipping {
                if self.line.len() + part > self.limits.bytes {
                    self.skipping = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(&window[..part]);
                }
            }
            self.start += part;
            if newline.is_some() {
                self.start += 1;
                return Ok(true);
            }
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

    fn forwards_of(content: &[u8], limits: Limits) -> (Vec<String>, u64) {
        let mut f = Forwards::within(content, limits);
        let mut out = Vec::new();
        while let Some(l) = f.next_line().expect("a slice reads") {
            out.push(String::from_utf8_lossy(l).into_owned());
        }
        (out, f.skipped())
    }

    fn backwards_within(content: &[u8], limits: Limits) -> (Vec<String>, u64) {
        let mut f = tempfile::tempfile().expect("a temporary file can be made");
        f.write_all(content).expect("the temporary file takes the content");
        let mut b = Backwards::within(f, content.len() as u64, limits);
        let mut out = Vec::new();
        while let Some(l) = b.next_line().expect("the temporary file reads back") {
            out.push(String::from_utf8_lossy(&l).into_owned());
        }
        (out, b.skipped())
    }

    /// Both ways, a line over the limits is passed over and counted, its
    /// neighbours read as they are; the bytes limit holds across blocks.
    #[test]
    fn lines_over_the_limits_are_passed_over_and_counted() {
        let limits = Limits { bytes: 100_000, depth: 3, elements: 10 };
        let long = "x".repeat(300_000);
        let at_limit = "y".repeat(100_000);
        let table: Vec<(String, Vec<&str>, u64)> = vec![
            ("a\nb\n".into(), vec!["a", "b"], 0),
            (format!("a\n{long}\nb\n"), vec!["a", "b"], 1),
            (format!("{long}\nb\n"), vec!["b"], 1),
            (format!("a\n{long}\n"), vec!["a"], 1),
            (format!("a\n{long}"), vec!["a"], 1),
            (format!("a\n{at_limit}\nb"), vec!["a", at_limit.as_str(), "b"], 0),
            ("a\n[[[[1]]]]\nb\n".into(), vec!["a", "b"], 1),
            ("[0,0,0,0,0,0,0,0,0,0,0,0]\n[1]\n".into(), vec!["[1]"], 1),
            (format!("{long}\n{long}\n[[[[]]]]\n"), vec![], 3),
        ];
        for (content, want, skipped) in table {
            let (forwards, n) = forwards_of(content.as_bytes(), limits);
            assert_eq!((forwards, n), (want.iter().map(|s| s.to_string()).collect(), skipped));
            let (mut backwards, n) = backwards_within(content.as_bytes(), limits);
            backwards.reverse();
            assert_eq!((backwards, n), (want.iter().map(|s| s.to_string()).collect(), skipped));
        }
    }

    #[test]
    fn forwards_reads_what_backwards_reads() {
        for content in [&b""[..], b"a\n", b"a\nb\n", b"a\nb", b"\n", b"a\n\nb\n"] {
            let (forwards, _) = forwards_of(content, READ);
            let mut backwards = lines_of(content);
            backwards.reverse();
            assert_eq!(forwards, backwards, "{:?}", String::from_utf8_lossy(content));
        }
    }

    #[test]
    fn a_line_over_the_read_bounds_is_not_parsed() {
        let deep = format!(r#"{{"type":"note","data":{}1{}}}"#, "[".repeat(100), "]".repeat(100));
        assert!(parse_line(deep.as_bytes()).is_none());
        let wide = format!(r#"{{"type":"note","data":[{}0]}}"#, "0,".repeat(200_000));
        assert!(parse_line(wide.as_bytes()).is_none());
        assert!(parse_line(br#"{"type":"note","data":[[[1]]]}"#).is_some());
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
