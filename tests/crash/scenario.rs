//! What the kill -9 suite (`scripts/bench-crash`) makes a kernel do while it
//! waits for the kill: talk, promoted-generation trials that fail or go
//! well, a start that must answer a request its killed predecessor left,
//! and the seed body's own talk; in the system-call mode also the owner's
//! `teneralctl back` with the kernel down and running, the launcher's
//! hand-over to a generation's own kernel and its rollback of one that
//! fails, and a start that unpacks a generation's organ. Every wait goes through [`Run::until`], which also carries out a
//! kill at a random moment, so such a kill always lands while the scenario
//! is still under way.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::strace::{self, Strace, Traced};
use crate::common::*;

/// A kernel being driven, and the moment to kill it at (random kills).
pub struct Run {
    pub kernel: Kernel,
    /// The kernel's own process: the child itself, or the tracee of the
    /// `strace` that is the child (system-call mode).
    pub pid: u32,
    pub kill_at: Option<Instant>,
    /// The random kill was made while the scenario ran.
    pub killed: bool,
    /// How the child ended, once it has.
    pub status: Option<ExitStatus>,
    /// How `teneralctl back` runs under strace, in the scenarios that
    /// trace the client instead of the kernel.
    pub back: Option<Strace>,
    /// How that client ended (`None` inside: killed at its time limit).
    pub back_status: Option<Option<ExitStatus>>,
    /// The generation `teneralctl back` sends the individual back to.
    pub back_to: Option<String>,
    /// A `strace` attached to the kernel (not its parent), ended with the
    /// round.
    pub tracer: Option<std::process::Child>,
}

impl Run {
    pub fn new(kernel: Kernel, kill_at: Option<Instant>) -> Self {
        let pid = kernel.pid();
        Run::of(kernel, pid, kill_at)
    }

    /// A run whose kernel is process `pid`, below the child `kernel`.
    pub fn of(kernel: Kernel, pid: u32, kill_at: Option<Instant>) -> Self {
        Run {
            kernel,
            pid,
            kill_at,
            killed: false,
            status: None,
            back: None,
            back_status: None,
            back_to: None,
            tracer: None,
        }
    }

    /// Sends signal number `sig` to the kernel's own process.
    pub fn signal(&self, sig: i32) {
        if self.kernel.child.is_some() {
            send(self.pid, sig);
        }
    }

    /// Kills the kernel and waits for the child to end (reaped).
    pub fn kill(&mut self) {
        self.signal(9);
        let end = Instant::now() + Duration::from_secs(10);
        while self.alive() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls until `pred` holds (true), or the kernel exits, the random
    /// moment comes (the kernel is then killed) or `within` passes (false).
    pub fn until(&mut self, within: Duration, mut pred: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if pred() {
                return true;
            }
            if !self.alive() {
                return false;
            }
            if self.kill_at.is_some_and(|at| Instant::now() >= at) {
                self.killed = true;
                self.kill();
                return false;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Whether the kernel still runs (reaps it when not).
    pub fn alive(&mut self) -> bool {
        let Some(child) = self.kernel.child.as_mut() else { return false };
        if let Ok(Some(status)) = child.try_wait() {
            self.status = Some(status);
            self.kernel.child = None;
            return false;
        }
        true
    }

    /// A clean stop (SIGTERM), waited for.
    pub fn stop(&mut self) {
        if self.alive() {
            self.signal(15);
            self.until(Duration::from_secs(30), || false);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Scenario {
    /// Lines and mutation requests the gate refuses, then a clean stop.
    Talk,
    /// A silent generation on trial is rolled back.
    Trial,
    /// A promoted generation answers, ends its trial, is sent back.
    Promoted,
    /// A start after a kill between a request and its verdict, then Talk.
    Undecided,
    /// The seed body (`body/`, scripted stand-in) talks, then a clean stop.
    Seed,
    /// The owner's `teneralctl back` with the kernel down (the client traced).
    BackDown,
    /// As [`Scenario::Promoted`], with the client of its `back` traced
    /// instead of the kernel.
    BackUp,
    /// The start finishes a promotion to a generation with a kernel of its
    /// own, hands over to it (exit 85), and the launcher runs that kernel
    /// on trial until it is ready (the launcher traced).
    Handover,
    /// The launcher rolls back a generation whose own kernel fails its
    /// trial, and runs the install's kernel again (the launcher traced).
    Rollback,
    /// A generation that pins an organ starts with its tree and set not
    /// made yet: the kernel unpacks the archive, renames the staged tree and
    /// links the set, the body comes up, then a clean stop.
    Organs,
}

impl Scenario {
    /// The program the system-call mode runs under strace.
    pub fn traced(self) -> Traced {
        match self {
            Scenario::Talk
            | Scenario::Trial
            | Scenario::Promoted
            | Scenario::Undecided
            | Scenario::Seed
            | Scenario::Organs => Traced::Kernel,
            Scenario::BackDown | Scenario::BackUp => Traced::Back,
            Scenario::Handover | Scenario::Rollback => Traced::Launcher,
        }
    }
}

pub fn count(ind: &Individual, kind: &str) -> usize {
    ind.events(kind).len()
}

/// A 40-hex commit no repository holds: the fixture asks for it, the gate
/// refuses it at once.
fn unknown_commit(i: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    format!("{:016x}{:016x}{:08x}", nanos, nanos.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)
}

fn ready(ind: &Individual, run: &mut Run, readies: usize) -> bool {
    run.until(Duration::from_secs(120), || count(ind, "generation.ready") > readies)
}

/// Writes `text` as an owner line and waits for an `until` event after the
/// line's own `owner.line` (the end of the turn it starts, or the verdict on
/// what it asks for): one of an earlier line, answered late, does not count.
fn line(
    ind: &Individual,
    run: &mut Run,
    text: &str,
    until: &str,
    written: &mut Vec<String>,
) -> bool {
    let name = match teneral_core::owner::write_line(ind.path(), text) {
        Ok(name) => name,
        Err(_) => return false,
    };
    written.push(name.clone());
    run.until(Duration::from_secs(60), || {
        let journal = ind.journal();
        let taken = journal
            .iter()
            .find(|e| e["type"] == "owner.line" && e["file"] == name.as_str())
            .and_then(|e| e["seq"].as_u64());
        taken.is_some_and(|seq| {
            journal.iter().any(|e| e["type"] == until && e["seq"].as_u64() > Some(seq))
        })
    })
}

/// Drives `run` through `scenario`; `readies` is the count of
/// `generation.ready` before the kernel started.
pub fn drive(
    scenario: Scenario,
    ind: &Individual,
    run: &mut Run,
    readies: usize,
    written: &mut Vec<String>,
) {
    match scenario {
        Scenario::Talk | Scenario::Undecided => talk(ind, run, readies, written),
        Scenario::Trial => trial(ind, run, written),
        Scenario::Promoted | Scenario::BackUp => promoted(ind, run, readies, written),
        Scenario::Seed => seed(ind, run, readies, written),
        Scenario::BackDown => {
            let child = strace::back(ind.path(), run.back.as_ref(), run.back_to.as_deref(), 5);
            run.back_status = Some(child.ok().and_then(|mut c| strace::finish(&mut c, LIMIT)));
        }
        Scenario::Handover => handover(ind, run, readies),
        Scenario::Organs => {
            ready(ind, run, readies);
            run.stop();
        }
        Scenario::Rollback => {
            let before = count(ind, "generation.rolledback");
            if run.until(Duration::from_secs(60), || count(ind, "generation.rolledback") > before) {
                // The install's kernel serves the generation gone back to.
                ready(ind, run, count(ind, "generation.ready"));
            }
            run.stop();
        }
    }
}

fn talk(ind: &Individual, run: &mut Run, readies: usize, written: &mut Vec<String>) {
    if !ready(ind, run, readies) {
        return;
    }
    let lines = [
        ("hello".to_owned(), "turn.ended"),
        (unknown_commit(1), "mutation.rejected"),
        ("still there?".to_owned(), "turn.ended"),
    ];
    for (text, until) in lines {
        if !line(ind, run, &text, until, written) {
            return;
        }
    }
    run.stop();
}

fn trial(ind: &Individual, run: &mut Run, written: &mut Vec<String>) {
    let before = count(ind, "generation.rolledback");
    if !run.until(Duration::from_secs(60), || count(ind, "generation.rolledback") > before) {
        return;
    }
    let replies = count(ind, "reply");
    match teneral_core::owner::write_line(ind.path(), "after the rollback") {
        Ok(name) => written.push(name),
        Err(_) => return,
    }
    run.until(Duration::from_secs(30), || count(ind, "reply") > replies);
}

fn promoted(ind: &Individual, run: &mut Run, readies: usize, written: &mut Vec<String>) {
    if !ready(ind, run, readies) {
        return;
    }
    let replies = count(ind, "reply");
    match teneral_core::owner::write_line(ind.path(), "how is the trial?") {
        Ok(name) => written.push(name),
        Err(_) => return,
    }
    if !run.until(Duration::from_secs(30), || count(ind, "reply") > replies) {
        return;
    }
    let mut back = strace::back(ind.path(), run.back.as_ref(), run.back_to.as_deref(), 20);
    let sent = count(ind, "generation.sentback");
    let readies = count(ind, "generation.ready");
    // Until the kernel journals the send-back, or the client ends without
    // it (a traced client killed at its call).
    let mut ended = || back.as_mut().map_or(true, |b| matches!(b.try_wait(), Ok(Some(_))));
    run.until(Duration::from_secs(20), || count(ind, "generation.sentback") > sent || ended());
    if count(ind, "generation.sentback") > sent {
        // The generation gone back to comes up.
        ready(ind, run, readies);
    }
    if let Ok(mut back) = back {
        // The client answered or gave up by now; one still there is killed.
        let limit = if run.back.is_some() { LIMIT } else { Duration::ZERO };
        run.back_status = Some(strace::finish(&mut back, limit));
    }
}

/// How long a traced client may take before it is taken for hung.
const LIMIT: Duration = Duration::from_secs(60);

fn handover(ind: &Individual, run: &mut Run, readies: usize) {
    // The first ready is the generation's own kernel's: the install's
    // hands over before it starts a body.
    if !ready(ind, run, readies) {
        return;
    }
    let trial = ind.path().join(".teneral/trial.json");
    run.until(Duration::from_secs(30), || !trial.exists());
    run.stop();
}

fn seed(ind: &Individual, run: &mut Run, readies: usize, written: &mut Vec<String>) {
    if !ready(ind, run, readies) {
        return;
    }
    for text in ["hello, seed", "what do you see?"] {
        if !line(ind, run, text, "turn.ended", written) {
            return;
        }
    }
    run.stop();
}

/// For [`Scenario::Undecided`]: a kernel killed right after it journaled a
/// mutation request, so the next start must answer it ("nothing decided").
/// Not a point of the suite: the point is the start that follows.
pub fn leave_a_request(ind: &Individual, written: &mut Vec<String>) -> TestResult {
    let readies = count(ind, "generation.ready");
    let kernel = ind.start_with(&[("TENERAL_TEST_CRASH_AT", "request.journaled")])?;
    let mut run = Run::new(kernel, None);
    if ready(ind, &mut run, readies) {
        line(ind, &mut run, &unknown_commit(2), "mutation.rejected", written);
        run.until(Duration::from_secs(30), || false);
    }
    if run.alive() {
        run.kill();
    }
    Ok(())
}
