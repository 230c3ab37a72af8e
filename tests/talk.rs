//! The plain talk client against a journal the test writes itself, as the
//! kernel and a body would: history on attach, piped lines and their
//! replies, the wait limit, torn lines, `/stop`, and sanitizing.
//!
//! The client runs in-process through `teneralctl::talk::session`, with the
//! test's input and output; a thread of the test plays the kernel and body.

use std::fs::{self, OpenOptions};
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use teneral_core::owner::OWNER_DIR;
use teneralctl::talk::{session, TalkOptions};

/// The same clients against a running kernel on the stand-in.
mod kernel;
/// The client at a terminal: history, then the conversation as it goes.
mod terminal;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// A generous bound for liveness; nothing here should take near it.
const LIVENESS: Duration = Duration::from_secs(20);

/// The journal of a test individual, written as the kernel writes it.
struct Journal {
    path: PathBuf,
    seq: u64,
}

impl Journal {
    fn new(home: &Path) -> Self {
        let path = home.join("memory/journal.jsonl");
        fs::create_dir_all(home.join("memory")).expect("memory/ can be made in the test home");
        Self { path, seq: 0 }
    }

    /// The bytes of one stamped event, with its `\n`.
    fn line(&mut self, kind: &str, fields: Value) -> Vec<u8> {
        self.seq += 1;
        let ts = "2026-11-30T07:00:00.000Z";
        let mut event = json!({"type": kind, "ts": ts, "seq": self.seq, "commit": COMMIT});
        if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
            event.extend(fields);
        }
        let mut bytes = serde_json::to_vec(&event).expect("a JSON value serializes");
        bytes.push(b'\n');
        bytes
    }

    fn raw(&self, bytes: &[u8]) {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("the journal opens for appending");
        f.write_all(bytes).expect("the journal takes the line");
    }

    fn add(&mut self, kind: &str, fields: Value) {
        let line = self.line(kind, fields);
        self.raw(&line);
    }

    /// One whole exchange: an owner line, a tool call, a reply, the end.
    fn exchange(&mut self, n: usize) {
        self.add(
            "owner.line",
            json!({"file": format!("{n:020}-1-00000000.txt"), "text": format!("question {n}")}),
        );
        self.add(
            "tool.call",
            json!({"id": format!("c{n}"), "name": "bash", "input": {"command": "ls"}}),
        );
        self.add("tool.result", json!({"id": format!("c{n}"), "output": "ok"}));
        self.add("reply", json!({"text": format!("answer {n}")}));
        self.add("turn.ended", json!({}));
    }

    /// Takes in the owner line in `file` as a body does, then answers it.
    fn answer(&mut self, home: &Path, file: &str, reply: &str) {
        let text = fs::read_to_string(home.join(OWNER_DIR).join(file)).unwrap_or_default();
        self.add("owner.line", json!({"file": file, "text": text}));
        let _ = fs::remove_file(home.join(OWNER_DIR).join(file));
        self.add("reply", json!({"text": reply}));
        self.add("turn.ended", json!({}));
    }
}

/// Output shared between the client and the test.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().map(|v| v.clone()).unwrap_or_default()).into_owned()
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Run {
    status: i32,
    out: String,
    err: String,
}

/// Runs the client with `input` from a pipe.
fn talk(home: &Path, input: &str, wait: Duration) -> Run {
    talk_into(home, input, wait, Shared::default())
}

fn talk_into(home: &Path, input: &str, wait: Duration, mut out: Shared) -> Run {
    let opts = TalkOptions { home: home.to_owned(), wait, history: 3 };
    let mut err = Vec::new();
    let input = Cursor::new(input.as_bytes().to_vec());
    let status = session(&opts, input, false, &mut out, &mut err).expect("talk runs to its end");
    Run { status, out: out.text(), err: String::from_utf8_lossy(&err).into_owned() }
}

/// The names in the owner directory ending in `ext`, sorted.
fn owner_files(home: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(home.join(OWNER_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext) && !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Waits until an owner file ending in `ext` other than those in `seen` is there.
fn await_owner_file(home: &Path, ext: &str, seen: &[String]) -> String {
    let start = Instant::now();
    loop {
        if let Some(name) = owner_files(home, ext).into_iter().find(|n| !seen.contains(n)) {
            return name;
        }
        assert!(start.elapsed() < LIVENESS, "no new {ext} file in {OWNER_DIR}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Holds the kernel's lock, as a running kernel does, while it lives.
fn hold_kernel_lock(home: &Path) -> teneral_core::lock::Lock {
    teneral_core::lock::acquire(home).expect("no one else holds the kernel lock of a fresh home")
}

fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory can be made")
}

#[test]
fn no_input_prints_the_last_exchanges_and_exits_0() {
    let dir = home();
    let mut journal = Journal::new(dir.path());
    for n in 1..=6 {
        journal.exchange(n);
    }
    journal.add("note", json!({"kind": "plan", "data": {"secret": "not shown"}}));
    let run = talk(dir.path(), "", Duration::from_secs(5));
    assert_eq!(run.status, 0, "{}", run.err);
    for n in 4..=6 {
        assert!(run.out.contains(&format!("› question {n}\n")), "{}", run.out);
        assert!(run.out.contains(&format!("  answer {n}\n")), "{}", run.out);
    }
    assert!(!run.out.contains("question 3"), "only the last three: {}", run.out);
    assert!(run.out.contains("  [bash] command: ls\n"), "{}", run.out);
    assert!(!run.out.contains("not shown"), "notes are not shown: {}", run.out);
    assert!(run.err.contains("teneral is not running"), "{}", run.err);
    assert!(owner_files(dir.path(), "").is_empty(), "nothing was sent");
}

#[test]
fn no_input_on_a_new_individual_prints_nothing() {
    let dir = home();
    let run = talk(dir.path(), "", Duration::from_secs(5));
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(run.out, "");
}

#[test]
fn a_piped_line_is_sent_and_its_reply_printed() {
    let dir = home();
    let home = dir.path().to_owned();
    let mut journal = Journal::new(&home);
    journal.exchange(1);
    let _lock = hold_kernel_lock(&home);
    let kernel = thread::spawn(move || {
        let file = await_owner_file(&home, ".txt", &[]);
        journal.answer(&home, &file, "the reply to you");
        file
    });
    let run = talk(dir.path(), "What are you working on?\n", Duration::from_secs(30));
    let file = kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(file.ends_with(".txt"), "{file}");
    assert!(run.out.contains("› What are you working on?\n"), "{}", run.out);
    assert!(run.out.contains("  the reply to you\n"), "{}", run.out);
    assert!(!run.out.contains("question 1"), "no history when piped: {}", run.out);
    assert!(!run.err.contains("not running"), "{}", run.err);
}

/// The words of a reply being written reach only the full client: piped,
/// the reply is printed once, whole, when the journal has it.
#[test]
fn piped_a_streamed_reply_is_printed_whole_only() {
    let dir = home();
    let home = dir.path().to_owned();
    let mut journal = Journal::new(&home);
    journal.exchange(1);
    fs::create_dir_all(home.join(".teneral")).expect(".teneral/ can be made");
    let _lock = hold_kernel_lock(&home);
    let kernel = thread::spawn(move || {
        let file = await_owner_file(&home, ".txt", &[]);
        let text = fs::read_to_string(home.join(OWNER_DIR).join(&file)).unwrap_or_default();
        journal.add("owner.line", json!({"file": file, "text": text}));
        let _ = fs::remove_file(home.join(OWNER_DIR).join(&file));
        for words in ["the str", "eamed rep"] {
            teneral_core::live::append(&home, words).expect("the reply in progress is kept");
            thread::sleep(Duration::from_millis(100));
        }
        teneral_core::live::clear(&home).expect("the reply in progress is emptied");
        journal.add("reply", json!({"text": "the streamed reply, whole"}));
        journal.add("turn.ended", json!({}));
    });
    let run = talk(dir.path(), "stream it\n", Duration::from_secs(30));
    kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(run.out.matches("the str").count(), 1, "{}", run.out);
    assert!(run.out.contains("  the streamed reply, whole\n"), "{}", run.out);
}

#[test]
fn piped_lines_go_one_at_a_time() {
    let dir = home();
    let home = dir.path().to_owned();
    let mut journal = Journal::new(&home);
    let _lock = hold_kernel_lock(&home);
    let kernel = thread::spawn(move || {
        let first = await_owner_file(&home, ".txt", &[]);
        thread::sleep(Duration::from_millis(200));
        let waiting = owner_files(&home, ".txt");
        journal.answer(&home, &first, "first reply");
        let second = await_owner_file(&home, ".txt", &[]);
        journal.answer(&home, &second, "second reply");
        waiting
    });
    let run = talk(dir.path(), "one\ntwo\n", Duration::from_secs(30));
    let waiting = kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(waiting.len(), 1, "the second line waits for the first reply: {waiting:?}");
    let first = run.out.find("first reply").unwrap_or(usize::MAX);
    let second = run.out.find("› two").unwrap_or(0);
    assert!(first < second, "{}", run.out);
    assert!(run.out.contains("  second reply\n"), "{}", run.out);
}

#[test]
fn silence_past_the_wait_exits_1_and_says_what_to_check() {
    let dir = home();
    Journal::new(dir.path()).exchange(1);
    let started = Instant::now();
    let run = talk(dir.path(), "anyone there?\n", Duration::from_secs(1));
    assert_eq!(run.status, 1, "{}", run.err);
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(run.err.contains("teneral is not running"), "said once: {}", run.err);
    assert_eq!(run.err.matches("not running").count(), 1, "{}", run.err);
    assert!(run.err.contains("nothing was journaled for 1 s"), "{}", run.err);
    assert!(run.err.contains("systemctl --user status teneral"), "{}", run.err);
    let files = owner_files(dir.path(), ".txt");
    assert_eq!(files.len(), 1, "the line waits for the kernel");
    assert!(run.err.contains(&files[0]), "names the waiting file: {}", run.err);
    let text = fs::read_to_string(dir.path().join(OWNER_DIR).join(&files[0]));
    assert_eq!(text.ok().as_deref(), Some("anyone there?"));
}

#[test]
fn a_torn_line_is_printed_only_once_whole() {
    let dir = home();
    let home = dir.path().to_owned();
    let mut journal = Journal::new(&home);
    // A torn line at the end of what is read on attaching is passed over.
    journal.raw(br#"{"type":"reply","text":"torn before attach"#);
    journal.raw(b"\n");
    let out = Shared::default();
    let seen = out.clone();
    let _lock = hold_kernel_lock(&home);
    let kernel = thread::spawn(move || {
        let file = await_owner_file(&home, ".txt", &[]);
        journal.add("owner.line", json!({"file": file, "text": "hi"}));
        let line = journal.line("reply", json!({"text": "arrives in two pieces"}));
        let (head, rest) = line.split_at(line.len() / 2);
        journal.raw(head);
        thread::sleep(Duration::from_millis(300));
        let before = seen.text();
        journal.raw(rest);
        journal.add("turn.ended", json!({}));
        before
    });
    let run = talk_into(dir.path(), "hi\n", Duration::from_secs(30), out);
    let before = kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(!before.contains("two pieces"), "printed before it was whole: {before}");
    assert_eq!(run.out.matches("  arrives in two pieces\n").count(), 1, "{}", run.out);
    assert!(!run.out.contains("torn before"), "{}", run.out);
}

#[test]
fn piped_stop_interrupts_only_a_turn_in_progress() {
    // At rest: nothing is written.
    let dir = home();
    let mut journal = Journal::new(dir.path());
    journal.exchange(1);
    let lock = hold_kernel_lock(dir.path());
    let run = talk(dir.path(), "/stop\n", Duration::from_secs(5));
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(run.err.contains("at rest"), "{}", run.err);
    assert!(owner_files(dir.path(), "").is_empty(), "nothing sent at rest");
    drop(lock);

    // Not running: nothing is written either, even in the middle of a turn.
    journal.add("owner.line", json!({"file": "x.txt", "text": "long job"}));
    journal.add("tool.call", json!({"id": "c", "name": "bash", "input": {"command": "sleep 600"}}));
    let run = talk(dir.path(), "/stop\n", Duration::from_secs(5));
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(run.err.contains("no turn to stop"), "{}", run.err);
    assert!(owner_files(dir.path(), "").is_empty(), "nothing sent when not running");

    // Mid-turn with a kernel: an interrupt, then the wait for rest.
    let _lock = hold_kernel_lock(dir.path());
    let home = dir.path().to_owned();
    let kernel = thread::spawn(move || {
        let file = await_owner_file(&home, ".interrupt", &[]);
        let _ = fs::remove_file(home.join(OWNER_DIR).join(&file));
        journal.add("tool.result", json!({"id": "c", "output": "[interrupted]", "error": true}));
        journal.add("turn.interrupted", json!({}));
    });
    let run = talk(dir.path(), "/stop\n", Duration::from_secs(30));
    kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(run.out.contains("[interrupted by the owner]\n"), "{}", run.out);
    assert!(run.out.contains("  [failed] [interrupted]\n"), "{}", run.out);
    assert!(owner_files(dir.path(), ".txt").is_empty(), "/stop is never sent as text");
}

#[test]
fn control_characters_and_escapes_are_stripped() {
    let dir = home();
    let mut journal = Journal::new(dir.path());
    journal.add("owner.line", json!({"file": "a.txt", "text": "hi\u{1b}[2J"}));
    journal.add(
        "tool.call",
        json!({"id": "1", "name": "ba\u{7}sh", "input": {"command": "\u{1b}]0;owned\u{7}ls"}}),
    );
    journal.add(
        "reply",
        json!({"text": "\u{1b}[31mred\u{1b}[0m and\u{8}\r bell\u{7}\n\tindented \u{9b}1Aup"}),
    );
    journal.add("kernel.notice", json!({"text": "\u{1b}[1Afake\u{0}"}));
    journal.add("turn.ended", json!({}));
    let run = talk(dir.path(), "", Duration::from_secs(5));
    assert_eq!(run.status, 0, "{}", run.err);
    let bad: Vec<char> =
        run.out.chars().filter(|c| c.is_control() && !matches!(c, '\n' | '\t')).collect();
    assert!(bad.is_empty(), "control characters left: {bad:?} in {:?}", run.out);
    assert!(run.out.contains("› hi\n"), "{:?}", run.out);
    assert!(run.out.contains("  [bash] command: ls\n"), "{:?}", run.out);
    assert!(run.out.contains("  red and bell\n  \tindented up\n"), "{:?}", run.out);
    assert!(run.out.contains("[kernel] fake\n"), "{:?}", run.out);
}

#[test]
fn a_journal_that_does_not_exist_yet_is_followed_once_made() {
    let dir = home();
    let home = dir.path().to_owned();
    let _lock = hold_kernel_lock(&home);
    let kernel = thread::spawn(move || {
        let file = await_owner_file(&home, ".txt", &[]);
        // The first start of a new individual makes memory/ and the journal.
        Journal::new(&home).answer(&home, &file, "first words");
    });
    let run = talk(dir.path(), "are you there?\n", Duration::from_secs(30));
    kernel.join().expect("the kernel's side of the test did not fail");
    assert_eq!(run.status, 0, "{}", run.err);
    assert!(run.out.contains("  first words\n"), "{}", run.out);
}
