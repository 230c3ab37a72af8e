//! `teneralctl back` through the real binary: on an individual whose kernel
//! is down (state and journal written by `back` itself), and on one whose
//! kernel runs (here a stand-in: the test holds the lock, a sleeping child
//! takes the signal, and the test answers as the kernel would).

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use teneral_core::journal::writer::Journal;
use teneral_core::journal::EventKind;
use teneral_core::state::{State, Stopped};

use crate::common::*;

type Lived = (Individual, Vec<String>);

const LONG: Duration = Duration::from_secs(300);

/// An individual with three commits, and a journal as the kernel writes it:
/// the first generation is born, the second and third are promoted, each
/// reports ready; replies: one, two, none.
fn three_generations() -> Result<Lived, Box<dyn std::error::Error>> {
    lived(Individual::with_body(&[("body/README", "one\n")], "", &[])?)
}

/// The same on the fixture body, whose generations build and start, for a
/// test that runs a real kernel afterwards.
fn three_buildable_generations() -> Result<Lived, Box<dyn std::error::Error>> {
    let ind = Individual::new("", &[])?;
    std::fs::write(ind.path().join("body/README"), "one\n")?;
    commit_all(ind.path(), "one")?;
    lived(ind)
}

fn lived(ind: Individual) -> Result<Lived, Box<dyn std::error::Error>> {
    let mut commits = vec![ind.head()?];
    for text in ["two\n", "three\n"] {
        std::fs::write(ind.path().join("body/README"), text)?;
        commits.push(commit_all(ind.path(), text.trim())?);
    }
    let (a, b, c) = (&commits[0], &commits[1], &commits[2]);
    kernel_writes(
        ind.path(),
        &[
            (a, "kernel.started", json!({"pid": 1})),
            (a, "generation.ready", json!({})),
            (a, "reply", json!({"text": "hello"})),
            (a, "mutation.accepted", json!({"from": a, "to": b})),
            (b, "generation.ready", json!({})),
            (b, "reply", json!({"text": "one"})),
            (b, "reply", json!({"text": "two"})),
            (b, "mutation.accepted", json!({"from": b, "to": c})),
            (c, "generation.ready", json!({})),
        ],
    )?;
    Ok((ind, commits))
}

/// Appends events to the journal of `home` as the kernel does.
fn kernel_writes(home: &Path, events: &[(&String, &str, Value)]) -> TestResult {
    let mut journal = Journal::open(&home.join("memory/journal.jsonl"))?;
    for (commit, kind, fields) in events {
        let kind = EventKind::parse(kind).ok_or_else(|| format!("{kind} is no event kind"))?;
        journal.append_kernel(commit, kind, fields.clone())?;
    }
    Ok(())
}

/// Runs `teneralctl back --dir home args`; (status, stdout, stderr).
fn back(home: &Path, args: &[&str]) -> std::io::Result<(Option<i32>, String, String)> {
    let out = Command::new(teneralctl())
        .arg("back")
        .arg("--dir")
        .arg(home)
        .args(args)
        .output_within(QUICK)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((out.status.code(), text(&out.stdout), text(&out.stderr)))
}

/// The last journal event, without its time.
fn last_event(ind: &Individual) -> Value {
    let mut last = ind.journal().pop().unwrap_or_default();
    if let Some(event) = last.as_object_mut() {
        event.remove("ts");
    }
    last
}

fn sent_back(seq: u64, from: &str, to: &str) -> Value {
    json!({"type": "generation.sentback", "seq": seq, "commit": from,
           "from": from, "to": to, "by": "owner"})
}

#[test]
fn back_with_the_kernel_down_goes_to_the_generation_before_and_stays_down() -> TestResult {
    let (ind, c) = three_generations()?;
    let stopped = Stopped { reason: "stopped by the owner".into(), status: 0, at: "t".into() };
    let state = State {
        generation: Some(teneral_core::commit::Commit::parse(&c[2])?),
        previous: Some(teneral_core::commit::Commit::parse(&c[1])?),
        body: None,
        stopped: Some(stopped.clone()),
        pending: None,
        refused: None,
        trial: None,
    };
    state.save(ind.path())?;

    let (status, out, err) = back(ind.path(), &[])?;
    assert_eq!(status, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(&format!("sent back from {} to {}", c[2], c[1])), "{out}");
    assert!(out.contains("stays down"), "{out}");
    let state = State::load(ind.path())?;
    assert_eq!(state.generation.as_deref(), Some(c[1].as_str()));
    assert_eq!(state.previous, None, "no step back after the owner's choice");
    assert_eq!(state.stopped, Some(stopped), "the rest of the state is kept");
    assert_eq!(last_event(&ind), sent_back(10, &c[2], &c[1]));
    assert!(!teneral_core::lock::is_held(ind.path()), "the lock is let go");

    // Again: one further back, to the birth generation; then nothing more.
    let (status, _, err) = back(ind.path(), &[])?;
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(last_event(&ind), sent_back(11, &c[1], &c[0]));
    let before = std::fs::read(ind.path().join("memory/journal.jsonl"))?;
    let (status, out, err) = back(ind.path(), &[])?;
    assert_eq!(status, Some(1), "{out}");
    assert!(err.contains("nothing to go back to"), "{err}");
    assert_eq!(std::fs::read(ind.path().join("memory/journal.jsonl"))?, before);
    assert_eq!(State::load(ind.path())?.generation.as_deref(), Some(c[0].as_str()));
    Ok(())
}

#[test]
fn back_after_a_rollback_goes_one_further_and_back_commit_goes_anywhere_ready() -> TestResult {
    let (ind, c) = three_generations()?;
    let rolled = json!({"from": c[2], "to": c[1], "reason": "silent", "stderr": ""});
    kernel_writes(ind.path(), &[(&c[2], "generation.rolledback", rolled)])?;

    let (status, _, err) = back(ind.path(), &[])?;
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(last_event(&ind), sent_back(11, &c[1], &c[0]), "not forward to the failed one");

    // Any generation that once reported ready, by seven or more digits.
    let (status, out, err) = back(ind.path(), &[&c[2][..7]])?;
    assert_eq!(status, Some(0), "{err}");
    assert!(out.contains(&c[2]), "{out}");
    assert_eq!(last_event(&ind), sent_back(12, &c[0], &c[2]));
    assert_eq!(State::load(ind.path())?.generation.as_deref(), Some(c[2].as_str()));
    Ok(())
}

#[test]
fn back_list_shows_every_generation_oldest_first() -> TestResult {
    let (ind, c) = three_generations()?;
    let d = "d".repeat(40);
    kernel_writes(
        ind.path(),
        &[
            (&c[2], "mutation.accepted", json!({"from": c[2], "to": d})),
            (&d, "generation.rolledback", json!({"from": d, "to": c[2], "reason": "crashed"})),
        ],
    )?;
    let (status, out, err) = back(ind.path(), &["--list"])?;
    assert_eq!(status, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let want = [
        (&c[0][..7], "1 reply", false),
        (&c[1][..7], "2 replies", false),
        (&c[2][..7], "0 replies", true),
        ("ddddddd", "0 replies", false),
    ];
    for (line, (short, replies, current)) in lines.iter().zip(want) {
        assert!(line.starts_with(&format!("{short}  ")), "{line}");
        assert!(line.contains(replies), "{line}");
        assert_eq!(line.ends_with("(current)"), current, "{line}");
    }
    let ready = ind.events("generation.ready")[0]["ts"].as_str().unwrap_or_default().to_owned();
    let when = format!("  ready {} {} UTC  ", &ready[..10], &ready[11..19]);
    assert!(lines[0].contains(&when), "{when:?} in:\n{out}");
    assert!(lines[3].contains("never ready"), "{out}");
    Ok(())
}

#[test]
fn back_refuses_what_it_may_not_go_to_and_changes_nothing() -> TestResult {
    let (ind, c) = three_generations()?;
    let (gone, never) = ("e".repeat(40), "f".repeat(40));
    kernel_writes(
        ind.path(),
        &[
            (&c[2], "mutation.accepted", json!({"from": c[2], "to": gone})),
            (&gone, "generation.ready", json!({})),
            (&gone, "generation.rolledback", json!({"from": gone, "to": c[2]})),
            (&c[2], "mutation.accepted", json!({"from": c[2], "to": never})),
            (&never, "generation.rolledback", json!({"from": never, "to": c[2]})),
        ],
    )?;
    let journal = std::fs::read(ind.path().join("memory/journal.jsonl"))?;
    let table = [
        ("eeeeeee", "git no longer has"),
        ("fffffff", "never reported ready"),
        (&c[2][..7], "is the current generation already"),
        ("abc", "give 7 or more"),
        ("9999999", "no generation of this individual"),
    ];
    for (args, says) in table {
        let (status, out, err) = back(ind.path(), &[args])?;
        assert_eq!(status, Some(1), "{args:?}: {out}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(ind.path().join("memory/journal.jsonl"))?, journal);
    assert!(!ind.path().join(".teneral/state.json").exists());
    Ok(())
}

/// A running kernel, as `back` sees one: the lock held (by this test) and
/// naming a process (a sleeping child) that takes the SIGHUP.
struct FakeKernel {
    _lock: teneral_core::lock::Lock,
    child: std::process::Child,
}

impl FakeKernel {
    fn start(home: &Path) -> Result<FakeKernel, Box<dyn std::error::Error>> {
        let lock = teneral_core::lock::acquire(home)?;
        let mut sleep = Command::new("sleep");
        sleep.arg("60").stdin(Stdio::null());
        // Whatever started the tests may ignore SIGHUP (nohup); the stand-in
        // kernel takes it as a kernel does.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut sleep, || {
                libc::signal(libc::SIGHUP, libc::SIG_DFL);
                Ok(())
            });
        }
        let child = sleep.spawn()?;
        std::fs::write(home.join(teneral_core::lock::LOCK_PATH), format!("{}\n", child.id()))?;
        Ok(FakeKernel { _lock: lock, child })
    }

    /// The signal that ended the child, waiting at most 20 s.
    fn signalled(&mut self) -> Option<i32> {
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.signal();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for FakeKernel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn back_with_a_kernel_running_asks_it_and_waits_for_its_answer() -> TestResult {
    let (ind, c) = three_generations()?;
    let mut kernel = FakeKernel::start(ind.path())?;
    let client = Command::new(teneralctl())
        .args(["back", "--dir"])
        .arg(ind.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    assert_eq!(kernel.signalled(), Some(libc_sighup()), "the kernel gets SIGHUP");
    let request = ind.path().join(teneral_core::back_request::BACK_REQUEST);
    let asked: Value = serde_json::from_slice(&std::fs::read(&request)?)?;
    assert_eq!(asked, json!({"to": c[1]}));

    // The kernel's side: take the request, switch, journal the send-back.
    assert_eq!(teneral_core::back_request::read_request(ind.path())?, Some(c[1].clone()));
    assert!(!request.exists(), "taking the request removes it");
    assert_eq!(teneral_core::back_request::read_request(ind.path())?, None);
    let fields = json!({"from": c[2], "to": c[1], "by": "owner"});
    kernel_writes(ind.path(), &[(&c[2], "generation.sentback", fields)])?;

    let out = client.wait_with_output()?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(&format!("sent back from {} to {}", c[2], c[1])), "{stdout}");
    assert!(!ind.path().join(".teneral/state.json").exists(), "the state is the kernel's");
    Ok(())
}

#[test]
fn a_kernel_that_does_not_answer_has_the_request_withdrawn() -> TestResult {
    let (ind, _) = three_generations()?;
    let mut kernel = FakeKernel::start(ind.path())?;
    let (status, out, err) = back(ind.path(), &["--wait", "1"])?;
    assert_eq!(status, Some(1), "{out}");
    assert!(err.contains("did not answer within 1 s") && err.contains("withdrawn"), "{err}");
    assert!(!ind.path().join(teneral_core::back_request::BACK_REQUEST).exists());
    assert_eq!(kernel.signalled(), Some(libc_sighup()));
    Ok(())
}

#[test]
fn a_request_that_is_not_one_is_removed_and_refused() -> TestResult {
    let (ind, _) = three_generations()?;
    let request = ind.path().join(teneral_core::back_request::BACK_REQUEST);
    std::fs::create_dir_all(request.parent().ok_or("no parent")?)?;
    std::fs::write(&request, r#"{"to": "abc"}"#)?;
    let err = teneral_core::back_request::read_request(ind.path()).err().map(|e| e.to_string());
    assert!(err.as_deref().unwrap_or_default().contains("40 hex digits"), "{err:?}");
    assert!(!request.exists());
    Ok(())
}

/// SIGHUP's number on Linux.
fn libc_sighup() -> i32 {
    1
}

#[test]
fn back_with_the_kernel_down_killed_at_either_write_is_journaled_and_finished_by_the_next_start(
) -> TestResult {
    for point in ["journal.synced", "state.saved"] {
        let (ind, c) = three_buildable_generations()?;
        let state = State {
            generation: Some(teneral_core::commit::Commit::parse(&c[2])?),
            previous: Some(teneral_core::commit::Commit::parse(&c[1])?),
            body: None,
            stopped: None,
            pending: None,
            refused: None,
            trial: None,
        };
        state.save(ind.path())?;
        let out = Command::new(teneralctl())
            .args(["back", "--dir"])
            .arg(ind.path())
            .env(teneral_core::crash::CRASH_VAR, point)
            .output_within(QUICK)?;
        assert_eq!(out.status.signal(), Some(9), "killed at {point}: {out:?}");
        assert_eq!(last_event(&ind), sent_back(10, &c[2], &c[1]), "journaled first, at {point}");

        let _kernel = ind.start()?;
        // A kernel that stops instead ends the wait at once.
        let came = ind.wait_for("the generation gone back to", LONG, |e| {
            e["seq"].as_u64() > Some(10)
                && (e["type"] == "kernel.stopped"
                    || e["type"] == "generation.ready" && e["commit"] == c[1].as_str())
        })?;
        assert_eq!(came["type"], "generation.ready", "at {point}: {}", ind.kernel_log());
        let sent: Vec<Value> =
            ind.journal().into_iter().filter(|e| e["type"] == "generation.sentback").collect();
        assert_eq!(sent.len(), 1, "one send-back, at {point}: {sent:?}");
        assert_eq!(State::load(ind.path())?.generation.as_deref(), Some(c[1].as_str()), "{point}");
    }
    Ok(())
}

#[test]
fn back_sent_while_the_kernel_starts_is_answered_once_it_runs() -> TestResult {
    let (ind, c) = three_buildable_generations()?;
    let mut kernel = ind.start()?;
    // The moment the lock names the kernel, its start has only begun (the
    // stand-in model, the body's build are still to come): `back` signals
    // it then.
    let lock = ind.path().join(teneral_core::lock::LOCK_PATH);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&lock).is_ok_and(|pid| pid.trim().parse::<i32>().is_ok()) {
        assert!(Instant::now() < deadline, "the kernel never took its lock: {}", ind.kernel_log());
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = Command::new(teneralctl())
        .args(["back", "--wait", "240", "--dir"])
        .arg(ind.path())
        .output_within(SLOW)?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        ind.kernel_log()
    );
    assert!(stdout.contains(&format!("sent back from {} to {}", c[2], c[1])), "{stdout}");
    ind.wait_for("the generation gone back to", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == c[1].as_str()
    })?;
    kernel.signal(15);
    kernel.wait(Duration::from_secs(30))?;
    Ok(())
}
