//! What a body's events cost the kernel: bounded by the kernel, not by what
//! the body sends. A 32 MiB note, a note of numbers a scan finds too many,
//! a deeply nested one are refused with the kernel's peak RSS (`VmHWM`)
//! within 64 MiB of idle; a kernel start and `teneralctl generations` over
//! a journal holding the largest events allowed, and a line an older kernel
//! took, stay as close to a start over an empty journal; a flood of log
//! lines leaves one `events.dropped` and a bounded log.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;
use teneral_core::journal::rules::{BODY, EVENT_BYTES, LOG_BYTES, NOTE_BYTES};

use super::{answer, ask, closed, error_of, Served, MIB, SHORT};
use crate::common::*;

const LONG: Duration = Duration::from_secs(240);

/// `VmHWM` of process `pid`, in bytes.
fn peak_of(pid: u32) -> Result<usize, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).ok_or("no VmHWM")?;
    let kib: usize = line.split_whitespace().nth(1).ok_or("no figure")?.parse()?;
    Ok(kib * 1024)
}

/// A note whose `data` is `[0,0,...]`, `bytes` long in all.
fn zeros_note(bytes: usize) -> String {
    let head = r#"{"type":"note","kind":"zeros","data":[0"#;
    let pairs = (bytes - head.len() - 2) / 2;
    format!("{head}{}]}}", ",0".repeat(pairs))
}

#[test]
fn a_32_mib_note_a_wide_one_and_a_deep_one_are_refused_within_64_mib() -> TestResult {
    let served = Served::start()?;
    let mut warm = served.connect()?;
    assert_eq!(ask(&mut warm, r#"{"type":"log","text":"warm"}"#)?["ok"], true);
    std::thread::sleep(Duration::from_millis(300));
    let (idle, _) = served.memory()?;

    // 32 MiB: the channel stops reading it at the largest event's bound.
    let mut stream = served.connect()?;
    let mut writer = stream.try_clone()?;
    let note = zeros_note(32 * MIB);
    let sender = std::thread::spawn(move || {
        let sent = writer.write_all(note.as_bytes()).and_then(|()| writer.write_all(b"\n"));
        sent.is_ok()
    });
    let error = error_of(&answer(&stream)?);
    assert!(error.contains(&format!("an event is at most {EVENT_BYTES} bytes")), "{error}");
    assert!(closed(&mut stream), "the connection is closed");
    assert!(!sender.join().map_err(|_| "the sender panicked")?, "not all of it was read");

    // Within the bytes, over the elements; nested past the depth.
    let wide = zeros_note(NOTE_BYTES - 10);
    let deep = format!(
        r#"{{"type":"note","kind":"deep","data":{}0{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut stream = served.connect()?;
    let error = error_of(&ask(&mut stream, &wide)?);
    assert!(error.contains(&format!("at most {} elements", BODY.elements)), "{error}");
    let error = error_of(&ask(&mut stream, &deep)?);
    assert!(error.contains(&format!("nests at most {} arrays", BODY.depth)), "{error}");
    let big_log = format!(r#"{{"type":"log","text":"{}"}}"#, "x".repeat(LOG_BYTES));
    let error = error_of(&ask(&mut stream, &big_log)?);
    assert!(error.contains(&format!("\"log\" event is at most {LOG_BYTES} bytes")), "{error}");
    // Over a note's bound, within a reply's: refused as a note.
    let long_note = format!(r#"{{"type":"note","kind":"k","data":"{}"}}"#, "x".repeat(NOTE_BYTES));
    let error = error_of(&ask(&mut stream, &long_note)?);
    assert!(error.contains(&format!("\"note\" event is at most {NOTE_BYTES} bytes")), "{error}");
    assert_eq!(served.journal(), "", "nothing was journaled");

    // The largest note allowed is taken.
    let n = ((NOTE_BYTES - 64) / 5).min(BODY.elements - 10);
    let most = format!(r#"{{"type":"note","kind":"k","data":[{}0]}}"#, "1234,".repeat(n));
    let got = ask(&mut stream, &most)?;
    assert_eq!(got["ok"], true, "{got}");

    let (after, peak) = served.memory()?;
    eprintln!(
        "idle {} KiB, after {} KiB, peak {} KiB (+{} MiB)",
        idle / 1024,
        after / 1024,
        peak / 1024,
        peak.saturating_sub(idle) / MIB
    );
    assert!(peak <= idle + 64 * MIB, "peak RSS {peak} over idle {idle} + 64 MiB");
    Ok(())
}

/// A stamped journal line, as a kernel writes one.
fn stamped(seq: u64, kind: &str, rest: &str) -> String {
    let commit = "0123456789abcdef0123456789abcdef01234567";
    format!(
        r#"{{"type":"{kind}","ts":"2026-11-30T10:00:{:02}.000Z","seq":{seq},"commit":"{commit}",{rest}}}"#,
        seq % 60
    )
}

/// A journal of the largest events the channel allows (a note and a tool
/// call of the most elements, a reply of the most bytes), a note an older
/// kernel took (32 MiB of `[0,0,…]`), a line longer than any reader holds,
/// and a hundred more of the widest notes, all since the last start.
fn heavy_journal(path: &Path) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let n = BODY.elements - 100;
    // `count` pieces of `each` between `head` and `tail`, commas between
    // them when `head` opens an array; written a block at a time.
    let mut line = |seq: u64, kind: &str, head: &str, each: &str, count: usize, tail: &str| {
        let open = stamped(seq, kind, "");
        let open = open.strip_suffix('}').unwrap_or(&open);
        write!(file, "{open}{head}")?;
        let piece = if head.ends_with('[') { format!("{each},") } else { each.to_owned() };
        let block = piece.repeat(4096);
        for _ in 0..count.saturating_sub(1) / 4096 {
            file.write_all(block.as_bytes())?;
        }
        file.write_all(piece.repeat(count.saturating_sub(1) % 4096).as_bytes())?;
        if count > 0 {
            file.write_all(each.as_bytes())?;
        }
        writeln!(file, "{tail}}}")
    };
    line(1, "note", r#""kind":"k","data":["#, "1", n, "]")?;
    line(2, "tool.call", r#""id":"1","name":"t","input":["#, "123456789012", n, "]")?;
    line(3, "reply", r#""text":""#, "x", EVENT_BYTES - 100, "\"")?;
    line(4, "note", r#""kind":"zeros","data":["#, "0", 16 * MIB, "]")?;
    line(5, "reply", r#""text":""#, "y", 40 * MIB, "\"")?;
    // Notes by the hundred since the last start, each of the most elements.
    for seq in 6..106 {
        line(seq, "note", r#""kind":"k","data":["#, "1", n, "]")?;
    }
    line(106, "reply", r#""text":"the last word""#, "", 0, "")?;
    file.flush()
}

/// Starts the kernel on `ind` and waits for its body to be ready: the
/// kernel's peak then (the process `kernel.started` names).
fn start_and_measure(ind: &Individual) -> Result<usize, Box<dyn std::error::Error>> {
    let kernel = ind.start()?;
    let started = ind.wait_for("kernel.started", LONG, |e| e["type"] == "kernel.started")?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let pid = started["pid"].as_u64().ok_or("kernel.started has a pid")? as u32;
    std::thread::sleep(Duration::from_millis(500));
    let peak = peak_of(pid)?;
    drop(kernel);
    Ok(peak)
}

/// Peak RSS of `teneralctl generations --json` on `home`, in bytes, and
/// its output. A small python3 starts it and reports its children's peak:
/// a child this test started itself would count the test's own peak too
/// (Linux keeps the peak of the memory a process had before its exec).
fn generations_peak(home: &Path) -> Result<(usize, Value), Box<dyn std::error::Error>> {
    let measure = "import resource, subprocess, sys\n\
                   out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, check=True).stdout\n\
                   print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
                   sys.stdout.write(out.decode())";
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(measure)
        .arg(teneralctl())
        .args(["generations", "--json", "--dir"])
        .arg(home)
        .stderr(Stdio::inherit())
        .output_within(SLOW)?;
    assert!(out.status.success(), "teneralctl generations: {:?}", out.status);
    let text = String::from_utf8(out.stdout)?;
    let (peak, card) = text.split_once('\n').ok_or("two parts")?;
    let value: Value = serde_json::from_str(card).map_err(|e| format!("{e}: {card}"))?;
    Ok((peak.trim().parse::<usize>()? * 1024, value))
}

#[test]
fn a_start_and_generations_over_the_largest_events_stay_within_64_mib() -> TestResult {
    let script = r#"{"reply": "hello"}
"#;
    let plain = Individual::new(script, &[])?;
    let kernel_idle = start_and_measure(&plain)?;
    let (ctl_idle, _) = generations_peak(plain.path())?;

    let heavy = Individual::new(script, &[])?;
    std::fs::create_dir_all(heavy.path().join("memory"))?;
    heavy_journal(&heavy.path().join("memory/journal.jsonl"))?;
    let (ctl_heavy, card) = generations_peak(heavy.path())?;
    let kernel_heavy = start_and_measure(&heavy)?;

    eprintln!(
        "kernel peak {} KiB over an empty journal, {} KiB over the heavy one (+{} MiB); \
         teneralctl generations {} KiB, {} KiB (+{} MiB)",
        kernel_idle / 1024,
        kernel_heavy / 1024,
        kernel_heavy.saturating_sub(kernel_idle) / MIB,
        ctl_idle / 1024,
        ctl_heavy / 1024,
        ctl_heavy.saturating_sub(ctl_idle) / MIB
    );
    assert!(kernel_heavy <= kernel_idle + 64 * MIB, "kernel {kernel_heavy} vs {kernel_idle}");
    assert!(ctl_heavy <= ctl_idle + 64 * MIB, "generations {ctl_heavy} vs {ctl_idle}");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let generations = card["generations"].as_array().ok_or("generations")?;
    let old = generations.iter().find(|g| g["commit"] == commit).ok_or("the old generation")?;
    assert_eq!(old["replies"], 2, "the reply within the bounds and the last: {old}");
    assert_eq!(old["tool_calls"], 1, "the widest tool call: {old}");
    let log = heavy.kernel_log();
    assert!(log.contains("passed over 2 journal lines over what a reader takes"), "{log}");
    Ok(())
}

#[test]
fn a_flood_of_log_lines_leaves_one_events_dropped_and_a_bounded_log() -> TestResult {
    flood(1_000_000, Duration::from_secs(2))
}

#[test]
#[ignore = "a million lines take about half a minute through a debug build's kernel"]
fn a_flood_of_a_million_log_lines_leaves_one_events_dropped() -> TestResult {
    flood(1_000_000, LONG)
}

/// Sends up to `most` log lines, for at most `within`, reading every
/// answer, and checks what the journal and the log kept.
fn flood(most: usize, within: Duration) -> TestResult {
    let served = Served::start()?;
    let stream = served.connect()?;
    stream.set_read_timeout(Some(LONG))?;
    let mut writer = stream.try_clone()?;
    let sender = std::thread::spawn(move || {
        let batch = r#"{"type":"log","text":"flood"}"#.to_owned() + "\n";
        let batch = batch.repeat(10_000);
        let began = Instant::now();
        let mut sent = 0;
        while sent < most && began.elapsed() < within {
            if writer.write_all(batch.as_bytes()).is_err() {
                break;
            }
            sent += 10_000;
        }
        sent
    });
    let began = Instant::now();
    let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let reading = {
        let (counts, stream) = (Arc::clone(&counts), stream.try_clone()?);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            loop {
                line.clear();
                if !matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    return;
                }
                if line.starts_with(r#"{"ok":true"#) {
                    counts.0.fetch_add(1, Ordering::SeqCst);
                } else if line.contains("dropped: ") {
                    counts.1.fetch_add(1, Ordering::SeqCst);
                } else {
                    eprintln!("an answer neither taken nor dropped: {line}");
                    return;
                }
            }
        })
    };
    let sent = sender.join().map_err(|_| "the sender panicked")?;
    let answered = || counts.0.load(Ordering::SeqCst) + counts.1.load(Ordering::SeqCst);
    let end = Instant::now() + LONG;
    while answered() < sent && Instant::now() < end && !reading.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (taken, dropped) = (counts.0.load(Ordering::SeqCst), counts.1.load(Ordering::SeqCst));
    let took = began.elapsed();
    assert_eq!(taken + dropped, sent, "every line answered");
    let end = Instant::now() + SHORT;
    let reports = loop {
        let reports: Vec<Value> = served
            .journal()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect();
        if !reports.is_empty() || Instant::now() > end {
            break reports;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Long enough for a second report, were there one.
    std::thread::sleep(Duration::from_secs(3));
    let again = served.journal().lines().count();
    let logged = served.log().lines().filter(|l| l.contains("[body] info: flood")).count();
    eprintln!(
        "{sent} log lines sent in {took:?}: {taken} taken, {dropped} dropped; {logged} in the \
         kernel's log; journal: {reports:?}"
    );
    assert_eq!(reports.len(), 1, "one events.dropped: {reports:?}");
    assert_eq!(again, 1, "and no other");
    let report = &reports[0];
    assert_eq!(report["type"], "events.dropped");
    assert_eq!(report["kind"], "log");
    assert_eq!(report["count"].as_u64(), Some(dropped as u64), "{report}");
    assert!(sent >= 20_000, "the flood was a flood: {sent}");
    let allowed = 200 + 20 * (took.as_secs() as usize + 2);
    assert!(taken <= allowed, "{taken} taken, at most {allowed}");
    assert_eq!(logged, taken, "the log holds what was taken, no more");
    let dropped_lines = served.log().lines().filter(|l| l.contains("dropped")).count();
    assert_eq!(dropped_lines, 1, "the one events.dropped, no line per drop, in the log");
    Ok(())
}
