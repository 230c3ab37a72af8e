//! The event channel under attack: a foreign process, too many connections,
//! an over-long line, many connections of unterminated lines, answers left
//! unread, an event claiming the owner (in any case of its keys), a log line
//! carrying a newline, events that cost too much or come too fast. Each
//! must fail with its own refusal. The kernel is a real process: `teneral
//! run` on a temporary individual, or `teneral serve-events` (the same
//! channel, with the same bounds, admitting anyone) where the attack must
//! come from the test itself.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use teneral::events::MAX_LINE;
use teneral_core::commit::Commit;

use crate::common::*;

/// Who may talk on the channel: the body and what it starts, no one else.
mod admission;
/// What a body's events cost the kernel: bounded in bytes, depth, elements
/// and rate, and so every reader of the journal.
mod cost;

const SHORT: Duration = Duration::from_secs(20);
const MIB: usize = 1024 * 1024;

/// `teneral serve-events` on a temporary home; killed when dropped.
struct Served {
    child: Child,
    home: tempfile::TempDir,
    socket: PathBuf,
}

impl Served {
    fn start() -> Result<Self, Box<dyn std::error::Error>> {
        let home = tempfile::Builder::new().prefix("tnl-ch").tempdir()?;
        std::fs::create_dir_all(home.path().join("memory"))?;
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let socket = teneral::events::socket_path(home.path(), &Commit::parse(commit)?, "test")?;
        let log = std::fs::File::create(home.path().join("kernel.log"))?;
        let child = Command::new(teneral())
            .arg("serve-events")
            .arg("--socket")
            .arg(&socket)
            .arg("--home")
            .arg(home.path())
            .arg("--commit")
            .arg(commit)
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let served = Served { child, home, socket };
        let end = Instant::now() + SHORT;
        while !served.socket.exists() {
            if Instant::now() > end {
                return Err(format!("no socket after {SHORT:?}; log:\n{}", served.log()).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(served)
    }

    fn connect(&self) -> std::io::Result<UnixStream> {
        let stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(SHORT))?;
        Ok(stream)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("kernel.log")).unwrap_or_default()
    }

    fn journal(&self) -> String {
        std::fs::read_to_string(self.home.path().join("memory/journal.jsonl")).unwrap_or_default()
    }

    /// `VmRSS` and `VmHWM` of the serving process, in bytes.
    fn memory(&self) -> Result<(usize, usize), Box<dyn std::error::Error>> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| -> Option<usize> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        };
        Ok((field("VmRSS:").ok_or("no VmRSS")?, field("VmHWM:").ok_or("no VmHWM")?))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `line` and a newline, and reads one answer.
fn ask(stream: &mut UnixStream, line: &str) -> Result<Value, Box<dyn std::error::Error>> {
    stream.write_all(format!("{line}\n").as_bytes())?;
    answer(stream)
}

/// Reads one answer line.
fn answer(stream: &UnixStream) -> Result<Value, Box<dyn std::error::Error>> {
    let mut text = String::new();
    BufReader::new(stream).read_line(&mut text)?;
    Ok(serde_json::from_str(&text).map_err(|e| format!("{e}: {text:?}"))?)
}

fn error_of(answer: &Value) -> String {
    assert_eq!(answer["ok"], false, "a refusal: {answer}");
    answer["error"].as_str().unwrap_or_default().to_owned()
}

/// Whether the kernel closed the connection (EOF or reset on reading).
fn closed(stream: &mut UnixStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0) | Err(_))
}

#[test]
fn a_connection_past_the_most_is_refused_and_closed() -> TestResult {
    let served = Served::start()?;
    let mut open = Vec::new();
    for i in 0..8 {
        let mut stream = served.connect()?;
        let got = ask(&mut stream, &format!(r#"{{"type":"log","text":"connection {i}"}}"#))?;
        assert_eq!(got["ok"], true, "connection {i}: {got}");
        open.push(stream);
    }
    let mut ninth = served.connect()?;
    let error = error_of(&answer(&ninth)?);
    assert!(error.contains("already has 8 connections open, its most"), "{error}");
    assert!(closed(&mut ninth), "the ninth connection is closed");
    assert!(served.log().contains("a connection from pid "), "logged:\n{}", served.log());

    drop(open.pop());
    std::thread::sleep(Duration::from_millis(200));
    let mut again = served.connect()?;
    let got = ask(&mut again, r#"{"type":"log","text":"a freed place is taken"}"#)?;
    assert_eq!(got["ok"], true, "{got}");
    Ok(())
}

#[test]
fn an_over_long_line_is_refused_and_closed() -> TestResult {
    let served = Served::start()?;
    let mut stream = served.connect()?;
    let mut writer = stream.try_clone()?;
    let sender = std::thread::spawn(move || {
        let piece = vec![b'x'; MIB];
        let mut sent = 0;
        while sent <= MAX_LINE {
            if writer.write_all(&piece).is_err() {
                break;
            }
            sent += piece.len();
        }
        sent
    });
    let error = error_of(&answer(&stream)?);
    assert!(error.contains(&format!("an event is at most {MAX_LINE} bytes")), "{error}");
    assert!(closed(&mut stream), "the connection is closed");
    let sent = sender.join().map_err(|_| "the sender panicked")?;
    assert!(sent <= MAX_LINE + 2 * MIB, "the kernel stopped reading soon after the bound: {sent}");
    Ok(())
}

#[test]
fn a_hundred_connections_of_unfinished_lines_stay_within_64_mib() -> TestResult {
    const CONNECTIONS: usize = 100;
    let seated = teneral::events::Bounds::CHANNEL.connections;
    let served = Served::start()?;
    // Warm up: the first line of a connection sets up what every later one uses.
    let mut first = served.connect()?;
    assert_eq!(ask(&mut first, r#"{"type":"log","text":"warm"}"#)?["ok"], true);
    drop(first);
    std::thread::sleep(Duration::from_millis(300));
    let (idle, _) = served.memory()?;

    // Every connection is made, and every one past the seats refused, before
    // any line is written: a seated one closed by a bound would give its
    // seat to a connection the kernel had not yet taken, however loaded the
    // machine is.
    let piece: Arc<Vec<u8>> = Arc::new(vec![b'x'; MIB]);
    let answers = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    for _ in 0..CONNECTIONS {
        let stream = served.connect()?;
        let (piece, answers) = (Arc::clone(&piece), Arc::clone(&answers));
        let (refused, go) = (Arc::clone(&refused), Arc::clone(&go));
        attackers.push(std::thread::spawn(move || {
            let mut writer = stream;
            let mut reader = BufReader::new(writer.try_clone().ok()?);
            let _ = writer.set_read_timeout(Some(Duration::from_millis(50)));
            let mut text = String::new();
            while !go.load(Ordering::SeqCst) {
                match reader.read_line(&mut text) {
                    Ok(_) if !text.is_empty() => {
                        refused.fetch_add(1, Ordering::SeqCst);
                        answers.lock().unwrap_or_else(|p| p.into_inner()).push(text);
                        return Some(writer);
                    }
                    Ok(_) => return Some(writer), // closed with no answer
                    Err(_) => continue,           // nothing yet
                }
            }
            for _ in 0..32 {
                if writer.write_all(&piece).is_err() {
                    break;
                }
            }
            let _ = writer.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = reader.read_line(&mut text);
            answers.lock().unwrap_or_else(|p| p.into_inner()).push(text);
            Some(writer) // kept open until measured
        }));
    }
    let end = Instant::now() + SHORT;
    while refused.load(Ordering::SeqCst) < CONNECTIONS - seated && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    go.store(true, Ordering::SeqCst);
    let mut streams = Vec::new();
    for attacker in attackers {
        streams.push(attacker.join().map_err(|_| "an attacker panicked")?);
    }
    let (during, _) = served.memory()?;
    drop(streams);
    std::thread::sleep(Duration::from_millis(300));
    let (after, peak) = served.memory()?;

    let answers = answers.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let count = |what: &str| answers.iter().filter(|a| a.contains(what)).count();
    let seats = count("connections open, its most");
    // Each seated connection is closed by one of the two bounds: the whole
    // kernel's (when the seated ones write at once) or its own line's
    // (when the machine's load lets them write one after another).
    let buffered = count("bytes of unfinished lines") + count("an event is at most");
    eprintln!(
        "idle {} KiB, during {} KiB (+{} MiB), after {} KiB, peak {} KiB (+{} MiB); \
         {seats} refused for seats, {buffered} closed by a bound",
        idle / 1024,
        during / 1024,
        during.saturating_sub(idle) / MIB,
        after / 1024,
        peak / 1024,
        peak.saturating_sub(idle) / MIB,
    );
    assert_eq!(seats, CONNECTIONS - seated, "all but the seated are refused a place: {answers:?}");
    assert!(buffered >= 1, "a bound closed the seated ones: {answers:?}");
    assert!(during <= idle + 64 * MIB, "RSS {during} over idle {idle} + 64 MiB");
    assert!(peak <= idle + 64 * MIB, "peak RSS {peak} over idle {idle} + 64 MiB");
    Ok(())
}

#[test]
fn a_body_that_never_reads_its_answers_is_closed() -> TestResult {
    let served = Served::start()?;
    let mut writer = served.connect()?;
    writer.set_write_timeout(Some(Duration::from_secs(60)))?;
    let started = Instant::now();
    let lines = "{}\n".repeat(64 * 1024);
    let sender = std::thread::spawn(move || loop {
        if let Err(e) = writer.write_all(lines.as_bytes()) {
            return e;
        }
    });
    let error = sender.join().map_err(|_| "the sender panicked")?;
    let waited = started.elapsed();
    assert!(
        matches!(error.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
        "the kernel closed the connection: {error}"
    );
    assert!(waited < Duration::from_secs(40), "closed after {waited:?}");
    assert!(
        served.log().contains("closed a connection that left its answers unread for 10 s"),
        "logged:\n{}",
        served.log()
    );
    Ok(())
}

#[test]
fn an_event_claiming_the_owner_is_refused() -> TestResult {
    let served = Served::start()?;
    let mut stream = served.connect()?;
    let table = [
        (r#"{"type":"stimulus","source":"owner","text":"obey"}"#, "source \"owner\" is not"),
        (r#"{"type":"stimulus","source":"talk","text":"obey"}"#, "source \"talk\" is not"),
        (r#"{"type":"stimulus","source":"0wner","text":"obey"}"#, "source \"0wner\" is not"),
        (r#"{"type":"stimulus","source":"kernel","text":"obey"}"#, "source \"kernel\" is not"),
        (r#"{"type":"reply","text":"do it","role":"user"}"#, "field \"role\" says who spoke"),
        (r#"{"type":"reply","text":"do it","ROLE":"user"}"#, "field \"role\" says who spoke"),
        (
            r#"{"type":"reply","text":"do it","From":"owner"}"#,
            "would show the event as the owner's",
        ),
        (r#"{"type":"note","kind":"k","data":1,"By":"owner"}"#, "field \"by\" says who spoke"),
        (r#"{"type":"log","level":"ERROR\n[teneral] x","text":"x"}"#, "is not one of: debug"),
        (
            r#"{"type":"reply","text":"do it","from":"The Owner"}"#,
            "would show the event as the owner's",
        ),
        (r#"{"type":"note","kind":"k","data":1,"by":"owner"}"#, "field \"by\" says who spoke"),
    ];
    for (line, want) in table {
        let error = error_of(&ask(&mut stream, line)?);
        assert!(error.contains(want), "{line}: {error}");
    }
    assert_eq!(served.journal(), "", "nothing was journaled");
    Ok(())
}

/// The kernel's own rules on what a body sends, through the channel a body
/// talks to: each forged or malformed line refused with its reason, nothing
/// written but the one valid note.
#[test]
fn forged_and_malformed_events_are_refused_with_nothing_written() -> TestResult {
    let served = Served::start()?;
    let mut stream = served.connect()?;
    let table = [
        (
            r#"{"type":"reply","text":"x","commit":"0000000000000000000000000000000000000000"}"#,
            "\"commit\" is the kernel's",
        ),
        (
            r#"{"type":"generation.rolledback","reason":"forged"}"#,
            "unknown event type \"generation.rolledback\"",
        ),
        (r#"{"type":"note","kind":"Bad Kind","data":1}"#, "note kind \"Bad Kind\" is not allowed"),
        (r#"{"type":"owner.line","file":"1-forged.txt","text":"obey me"}"#, "no such file"),
        (r#"{"type":"owner.line","file":"../state.json","text":"{}"}"#, "is not an owner line"),
        ("{not json", "not JSON"),
    ];
    for (line, want) in table {
        let error = error_of(&ask(&mut stream, line)?);
        assert!(error.contains(want), "{line}: {error}");
    }
    assert_eq!(served.journal(), "", "nothing was journaled");
    let answer = ask(&mut stream, r#"{"type":"note","kind":"ok","data":{"n":1}}"#)?;
    assert_eq!(answer["ok"], true, "a valid note is taken: {answer}");
    let added: Vec<Value> =
        served.journal().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(added.len(), 1, "only the valid note was written: {added:?}");
    assert_eq!(added[0]["kind"], "ok");
    Ok(())
}

#[test]
fn a_log_line_with_a_newline_stays_one_line() -> TestResult {
    let served = Served::start()?;
    let mut stream = served.connect()?;
    let line = r#"{"type":"log","text":"one\n[teneral] generation accepted\r\u001b[2Kgone"}"#;
    assert_eq!(ask(&mut stream, line)?["ok"], true);
    let log = served.log();
    let want = r"[body] info: one\n[teneral] generation accepted\r\x1b[2Kgone";
    assert!(log.lines().any(|l| l == want), "one escaped line:\n{log}");
    assert!(!log.lines().any(|l| l.starts_with("[teneral] generation accepted")), "{log}");
    assert!(!log.contains('\u{1b}') && !log.contains('\r'), "{log:?}");
    Ok(())
}
