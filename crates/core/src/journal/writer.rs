//! Appending to the journal: stamp, write one line, sync, and only then report
//! the event as written.
//!
//! Invariants: every line in the file is one whole event followed by `\n`;
//! `seq` grows by one per event; an event is durable (fdatasync) before
//! [`Journal::append`] returns; every line is within what a reader takes
//! ([`super::READ`]), so no event is written that readers would pass over.
//! A torn last line found at open (a crash in the middle of a write that was
//! never acknowledged) is moved aside to a file of its own and cut off, so
//! the journal stays whole and nothing is thrown away; opening reads only
//! the blocks that torn line lies in.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value};

use super::kind::EventKind;
use super::reader::{parse_line, Backwards};

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("journal {path}: a {kind} event of {bytes} bytes is not written: it is {over}")]
    TooLarge { path: PathBuf, kind: String, bytes: usize, over: super::scan::Over },
}

/// The open journal of one individual, held by the kernel alone.
pub struct Journal {
    path: PathBuf,
    file: File,
    next_seq: u64,
    /// The files of the owner lines this journal took in since it was
    /// opened, the latest [`OWNER_FILES_KEPT`].
    owner_files: std::collections::VecDeque<String>,
}

/// How many owner files a journal remembers having taken in.
const OWNER_FILES_KEPT: usize = 1024;

impl Journal {
    /// Opens (or creates) the journal at `path`, mending a torn last line.
    /// No link is followed in its last two parts (`memory/journal.jsonl`,
    /// which a body could have left with the cage off: `ELOOP`), and only a
    /// regular file is taken ([`super::open_file`]).
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        let io_err = |source| JournalError::Io { path: path.to_owned(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let mut file = super::open_file(path, super::Access::Append).map_err(io_err)?;
        set_aside_torn_tail(path, &mut file).map_err(io_err)?;
        let last_seq = last_seq(&file).map_err(io_err)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            next_seq: last_seq + 1,
            owner_files: Default::default(),
        })
    }

    /// Whether this journal took in the line of owner file `name` since it
    /// was opened (lines from before are the start's: see the supervisor).
    pub fn holds_owner_file(&self, name: &str) -> bool {
        self.owner_files.iter().any(|n| n == name)
    }

    /// The `seq` the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Stamps `event` (which must hold `type`) with time, seq and `commit`,
    /// appends it and syncs. Returns the stamped event's `seq`.
    pub fn append(
        &mut self,
        commit: &str,
        event: &Map<String, Value>,
    ) -> Result<u64, JournalError> {
        let seq = self.next_seq;
        let line = stamp(event, seq, commit, SystemTime::now());
        if let Err(over) = super::scan::scan(line.as_bytes(), &super::READ) {
            let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
            let (path, bytes) = (self.path.clone(), line.len());
            return Err(JournalError::TooLarge { path, kind, bytes, over });
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let result = self.file.write_all(&bytes).and_then(|()| self.file.sync_data());
        if let Err(source) = result {
            // A partial write may sit at the end now; cut it so the next append
            // starts on a clean line, as a fresh open would.
            let _ = set_aside_torn_tail(&self.path, &mut self.file);
            return Err(JournalError::Io { path: self.path.clone(), source });
        }
        self.next_seq += 1;
        if event.get("type").and_then(Value::as_str) == Some(EventKind::OwnerLine.name()) {
            let name = event.get("file").and_then(Value::as_str).unwrap_or_default();
            if self.owner_files.len() >= OWNER_FILES_KEPT {
                self.owner_files.pop_front();
            }
            self.owner_files.push_back(name.to_owned());
        }
        crate::crash::point("journal.synced");
        Ok(seq)
    }

    /// Appends an event the kernel (or the owner's client) writes itself:
    /// `{"type": kind, ...fields}`.
    pub fn append_kernel(
        &mut self,
        commit: &str,
        kind: EventKind,
        fields: Value,
    ) -> Result<u64, JournalError> {
        let mut event = Map::new();
        event.insert("type".into(), Value::String(kind.name().into()));
        if let Value::Object(rest) = fields {
            for (k, v) in rest {
                if k != "type" {
                    event.insert(k, v);
                }
            }
        }
        self.append(commit, &event)
    }
}

/// The journal line for `event`: `type`, `ts`, `seq`, `commit` first, then
/// the event's own fields in the order it gave them.
pub fn stamp(event: &Map<String, Value>, seq: u64, commit: &str, now: SystemTime) -> String {
    let mut out = Map::new();
    out.insert("type".into(), event.get("type").cloned().unwrap_or(Value::Null));
    out.insert("ts".into(), Value::String(humantime::format_rfc3339_millis(now).to_string()));
    out.insert("seq".into(), Value::from(seq));
    out.insert("commit".into(), Value::String(commit.to_owned()));
    for (k, v) in event {
        if !matches!(k.as_str(), "type" | "ts" | "seq" | "commit") {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out).to_string()
}

/// The `seq` of the last whole event, 0 for none.
fn last_seq(file: &File) -> io::Result<u64> {
    let mut lines = Backwards::new(file.try_clone()?)?;
    while let Some(line) = lines.next_line()? {
        if let Some(event) = parse_line(&line) {
            return Ok(event.seq);
        }
    }
    Ok(0)
}

/// If the file does not end in `\n`, the bytes after the last `\n` are a
/// write a crash cut short. They go to `<journal>.torn-<unix-ms>` and the
/// journal is truncated to its last whole line. The last `\n` is looked for
/// block by block from the end, and the torn bytes are copied as a stream:
/// nothing of the journal is held whole.
fn set_aside_torn_tail(path: &Path, file: &mut File) -> io::Result<()> {
    const BLOCK: u64 = 64 * 1024;
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(());
    }
    let mut block = vec![0; BLOCK as usize];
    let mut end = len;
    let keep = loop {
        let start = end.saturating_sub(BLOCK);
        let piece = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(piece)?;
        if end == len && piece.last() == Some(&b'\n') {
            return Ok(());
        }
        if let Some(i) = memchr::memrchr(b'\n', piece) {
            break start + i as u64 + 1;
        }
        if start == 0 {
            break 0;
        }
        end = start;
    };
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let aside = path.with_extension(format!("jsonl.torn-{ms}"));
    // A new file only: a link left at that name (memory/ is the body's) is
    // not followed (EEXIST).
    let mut out = OpenOptions::new().write(true).create_new(true).open(&aside)?;
    file.seek(SeekFrom::Start(keep))?;
    io::copy(&mut (&*file).take(len - keep), &mut out)?;
    out.sync_all()?;
    file.set_len(keep)?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn stamps_in_order_and_numbers_events() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("memory/journal.jsonl");
        let mut j = Journal::open(&path).expect("a fresh journal opens, making its directory");
        let ev = obj(serde_json::json!({"type":"reply","text":"hi"}));
        assert_eq!(j.append("c0ffee", &ev).ok(), Some(1));
        assert_eq!(j.append("c0ffee", &ev).ok(), Some(2));
        drop(j);
        let j = Journal::open(&path).expect("the journal just written opens again");
        assert_eq!(j.next_seq(), 3);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let first = text.lines().next().unwrap_or_default();
        assert!(first.starts_with(r#"{"type":"reply","ts":""#), "{first}");
        assert!(first.ends_with(r#","seq":1,"commit":"c0ffee","text":"hi"}"#), "{first}");
    }

    #[test]
    fn remembers_the_owner_lines_it_took_in() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let mut j = Journal::open(&dir.path().join("j.jsonl")).expect("a fresh journal opens");
        let line = obj(serde_json::json!({"type":"owner.line","file":"1.txt","text":"hi"}));
        j.append("c", &line).expect("an owner line is appended");
        j.append("c", &obj(serde_json::json!({"type":"reply","text":"2.txt"})))
            .expect("a reply is appended");
        assert!(j.holds_owner_file("1.txt"));
        assert!(!j.holds_owner_file("2.txt"), "only owner lines count");
    }

    #[test]
    fn torn_tail_is_set_aside_and_numbering_goes_on() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "{\"type\":\"reply\",\"seq\":7}\n{\"type\":\"rep")
            .unwrap_or_default();
        let mut j = Journal::open(&path).expect("a journal with a torn tail still opens");
        assert_eq!(j.next_seq(), 8);
        let ev = obj(serde_json::json!({"type":"turn.ended"}));
        assert_eq!(j.append("c", &ev).ok(), Some(8));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().all(|l| parse_line(l.as_bytes()).is_some()), "{text}");
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".torn-"))
            .collect();
        assert_eq!(aside.len(), 1);
        let kept = std::fs::read_to_string(aside[0].path()).unwrap_or_default();
        assert_eq!(kept, "{\"type\":\"rep");
    }

    /// A torn line of several blocks, and one that is the whole file, are
    /// set aside whole.
    #[test]
    fn a_long_torn_tail_is_set_aside_whole() {
        let long = "x".repeat(300_000);
        for (content, kept) in
            [(format!("{{\"type\":\"reply\",\"seq\":7}}\n{long}"), 1), (long.clone(), 0)]
        {
            let dir = tempfile::tempdir().expect("a temporary directory can be made");
            let path = dir.path().join("journal.jsonl");
            std::fs::write(&path, &content).expect("the journal is written");
            let j = Journal::open(&path).expect("it opens");
            assert_eq!(j.next_seq(), if kept == 1 { 8 } else { 1 });
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(text.lines().count(), kept);
            let aside: Vec<_> = std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains(".torn-"))
                .collect();
            assert_eq!(aside.len(), 1);
            assert_eq!(std::fs::read_to_string(aside[0].path()).unwrap_or_default(), long);
        }
    }

    /// An event that stamped would be over what readers take is refused,
    /// and nothing is written.
    #[test]
    fn an_event_over_the_read_bounds_is_not_written() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path).expect("a fresh journal opens");
        let wide: Vec<Value> = (0..200_000).map(Value::from).collect();
        let ev = obj(serde_json::json!({"type":"note","kind":"k","data":wide}));
        let refused = j.append("c", &ev);
        assert!(matches!(refused, Err(JournalError::TooLarge { .. })), "{refused:?}");
        assert_eq!(std::fs::metadata(&path).map(|m| m.len()).ok(), Some(0));
        assert_eq!(j.next_seq(), 1);
    }
}
