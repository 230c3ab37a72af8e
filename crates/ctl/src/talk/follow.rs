//! The client's reading of the journal: the recent past from the end of the
//! file, then what is appended, woken by inotify.
//!
//! Invariants: attaching reads only from the end, within a byte budget, so
//! its cost does not depend on the journal's size; following reads each
//! appended byte once, from the offset where the look back ended, and hands
//! out only whole lines (a partial last line waits for its `\n`); the only
//! wake-ups are the journal's own changes (no polling).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use inotify::{EventMask, Inotify, WatchMask};

use super::turns::Recent;
use super::Wake;
use crate::journal::{open_file, parse_line, Access, Backwards, Event, EventKind};

/// The type of a journal line, read without parsing it, when the line
/// begins with it as the kernel writes every line (`{"type":"reply",...`);
/// `None` for any other line, which is then parsed whole.
pub fn leading_type(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(br#"{"type":""#)?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    (rest[end] == b'"').then_some(&rest[..end])
}

/// Reads the journal at `path` backwards into `recent` until it has what it
/// needs, or `budget` bytes were read. `render` makes each event's entry.
/// Returns the journal's length when read: where following starts.
pub fn look_back<T>(
    path: &Path,
    recent: &mut Recent<T>,
    budget: u64,
    render: impl Fn(&Event) -> Option<T>,
) -> io::Result<u64> {
    let file = match open_file(path, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let end = file.metadata()?.len();
    let mut lines = Backwards::at(file, end);
    let mut read = 0u64;
    while recent.wants_more() && read < budget {
        let Some(line) = lines.next_line()? else { break };
        read += line.len() as u64 + 1;
        let kind = leading_type(&line).and_then(EventKind::parse_bytes);
        if kind.is_some_and(super::turns::passed_over) {
            continue;
        }
        if let Some(event) = parse_line(&line) {
            recent.take(&event, render(&event));
        }
    }
    Ok(end)
}

/// Splits `bytes` appended after `partial` into whole lines; what follows
/// the last `\n` stays in `partial` until its end arrives.
pub fn whole_lines(partial: &mut Vec<u8>, bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    let mut rest = bytes;
    while let Some(cut) = rest.iter().position(|&b| b == b'\n') {
        let mut line = std::mem::take(partial);
        line.extend_from_slice(&rest[..cut]);
        lines.push(line);
        rest = &rest[cut + 1..];
    }
    partial.extend_from_slice(rest);
    lines
}

/// Following the journal from an offset.
pub struct Tail {
    path: PathBuf,
    file: Option<File>,
    /// Bytes consumed so far, the partial line included.
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    /// Follows the journal at `path` from byte `offset`.
    pub fn at(path: PathBuf, offset: u64) -> Self {
        Self { path, file: None, offset, partial: Vec::new() }
    }

    /// The whole events appended since the last call, oldest first.
    pub fn read_new(&mut self) -> io::Result<Vec<Event>> {
        self.reopen_if_replaced()?;
        let Some(file) = self.file.as_mut() else { return Ok(Vec::new()) };
        let len = file.metadata()?.len();
        if len < self.offset {
            // The kernel cut a torn last line off at its start: the partial
            // line we hold was that line, and a new one will take its place.
            self.offset = self.offset.saturating_sub(self.partial.len() as u64).min(len);
            self.partial.clear();
        }
        if len == self.offset {
            return Ok(Vec::new());
        }
        let mut bytes = Vec::with_capacity((len - self.offset) as usize);
        file.seek(SeekFrom::Start(self.offset))?;
        file.take(len - self.offset).read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        let lines = whole_lines(&mut self.partial, &bytes);
        Ok(lines.iter().filter_map(|l| parse_line(l)).collect())
    }

    /// Opens the journal once it exists, and again from its start when
    /// another file took its name.
    fn reopen_if_replaced(&mut self) -> io::Result<()> {
        let on_disk = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let same = match &self.file {
            Some(f) => f.metadata()?.ino() == on_disk.ino(),
            None => false,
        };
        if !same {
            let was_open = self.file.is_some();
            self.file = Some(open_file(&self.path, Access::Read)?);
            if was_open {
                self.offset = 0;
                self.partial.clear();
            }
        }
        Ok(())
    }
}

/// Following the reply in progress ([`teneral_core::live`]): the words a
/// body streams before its reply is journaled whole.
#[derive(Debug, Default)]
pub struct LiveReply {
    /// Bytes of whole lines read so far.
    offset: u64,
    /// The words read so far.
    pub text: String,
}

impl LiveReply {
    /// Forgets what was read: the journal has the reply (or the turn ended),
    /// and the kernel emptied the file before it journaled that.
    pub fn over(&mut self) {
        self.offset = 0;
        self.text.clear();
    }

    /// Reads what was appended to the file of `home` since the last call;
    /// true when the text changed. A file shorter than what was read was
    /// emptied: the words so far are over.
    pub fn read(&mut self, home: &Path) -> bool {
        let path = home.join(teneral_core::live::LIVE_PATH);
        let Ok(mut file) = open_file(&path, Access::Read) else {
            let had = !self.text.is_empty();
            self.over();
            return had;
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or_default();
        let mut changed = false;
        if len < self.offset {
            changed = !self.text.is_empty();
            self.over();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return changed;
        }
        let mut bytes = Vec::new();
        // Bounded: the kernel keeps the file within its size.
        if file.take(teneral_core::live::MAX_BYTES).read_to_end(&mut bytes).is_err() {
            return changed;
        }
        let (text, used) = teneral_core::live::read_texts(&bytes);
        self.offset += used as u64;
        self.text.push_str(&text);
        changed || !text.is_empty()
    }
}

/// Starts watching the journal of `home`: on each change a [`Wake::Journal`]
/// goes to `tx`, unless one is already waiting (`pending`), so wake-ups never
/// pile up. A new kernel status (`.teneral/status`, replaced by a rename)
/// wakes the same way: it says when a step of the gate starts; and so does
/// each write to the reply in progress ([`LiveReply`]). The watches are in place when this returns; the thread ends when
/// `tx`'s receiver is gone and the next change comes.
pub fn watch(home: &Path, tx: Sender<Wake>, pending: Arc<AtomicBool>) -> io::Result<()> {
    let inotify = Inotify::init()?;
    let memory = home.join("memory");
    let name = Path::new(crate::journal::JOURNAL_PATH).file_name().map(|n| n.to_owned());
    let dir_mask = WatchMask::MODIFY | WatchMask::CREATE | WatchMask::MOVED_TO;
    let mut watching = inotify.watches().add(&memory, dir_mask).is_ok();
    if !watching {
        // No memory/ yet: wait for it to be made.
        inotify.watches().add(home, WatchMask::CREATE | WatchMask::MOVED_TO)?;
    }
    let status_path = Path::new(teneral_core::status::STATUS_PATH);
    let status_name = status_path.file_name().map(|n| n.to_owned());
    let live_name = Path::new(teneral_core::live::LIVE_PATH).file_name().map(|n| n.to_owned());
    let status_mask = WatchMask::MOVED_TO | WatchMask::CLOSE_WRITE;
    let status_wd =
        status_path.parent().and_then(|d| inotify.watches().add(home.join(d), status_mask).ok());
    let mut inotify = inotify;
    let home = home.to_owned();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            let Ok(events) = inotify.read_events_blocking(&mut buf) else { return };
            let (mut changed, mut lost) = (false, false);
            for event in events {
                let name_is = |n: Option<&std::ffi::OsStr>| event.name.is_some() && event.name == n;
                if status_wd.as_ref() == Some(&event.wd) {
                    changed |= name_is(status_name.as_deref()) || name_is(live_name.as_deref());
                    continue;
                }
                changed |= name_is(name.as_deref()) || name_is(Some("memory".as_ref()));
                lost |= event.mask.contains(EventMask::IGNORED);
            }
            if lost {
                // memory/ (or the individual) was removed: wait for it to come
                // back, or end when the individual itself is gone.
                watching = false;
                if inotify.watches().add(&home, WatchMask::CREATE | WatchMask::MOVED_TO).is_err() {
                    return;
                }
            }
            if !watching && inotify.watches().add(&memory, dir_mask).is_ok() {
                watching = true;
                changed = true;
            }
            if changed && !pending.swap(true, Ordering::AcqRel) && tx.send(Wake::Journal).is_err() {
                return;
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn whole_lines_keep_the_partial_tail() {
        type Step<'a> = (&'a [u8], &'a [&'a [u8]], &'a [u8]);
        let mut partial = Vec::new();
        let table: &[Step] = &[
            (b"", &[], b""),
            (b"a\nb", &[b"a"], b"b"),
            (b"c", &[], b"bc"),
            (b"\n", &[b"bc"], b""),
            (b"d\ne\n", &[b"d", b"e"], b""),
            (b"\n\nf", &[b"", b""], b"f"),
        ];
        for (bytes, lines, left) in table {
            let got = whole_lines(&mut partial, bytes);
            assert_eq!(got, lines.iter().map(|l| l.to_vec()).collect::<Vec<_>>());
            assert_eq!(partial, *left);
        }
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the journal opens for appending");
        f.write_all(bytes).expect("the journal takes the bytes");
    }

    fn kinds(events: io::Result<Vec<Event>>) -> Vec<String> {
        events.expect("the journal reads").into_iter().map(|e| e.kind).collect()
    }

    #[test]
    fn tail_follows_appends_and_torn_lines() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("journal.jsonl");
        let mut tail = Tail::at(path.clone(), 0);
        assert_eq!(kinds(tail.read_new()), Vec::<String>::new(), "no journal yet");
        append(&path, b"{\"type\":\"reply\"}\n{\"type\":\"turn.");
        assert_eq!(kinds(tail.read_new()), ["reply"]);
        assert_eq!(kinds(tail.read_new()), Vec::<String>::new());
        append(&path, b"ended\"}\n");
        assert_eq!(kinds(tail.read_new()), ["turn.ended"]);

        // A torn line cut off by the kernel and written again whole.
        append(&path, b"{\"type\":\"rep");
        assert_eq!(kinds(tail.read_new()), Vec::<String>::new());
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or_default();
        let f = std::fs::OpenOptions::new().write(true).open(&path);
        f.and_then(|f| f.set_len(len - 12)).expect("the journal can be cut short");
        assert_eq!(kinds(tail.read_new()), Vec::<String>::new());
        append(&path, b"{\"type\":\"stimulus\"}\n");
        assert_eq!(kinds(tail.read_new()), ["stimulus"]);
    }

    #[test]
    fn leading_type_table() {
        let table: &[(&[u8], Option<&[u8]>)] = &[
            (br#"{"type":"note","ts":"x"}"#, Some(b"note")),
            (br#"{"type":"reply"}"#, Some(b"reply")),
            (br#"{"type":"no\"te"}"#, None),
            (br#"{"ts":"x","type":"note"}"#, None),
            (br#"{"type": "note"}"#, None),
            (br#"{"type":"note"#, None),
            (b"", None),
        ];
        for (line, want) in table {
            assert_eq!(leading_type(line), *want, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn look_back_passes_over_notes_unparsed() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("journal.jsonl");
        append(&path, b"{\"type\":\"owner.line\"}\n{\"type\":\"reply\"}\n");
        append(&path, "{\"type\":\"note\",\"data\":1}\n".repeat(1000).as_bytes());
        let mut recent = Recent::new(1, 10);
        look_back(&path, &mut recent, 1 << 20, |e| Some(e.kind.clone())).expect("read");
        assert_eq!(recent.into_entries(), ["owner.line", "reply"], "no note taken");
    }

    #[test]
    fn look_back_starts_following_at_the_end() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("journal.jsonl");
        let mut recent: Recent = Recent::new(1, 10);
        assert_eq!(look_back(&path, &mut recent, 1 << 20, |_| None).ok(), Some(0));
        append(&path, b"{\"type\":\"owner.line\"}\n{\"type\":\"reply\"}\n");
        let mut recent = Recent::new(1, 10);
        let end = look_back(&path, &mut recent, 1 << 20, |e| Some(e.kind.clone()));
        assert_eq!(end.ok(), Some(39));
        assert_eq!(recent.into_entries(), ["owner.line", "reply"]);
    }
}
