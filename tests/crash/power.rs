//! The power-cut check (`scripts/bench-crash --power`): a transition
//! (owner-line intake, rollback, promotion) is run once with the kernel
//! under `strace`, which records every file-system call it makes
//! ([`record`]); the crash model ([`states`]) turns the record into the
//! states of the individual's files a power cut could leave after each
//! call; each state checked is written out as a copy of the individual, a
//! kernel is started on it, stopped, and the invariants of the kill -9
//! suite ([`super::check`]) are checked. A table gives, for each
//! transition: the calls recorded, the crash points, the states the model
//! allows, the distinct ones, those among them that hold an empty ref file
//! (every one of them is counted, not only those checked: none may), how
//! many were checked, and the failures by invariant.
//!
//! The check proves it can fail: the intake's record is checked again with
//! the journal's syncs taken as never made, a deliberately broken rule,
//! and the suite fails unless that row reports a failure.
//!
//! Ignored by default. `TENERAL_BENCH_POWER_STATES` (states checked per
//! transition, 24 unless set), `TENERAL_BENCH_POWER_SCENARIOS` (Intake,
//! Rollback, Promotion; all unless set); `TENERAL_BENCH_POWER_KEEP` keeps
//! the records and the copy of every state that did not start, and prints
//! where.

mod record;
mod states;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::born;
use super::check::{answered, check, Counts};
use super::scenario::{count, Run};
use crate::common::*;
use states::{Entry, Fs, Op};

/// Paths the model leaves out, taken whole from the state before the
/// transition: the kernel's log, the checkouts (remade at every start, or
/// the body's), the build targets and the gate's directory (its checkouts,
/// targets and a memo that only saves time), and trees renamed away.
fn kept(path: &str) -> bool {
    const WHOLE: [&str; 6] = [
        "kernel.log",
        ".teneral/bin",
        ".teneral/live",
        ".teneral/candidate",
        ".teneral/target",
        ".teneral/gate",
    ];
    WHOLE.iter().any(|w| path == *w || path.starts_with(&format!("{w}/")))
        || path.contains(".gone-")
}

fn paths(op: &Op) -> Vec<&str> {
    match op {
        Op::Open { path, .. }
        | Op::Mkdir { path }
        | Op::Write { path, .. }
        | Op::Truncate { path, .. }
        | Op::Remove { path }
        | Op::Sync { path } => vec![path],
        Op::Rename { from, to } | Op::Link { from, to } => vec![from, to],
        Op::SyncAll => vec![],
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Transition {
    /// A waiting owner line is taken in and answered.
    Intake,
    /// A promoted generation that never replies is rolled back (its
    /// promotion, journaled, is finished by the start first).
    Rollback,
    /// A mutation the gate accepts is promoted and comes up.
    Promotion,
}

/// One transition, recorded.
struct Recorded {
    /// The individual as it was before (the base every state starts from).
    base: tempfile::TempDir,
    ops: Vec<Op>,
    unknown: BTreeMap<String, usize>,
    /// Owner lines written before it.
    written: Vec<String>,
}

const LONG: Duration = Duration::from_secs(300);

/// Copies the individual as it is (`cp -a`, within a time limit).
fn snapshot(ind: &Individual) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let base = tempfile::Builder::new().prefix("tnl-base").tempdir()?;
    let status = std::process::Command::new("timeout")
        .args(["300", "cp", "-a", "--"])
        .arg(format!("{}/.", ind.path().display()))
        .arg(base.path())
        .status_within(QUICK)?;
    if !status.success() {
        return Err(format!("cp -a of {} failed: {status}", ind.path().display()).into());
    }
    Ok(base)
}

/// Starts a kernel, waits until `done` holds, stops it.
fn run_until(ind: &Individual, what: &str, done: impl Fn() -> bool) -> TestResult {
    let mut run = Run::new(ind.start()?, None);
    let reached = run.until(LONG, &done);
    run.signal(15);
    run.until(Duration::from_secs(30), || false);
    if run.alive() {
        run.kill();
    }
    if !reached {
        return Err(format!("{what} did not come:\n{}", ind.kernel_log()).into());
    }
    Ok(())
}

/// When a recorded transition is over.
type Done = Box<dyn Fn(&Individual) -> bool>;

/// Prepares `transition`'s individual, records the transition, and
/// returns the record read back.
fn record_transition(
    transition: Transition,
    dir: &Path,
) -> Result<(Recorded, Individual), Box<dyn std::error::Error>> {
    let mut written = Vec::new();
    let (ind, done): (Individual, Done) = match transition {
        Transition::Intake => {
            let ind = Individual::new("", &[])?;
            run_until(&ind, "the birth turn", || count(&ind, "turn.ended") >= 1)?;
            let name = teneral_core::owner::write_line(ind.path(), "are you there?")?;
            written.push(name.clone());
            let turns = count(&ind, "turn.ended");
            (ind, Box::new(move |ind| count(ind, "turn.ended") > turns))
        }
        Transition::Rollback => {
            let ind = Individual::new("", &["TENERAL_TEST_REPLY_SECONDS=1"])?;
            let base = ind.head()?;
            set_mode(ind.path(), "silent")?;
            let silent = commit_all(ind.path(), "a silent generation")?;
            born(&ind, &base)?;
            let state = serde_json::json!({"generation": base});
            std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
            let path = ind.path().join("memory/journal.jsonl");
            let mut journal = teneral_core::journal::writer::Journal::open(&path)?;
            journal.append_kernel(
                &base,
                teneral_core::journal::EventKind::MutationAccepted,
                serde_json::json!({"from": base, "to": silent}),
            )?;
            let readies = count(&ind, "generation.ready");
            let base_ready = move |ind: &Individual| {
                count(ind, "generation.rolledback") >= 1
                    && ind.events("generation.ready").len() > readies + 1
            };
            (ind, Box::new(base_ready))
        }
        Transition::Promotion => {
            let ind = Individual::with_mode("mutate", "", &[])?;
            run_until(&ind, "the birth turn", || count(&ind, "turn.ended") >= 1)?;
            let workspace = ind.path().join(".teneral/candidate");
            let main = workspace.join("body/src/main.rs");
            let text = std::fs::read_to_string(&main)?
                .replace("const MODE: &str = \"mutate\";", "const MODE: &str = \"normal\";")
                .replace(
                    "const REPLY_PREFIX: &str = \"\";",
                    "const REPLY_PREFIX: &str = \"v2: \";",
                );
            std::fs::write(&main, text)?;
            let v2 = commit_all(&workspace, "v2")?;
            written.push(teneral_core::owner::write_line(ind.path(), &v2)?);
            let up = move |ind: &Individual| {
                ind.journal()
                    .iter()
                    .any(|e| e["type"] == "generation.ready" && e["commit"] == v2.as_str())
                    || count(ind, "mutation.rejected") > 0
            };
            (ind, Box::new(up))
        }
    };
    let base = snapshot(&ind)?;
    let file = dir.join(format!("{transition:?}.strace"));
    let (kernel, pid) = record::start(&ind, &file)?;
    let mut run = Run::of(kernel, pid, None);
    let reached = run.until(LONG, || done(&ind));
    run.signal(15);
    run.until(Duration::from_secs(30), || false);
    if run.alive() {
        run.kill();
    }
    if !reached {
        return Err(
            format!("{transition:?}: the transition did not end:\n{}", ind.kernel_log()).into()
        );
    }
    if transition == Transition::Promotion && count(&ind, "mutation.accepted") == 0 {
        return Err(format!("the gate refused the promotion:\n{}", ind.kernel_log()).into());
    }
    let text = std::fs::read_to_string(&file)?;
    let (mut ops, calls) = record::operations(&text, ind.path());
    ops.retain(|op| !paths(op).iter().any(|p| kept(p)));
    let mut unknown: BTreeMap<String, usize> = BTreeMap::new();
    for (call, path) in calls.iter().filter(|(_, path)| !kept(path)) {
        eprintln!("bench-crash --power: {transition:?}: not modelled: {call} {path}");
        *unknown.entry(call.clone()).or_default() += 1;
    }
    Ok((Recorded { base, ops, unknown, written }, ind))
}

/// The crash states of a record: every distinct one found, each as the
/// crash point it was found at and its choice, the first such; the count
/// the model allows (saturated); the crash points; and the distinct
/// states a kill at a call could leave too (all pending kept).
struct Found {
    states: Vec<(usize, Vec<usize>)>,
    /// Each state's fingerprint.
    prints: Vec<u64>,
    allowed: u128,
    points: usize,
    kill_like: BTreeSet<usize>,
    /// Distinct states holding a ref file that is empty (git cannot read
    /// it, and the start cannot move the lineage past it).
    empty_refs: usize,
}

/// Whether `tree` holds an empty ref file under `.git/refs/`.
fn holds_an_empty_ref(tree: &BTreeMap<String, Entry>) -> bool {
    tree.iter().any(|(path, entry)| {
        path.starts_with(".git/refs/")
            && !path.ends_with(".lock")
            && matches!(entry, Entry::File(bytes, _) if bytes.is_empty())
    })
}

fn find_states(rec: &Recorded, skip_sync_of: Option<&str>) -> Result<Found, std::io::Error> {
    let mut fs = Fs::from_base(rec.base.path(), &kept)?;
    fs.skip_sync_of = skip_sync_of.map(str::to_owned);
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut found = Found {
        states: Vec::new(),
        prints: Vec::new(),
        allowed: 0,
        points: 0,
        kill_like: BTreeSet::new(),
        empty_refs: 0,
    };
    for k in 0..=rec.ops.len() {
        if k > 0 {
            fs.apply(&rec.ops[k - 1]);
        }
        found.points += 1;
        let counts: Vec<usize> = fs.pending().iter().map(|(_, c)| *c).collect();
        let (total, choices) = states::choices(&counts, 64, 8, k as u64 + 1);
        found.allowed = found.allowed.saturating_add(total);
        let most: Vec<usize> = counts.iter().map(|c| c - 1).collect();
        for choice in choices {
            let tree = fs.crash(&choice);
            let print = states::fingerprint(&tree);
            let index = *seen.entry(print).or_insert_with(|| {
                found.states.push((k, choice.clone()));
                found.prints.push(print);
                found.empty_refs += usize::from(holds_an_empty_ref(&tree));
                found.states.len() - 1
            });
            if choice == most {
                found.kill_like.insert(index);
            }
        }
    }
    Ok(found)
}

/// The tree of state `(k, choice)`.
fn tree_of(
    rec: &Recorded,
    skip_sync_of: Option<&str>,
    k: usize,
    choice: &[usize],
) -> Result<BTreeMap<String, Entry>, std::io::Error> {
    let mut fs = Fs::from_base(rec.base.path(), &kept)?;
    fs.skip_sync_of = skip_sync_of.map(str::to_owned);
    for op in &rec.ops[..k] {
        fs.apply(op);
    }
    Ok(fs.crash(choice))
}

/// Which of `n` states to check, `budget` at most: the ones only a power
/// cut leaves first, spread evenly, then kill-like ones.
fn pick(n: usize, kill_like: &BTreeSet<usize>, budget: usize) -> Vec<usize> {
    let power: Vec<usize> = (0..n).filter(|i| !kill_like.contains(i)).collect();
    let kills: Vec<usize> = (0..n).filter(|i| kill_like.contains(i)).collect();
    let spread = |list: &[usize], m: usize| -> Vec<usize> {
        if list.len() <= m {
            return list.to_vec();
        }
        (0..m).map(|j| list[j * list.len() / m]).collect()
    };
    let mut out = spread(&power, budget);
    out.extend(spread(&kills, budget - out.len()));
    out
}

/// Starts a kernel on the state's copy, waits until it is ready, stops
/// it, and checks the invariants.
fn check_state(
    rec: &Recorded,
    tree: &BTreeMap<String, Entry>,
    c: &mut Counts,
    what: &str,
) -> TestResult {
    let copy = Individual { dir: tempfile::Builder::new().prefix("tnl").tempdir()? };
    states::materialise(tree, rec.base.path(), copy.path())?;
    // The lines the state still holds, journaled or waiting: each must
    // be answered (a line the state lost is the check's to count).
    let held: Vec<&String> = {
        let (journal, waiting) = (copy.journal(), copy.owner_files());
        let journaled =
            |name: &str| journal.iter().any(|e| e["type"] == "owner.line" && e["file"] == name);
        rec.written.iter().filter(|n| waiting.contains(n) || journaled(n)).collect()
    };
    let starts = count(&copy, "kernel.started");
    let readies = count(&copy, "generation.ready");
    let mut run = Run::new(copy.start()?, None);
    // Ready, and every owner line answered (or its turn named as cut).
    let ready = || {
        let journal = copy.journal();
        let of = |kind: &str| journal.iter().filter(|e| e["type"] == kind).count();
        of("kernel.started") > starts
            && of("generation.ready") > readies
            && held.iter().all(|name| answered(&journal, name))
    };
    if !run.until(Duration::from_secs(120), ready) {
        let log =
            String::from_utf8_lossy(&std::fs::read(copy.path().join("kernel.log"))?).into_owned();
        let tail: Vec<&str> = log.lines().rev().take(12).collect();
        eprintln!(
            "{what}: the start did not become ready ({} bytes of log); its log ends:\n{tail:#?}",
            log.len()
        );
        c.unstartable += 1;
        if std::env::var_os("TENERAL_BENCH_POWER_KEEP").is_some() {
            eprintln!("kept at {}", copy.path().display());
            std::mem::forget(copy.dir);
            return Ok(());
        }
    }
    if run.alive() {
        run.signal(15);
        run.until(Duration::from_secs(30), || false);
    }
    if run.alive() {
        run.kill();
    }
    check(&copy, &rec.written, c, what);
    Ok(())
}

/// The failures a row counts, by invariant.
fn failures(c: &Counts) -> Vec<(&'static str, usize)> {
    vec![
        ("lost", c.lines_lost),
        ("duplicated", c.lines_duplicated),
        ("unanswered mutations", c.unanswered_or_twice),
        ("unanswered lines", c.lines_unanswered),
        ("contradictions", c.disagreements),
        ("leftover processes", c.leftover_processes),
        ("leftover files", c.leftover_files),
        ("unstartable", c.unstartable),
    ]
}

struct Row {
    name: String,
    calls: usize,
    found: Found,
    checked: usize,
    counts: Counts,
}

/// Checks up to `budget` of the states of `rec` under the model (with the
/// syncs of `skip_sync_of` taken as never made); with `sound`, only the
/// states the broken rule adds to those of the sound model, the latest
/// first.
fn check_record(
    rec: &Recorded,
    name: String,
    skip_sync_of: Option<&str>,
    budget: usize,
    sound: Option<&Found>,
    rows: &mut Vec<Row>,
) -> TestResult {
    let found = find_states(rec, skip_sync_of)?;
    let picks = match sound {
        None => pick(found.states.len(), &found.kill_like, budget),
        Some(sound) => {
            let known: BTreeSet<u64> = sound.prints.iter().copied().collect();
            // The latest first: the more the broken rule has left unsynced.
            let new = (0..found.states.len()).rev().filter(|i| !known.contains(&found.prints[*i]));
            new.take(budget).collect()
        }
    };
    let mut c = Counts::default();
    for (n, i) in picks.iter().enumerate() {
        let (k, choice) = &found.states[*i];
        let tree = tree_of(rec, skip_sync_of, *k, choice)?;
        let what = format!("{name}: state {i} (after call {k} of {}, {choice:?})", rec.ops.len());
        check_state(rec, &tree, &mut c, &what)?;
        eprintln!("bench-crash --power: {name}: {}/{} checked", n + 1, picks.len());
    }
    rows.push(Row { name, calls: rec.ops.len(), found, checked: picks.len(), counts: c });
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<34} {:>6} {:>7} {:>12} {:>9} {:>10} {:>8}  failures by invariant",
        "transition", "calls", "points", "states", "distinct", "empty ref", "checked"
    );
    for row in rows {
        let broke: Vec<String> = failures(&row.counts)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        let states = if row.found.allowed == u128::MAX {
            "> 3.4e38".to_owned()
        } else {
            row.found.allowed.to_string()
        };
        println!(
            "{:<34} {:>6} {:>7} {:>12} {:>9} {:>10} {:>8}  {}",
            row.name,
            row.calls,
            row.found.points,
            states,
            row.found.states.len(),
            row.found.empty_refs,
            row.checked,
            if broke.is_empty() { "none".to_owned() } else { broke.join(", ") }
        );
    }
}

#[test]
#[ignore = "the power-cut check; scripts/bench-crash --power runs it"]
fn power_cut_suite() -> TestResult {
    if std::process::Command::new("timeout")
        .args(["10", "strace", "-V"])
        .stdout(std::process::Stdio::null())
        .status_within(QUICK)
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        skip("the power-cut check records with strace, which is not installed");
        return Ok(());
    }
    let budget: usize =
        std::env::var("TENERAL_BENCH_POWER_STATES").ok().and_then(|n| n.parse().ok()).unwrap_or(24);
    let wanted = std::env::var("TENERAL_BENCH_POWER_SCENARIOS").unwrap_or_default();
    let all = [Transition::Intake, Transition::Rollback, Transition::Promotion];
    let transitions: Vec<Transition> = all
        .into_iter()
        .filter(|t| {
            wanted.trim().is_empty() || wanted.split(',').any(|w| w.trim() == format!("{t:?}"))
        })
        .collect();
    let t0 = Instant::now();
    let records = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let mut proof = None;
    for transition in &transitions {
        // The individual lives on while its states are checked: the copies'
        // workspaces and checkouts name it as their origin.
        let (rec, _ind) = record_transition(*transition, records.path())?;
        eprintln!(
            "bench-crash --power: {transition:?} recorded ({} calls on the individual's files, \
             not modelled: {:?}) ({:?})",
            rec.ops.len(),
            rec.unknown,
            t0.elapsed()
        );
        check_record(&rec, format!("{transition:?}"), None, budget, None, &mut rows)?;
        if *transition == Transition::Intake {
            // The deliberately broken rule: the journal's syncs never made.
            let sound = find_states(&rec, None)?;
            let name = "Intake, journal syncs skipped".to_owned();
            let journal = Some("memory/journal.jsonl");
            check_record(&rec, name, journal, budget.clamp(2, 6), Some(&sound), &mut rows)?;
            proof = rows.last().map(|r| failures(&r.counts).iter().map(|(_, n)| n).sum::<usize>());
        }
        if std::env::var_os("TENERAL_BENCH_POWER_KEEP").is_some() {
            eprintln!(
                "bench-crash --power: {transition:?}: its base is kept in {}",
                rec.base.path().display()
            );
            std::mem::forget(rec.base);
        }
    }
    if std::env::var_os("TENERAL_BENCH_POWER_KEEP").is_some() {
        eprintln!("bench-crash --power: the records are kept in {}", records.path().display());
        std::mem::forget(records);
    }
    print_table(&rows);
    println!("time: {:?}", t0.elapsed());
    let sound: usize = rows
        .iter()
        .filter(|r| !r.name.contains("skipped"))
        .map(|r| failures(&r.counts).iter().map(|(_, n)| n).sum::<usize>())
        .sum();
    assert_eq!(sound, 0, "a state a power cut could leave is not recovered (see above)");
    let empty: usize = rows.iter().map(|r| r.found.empty_refs).sum();
    assert_eq!(empty, 0, "a power cut could leave a ref empty: libgit2 wrote it unsynced");
    if let Some(caught) = proof {
        assert!(caught > 0, "the broken rule (journal syncs skipped) went unreported");
    }
    Ok(())
}
