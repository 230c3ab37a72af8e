//! The kill -9 suite (`scripts/bench-crash`): fresh individuals (fixture
//! body, scripted stand-in) talk, ask for mutations, get promoted-generation
//! trials that fail and are rolled back; the kernel is killed at every named
//! durability point (`TENERAL_TEST_CRASH_AT=<point>@<n>`) and at random
//! moments, started again, stopped, and the invariants are checked after
//! every restart. Ignored by default; `TENERAL_BENCH_CRASH_POINTS` says how
//! many points to try (40 unless set).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{born, lineage_of, state_of, verdicts_of};
use crate::common::*;

#[derive(Default, Debug)]
struct Counts {
    tried: usize,
    hit: usize,
    random: usize,
    lines_lost: usize,
    lines_duplicated: usize,
    unanswered_or_twice: usize,
    disagreements: usize,
    leftover_processes: usize,
    leftover_files: usize,
    /// The named points the kernel died at.
    reached: std::collections::BTreeSet<String>,
}

/// A number from the clock, for random moments (no need for more).
fn random_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or(7);
    (nanos.wrapping_mul(6364136223846793005) >> 17) % n.max(1)
}

/// Polls until `pred` holds, the kernel exits, or `within` passes; true
/// when `pred` held.
fn until(kernel: &mut Kernel, within: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if pred() {
            return true;
        }
        if let Some(child) = kernel.child.as_mut() {
            if let Ok(Some(_)) = child.try_wait() {
                kernel.child = None;
                return false;
            }
        } else {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

fn count(ind: &Individual, kind: &str) -> usize {
    ind.events(kind).len()
}

/// A talk: the birth, a line, a mutation request the gate refuses at once
/// (no such commit), another line.
fn talk(ind: &Individual, kernel: &mut Kernel, written: &mut Vec<String>) {
    // Ready (a birth turn, when it takes one, only adds a line).
    let readies = count(ind, "generation.ready");
    let ready = || count(ind, "generation.ready") > readies;
    if !until(kernel, Duration::from_secs(60), ready) {
        return;
    }
    for (i, text) in ["hello", "__candidate__", "still there?"].iter().enumerate() {
        let text = if *text == "__candidate__" {
            format!("{:016x}{:016x}{:08x}", random_below(u64::MAX), random_below(u64::MAX), i)
        } else {
            (*text).to_owned()
        };
        match teneral::owner::write_line(ind.path(), &text) {
            Ok(name) => written.push(name),
            Err(_) => return,
        }
        let before = count(ind, "turn.ended") + count(ind, "mutation.rejected");
        let moved = || count(ind, "turn.ended") + count(ind, "mutation.rejected") > before;
        if !until(kernel, Duration::from_secs(30), moved) {
            return;
        }
    }
}

/// A trial: a silent generation on trial is rolled back, then the one
/// before answers a line.
fn trial(ind: &Individual, kernel: &mut Kernel, written: &mut Vec<String>) {
    let before = count(ind, "generation.rolledback");
    let back = || count(ind, "generation.rolledback") > before;
    if !until(kernel, Duration::from_secs(60), back) {
        return;
    }
    if let Ok(name) = teneral::owner::write_line(ind.path(), "after the rollback") {
        written.push(name);
    }
    let replies = count(ind, "reply");
    until(kernel, Duration::from_secs(30), || count(ind, "reply") > replies);
}

/// An individual with a base generation and a silent one, and the two.
/// A promotion that goes well: `base` promoted (from `silent`), on trial
/// until it answers a line; then the owner sends it back.
fn promoted(ind: &Individual, kernel: &mut Kernel, written: &mut Vec<String>) {
    let readies = count(ind, "generation.ready");
    if !until(kernel, Duration::from_secs(60), || count(ind, "generation.ready") > readies) {
        return;
    }
    let replies = count(ind, "reply");
    match teneral::owner::write_line(ind.path(), "how is the trial?") {
        Ok(name) => written.push(name),
        Err(_) => return,
    }
    if !until(kernel, Duration::from_secs(30), || count(ind, "reply") > replies) {
        return;
    }
    let back = std::process::Command::new(teneralctl())
        .args(["back", "--wait", "20", "--dir"])
        .arg(ind.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let sent = count(ind, "generation.sentback");
    until(kernel, Duration::from_secs(20), || count(ind, "generation.sentback") > sent);
    if let Ok(mut back) = back {
        let _ = back.kill();
        let _ = back.wait();
    }
}

/// Which scenario reaches a point (`None`: any).
fn scenario_for(point: &str) -> Option<Scenario> {
    match point.split('@').next().unwrap_or_default() {
        "owner.journaled"
        | "owner.removed"
        | "request.journaled"
        | "pending.saved"
        | "verdict.journaled"
        | "undecided.journaled" => Some(Scenario::Talk),
        "trial.saved" | "rolledback.journaled" | "socket.removed" => Some(Scenario::Trial),
        "trial.ended" | "sentback.journaled" | "switched" | "lineage.moved" => {
            Some(Scenario::Promoted)
        }
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    Talk,
    Trial,
    Promoted,
}

fn trial_individual() -> Result<(Individual, String, String), Box<dyn std::error::Error>> {
    let ind = Individual::new("", &["TENERAL_TEST_REPLY_SECONDS=1"])?;
    let base = ind.head()?;
    set_mode(ind.path(), "silent")?;
    let silent = commit_all(ind.path(), "a silent generation")?;
    born(&ind, &base)?;
    Ok((ind, base, silent))
}

/// Promotes `silent` as a kernel killed right after its verdict would
/// have: the journal says `mutation.accepted`, the state is still at
/// `base`; the start must finish the promotion and put `silent` on trial.
fn promote_by_hand(ind: &Individual, base: &str, silent: &str) -> TestResult {
    let state = serde_json::json!({"generation": base});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    let path = ind.path().join("memory/journal.jsonl");
    let mut journal = teneral::journal::writer::Journal::open(&path)?;
    let fields = serde_json::json!({"from": base, "to": silent});
    journal.append_kernel(base, "mutation.accepted", fields)?;
    Ok(())
}

fn kill_all(found: &[(u32, String)]) {
    for (pid, _) in found {
        let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
}

fn leftover_files(home: &Path) -> Vec<String> {
    let mut files = event_sockets(home);
    for entry in std::fs::read_dir(home.join(".teneral")).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp-") {
            files.push(name);
        }
    }
    let children = std::fs::read_to_string(home.join(".teneral/run/children")).unwrap_or_default();
    if !children.trim().is_empty() {
        files.push(format!(".teneral/run/children: {}", children.trim()));
    }
    files
}

/// Checks the invariants over a quiet individual (no kernel running).
fn check(ind: &Individual, written: &[String], c: &mut Counts, what: &str) {
    let journal = ind.journal();
    let waiting = ind.owner_files();
    for name in written {
        let n = journal
            .iter()
            .filter(|e| e["type"] == "owner.line" && e["file"] == name.as_str())
            .count();
        if n > 1 {
            c.lines_duplicated += 1;
            eprintln!("{what}: line {name} journaled {n} times");
        }
        if n == 0 && !waiting.contains(name) {
            c.lines_lost += 1;
            eprintln!("{what}: line {name} lost");
        }
    }
    for request in journal.iter().filter(|e| e["type"] == "mutation.requested") {
        let n = verdicts_of(&journal, &request["seq"]).len();
        if n != 1 {
            c.unanswered_or_twice += 1;
            eprintln!("{what}: request {} has {n} verdicts", request["seq"]);
        }
    }
    let state = state_of(ind.path());
    let generation = state["generation"].as_str().map(str::to_owned);
    if generation != lineage_of(ind.path()) {
        c.disagreements += 1;
        eprintln!("{what}: state {generation:?}, lineage {:?}", lineage_of(ind.path()));
    }
    let files = leftover_files(ind.path());
    if !files.is_empty() {
        c.leftover_files += files.len();
        eprintln!("{what}: files left: {files:?}");
    }
}

/// The individuals the rounds reuse (a body is built once per commit).
struct Subjects {
    talk: Individual,
    trial: (Individual, String, String),
}

fn round(
    spec: Option<&str>,
    scenario: Scenario,
    subjects: &Subjects,
    c: &mut Counts,
) -> TestResult {
    let (trial_ind, base, silent) = &subjects.trial;
    let ind = match scenario {
        Scenario::Talk => &subjects.talk,
        Scenario::Trial => {
            promote_by_hand(trial_ind, base, silent)?;
            trial_ind
        }
        Scenario::Promoted => {
            promote_by_hand(trial_ind, silent, base)?;
            trial_ind
        }
    };
    let what = format!("{scenario:?} {}", spec.unwrap_or("random"));
    let vars: Vec<(&str, &str)> =
        spec.map(|s| vec![("TENERAL_TEST_CRASH_AT", s)]).unwrap_or_default();
    let log_before = ind.kernel_log().len();
    let mut kernel = ind.start_with(&vars)?;
    let mut written = Vec::new();
    let started = Instant::now();
    let kill_after = Duration::from_millis(300 + random_below(6_000));
    if spec.is_none() {
        // A random moment, while the scenario runs.
        let pid = kernel.pid();
        std::thread::spawn(move || {
            std::thread::sleep(kill_after);
            let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
        });
    }
    match scenario {
        Scenario::Talk => talk(ind, &mut kernel, &mut written),
        Scenario::Trial => trial(ind, &mut kernel, &mut written),
        Scenario::Promoted => promoted(ind, &mut kernel, &mut written),
    }
    if kernel.child.is_some() {
        if spec.is_none() && started.elapsed() < kill_after {
            std::thread::sleep(kill_after.saturating_sub(started.elapsed()));
        }
        kernel.signal(9);
        let _ = kernel.wait(Duration::from_secs(10));
    }
    c.tried += 1;
    let log = ind.kernel_log();
    if log.get(log_before.min(log.len())..).is_some_and(|l| l.contains("crash point ")) {
        c.hit += 1;
        if let Some(name) = spec.and_then(|s| s.split('@').next()) {
            c.reached.insert(name.to_owned());
        }
    }
    if spec.is_none() {
        c.random += 1;
    }
    // What the dead kernel started must be gone (the keeper's work).
    std::thread::sleep(Duration::from_millis(1000));
    let left = processes_under(ind.path());
    if !left.is_empty() {
        c.leftover_processes += left.len();
        eprintln!("{what}: after the kill, left running: {left:?}");
        kill_all(&left);
    }
    let starts = count(ind, "kernel.started");
    let readies = count(ind, "generation.ready") + 1;
    let mut again = ind.start()?;
    let ready =
        || count(ind, "kernel.started") > starts && count(ind, "generation.ready") >= readies;
    if !until(&mut again, Duration::from_secs(60), ready) {
        let log = ind.kernel_log();
        let tail: Vec<&str> = log.lines().rev().take(12).collect();
        eprintln!("{what}: the restart did not become ready; its log ends:\n{tail:#?}");
    }
    again.signal(15);
    let _ = again.wait(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    let left = processes_under(ind.path());
    if !left.is_empty() {
        c.leftover_processes += left.len();
        eprintln!("{what}: after a clean stop, left running: {left:?}");
        kill_all(&left);
    }
    check(ind, &written, c, &what);
    Ok(())
}

#[test]
#[ignore = "the kill -9 suite; scripts/bench-crash runs it"]
fn kill_nine_suite() -> TestResult {
    let wanted: usize =
        std::env::var("TENERAL_BENCH_CRASH_POINTS").ok().and_then(|n| n.parse().ok()).unwrap_or(40);
    let names: Vec<&str> = teneral::crash::POINTS.iter().map(|(n, _)| *n).collect();
    let mut plan: Vec<Option<String>> = Vec::new();
    'fill: for n in 1.. {
        for name in &names {
            if plan.len() >= wanted {
                break 'fill;
            }
            plan.push(Some(format!("{name}@{n}")));
            if plan.len() % 4 == 0 && plan.len() < wanted {
                plan.push(None);
            }
        }
    }
    let mut c = Counts::default();
    let t0 = Instant::now();
    let subjects =
        Subjects { talk: Individual::with_mode("mutate", "", &[])?, trial: trial_individual()? };
    for (i, spec) in plan.iter().enumerate() {
        let any = [Scenario::Talk, Scenario::Trial, Scenario::Promoted][i % 3];
        let scenario = spec.as_deref().and_then(scenario_for).unwrap_or(any);
        round(spec.as_deref(), scenario, &subjects, &mut c)?;
        eprintln!("bench-crash: {}/{} done ({:?})", i + 1, plan.len(), t0.elapsed());
    }
    println!(
        "points tried: {} (at a named point: {}, random moments: {})",
        c.tried, c.hit, c.random
    );
    let missed: Vec<&str> = names.iter().copied().filter(|n| !c.reached.contains(*n)).collect();
    println!(
        "named points reached: {} of {}; not reached: {missed:?}",
        c.reached.len(),
        names.len()
    );
    println!("lines lost: {}", c.lines_lost);
    println!("lines duplicated: {}", c.lines_duplicated);
    println!("mutations without exactly one verdict: {}", c.unanswered_or_twice);
    println!("state/lineage disagreements: {}", c.disagreements);
    println!("leftover processes: {}", c.leftover_processes);
    println!("leftover files: {}", c.leftover_files);
    println!("time: {:?}", t0.elapsed());
    let bad = c.lines_lost
        + c.lines_duplicated
        + c.unanswered_or_twice
        + c.disagreements
        + c.leftover_processes
        + c.leftover_files;
    assert_eq!(bad, 0, "{c:?}");
    Ok(())
}
