//! The kill -9 suite (`scripts/bench-crash`): fresh individuals talk, ask
//! for mutations, get promoted-generation trials that fail or go well, and
//! start after a kill between a request and its verdict (fixture body), and
//! the seed body talks (scripted stand-in); the kernel is killed at named
//! durability points (`TENERAL_TEST_CRASH_AT=<point>@<n>`) and at random
//! moments, started again, stopped, and the invariants are checked after
//! every restart.
//!
//! A dry run of every scenario first traces the points its kernel passes
//! (`TENERAL_TEST_CRASH_TRACE`), so each kill asks for a pass the scenario
//! makes, and a random moment is drawn within the scenario's length. A kill
//! counts as mid-action when the kernel died at its point (or by the random
//! kill) while the scenario was still under way.
//!
//! Ignored by default; `TENERAL_BENCH_CRASH_POINTS` says how many points to
//! try (40 unless set); `TENERAL_BENCH_CRASH_SEED=0` leaves the seed body out.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use super::born;
use super::check::{check, Counts};
use super::handover::{keep_kernel, own_kernel_commit, put_on_trial};
use super::organs::{organs_individual, OrganPaths};
use super::scenario::{count, drive, leave_a_request, Run, Scenario};
use super::strace::{self, Strace, Traced};
use crate::common::*;

/// A number from the clock, for random moments (no need for more).
fn random_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or(7);
    (nanos.wrapping_mul(6364136223846793005) >> 17) % n.max(1)
}

/// The individuals the rounds reuse (a body is built once per commit).
struct Subjects {
    talk: Individual,
    trial: (Individual, String, String),
    seed: Option<Individual>,
    launch: Option<Launch>,
    /// An individual whose body pins an organ, and the paths of the
    /// kernel's side of unpacking it, for a kernel's pid (see
    /// [`organs_individual`]).
    organs: Option<(Individual, OrganPaths)>,
}

/// The launcher's individual: its base (the install's kernel), `v2`, whose
/// own kernel (kept, a script) becomes the real kernel, and `v3`, whose own
/// kernel fails at start.
struct Launch {
    ind: Individual,
    base: String,
    v2: String,
    v3: String,
}

fn launch_individual() -> Result<Launch, Box<dyn std::error::Error>> {
    let ind = Individual::new("", &[])?;
    let base = ind.head()?;
    let v2 = own_kernel_commit(&ind, "// a kernel of its own\n", "own")?;
    keep_kernel(&ind, &v2, "kept kernel v2", true)?;
    let v3 = own_kernel_commit(&ind, "// a kernel that fails\n", "failing")?;
    keep_kernel(&ind, &v3, "kept kernel v3: cannot start, on purpose", false)?;
    born(&ind, &base)?;
    Ok(Launch { ind, base, v2, v3 })
}

fn trial_individual() -> Result<(Individual, String, String), Box<dyn std::error::Error>> {
    let ind = Individual::new("", &["TENERAL_TEST_REPLY_SECONDS=1"])?;
    let base = ind.head()?;
    set_mode(ind.path(), "silent")?;
    let silent = commit_all(ind.path(), "a silent generation")?;
    born(&ind, &base)?;
    Ok((ind, base, silent))
}

/// Makes sure the journal saw `silent` ready (one untraced Trial round, if
/// not), so that `teneralctl back` may go to it.
fn ready_silent(trial: &(Individual, String, String), written: &mut Vec<String>) -> TestResult {
    let (ind, base, silent) = trial;
    if ind.events("generation.ready").iter().any(|e| e["commit"] == silent.as_str()) {
        return Ok(());
    }
    promote_by_hand(ind, base, silent)?;
    let readies = count(ind, "generation.ready");
    let mut run = Run::new(ind.start()?, None);
    drive(Scenario::Trial, ind, &mut run, readies, written);
    run.stop();
    Ok(())
}

/// Promotes `to` as a kernel killed right after its verdict would have:
/// the journal says `mutation.accepted`, the state is still at `from`; the
/// start must finish the promotion and put `to` on trial.
fn promote_by_hand(ind: &Individual, from: &str, to: &str) -> TestResult {
    let state = serde_json::json!({"generation": from});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    let path = ind.path().join("memory/journal.jsonl");
    let mut journal = teneral_core::journal::writer::Journal::open(&path)?;
    let fields = serde_json::json!({"from": from, "to": to});
    journal.append_kernel(from, teneral_core::journal::EventKind::MutationAccepted, fields)?;
    Ok(())
}

/// Puts `to` on trial after `from` as a promotion whose own kernel began
/// its trial: the journal's `mutation.accepted`, then the lineage, trial
/// file and state that a promoting kernel leaves.
fn on_trial_by_hand(ind: &Individual, from: &str, to: &str) -> TestResult {
    let path = ind.path().join("memory/journal.jsonl");
    let mut journal = teneral_core::journal::writer::Journal::open(&path)?;
    journal.append_kernel(
        from,
        teneral_core::journal::EventKind::MutationAccepted,
        serde_json::json!({"from": from, "to": to}),
    )?;
    put_on_trial(ind, to, from)
}

/// What one round asks for.
#[derive(Clone, Debug)]
enum Kill {
    /// `point@n`.
    At(String),
    /// A random moment within the scenario's length.
    Random,
    /// None: the dry run, tracing points to this file.
    Trace(std::path::PathBuf),
    /// The `n`th invocation of durability call `call` (system-call mode).
    Call(String, u32),
    /// None: the system-call mode's dry run, recording calls to this file.
    CallTrace(std::path::PathBuf),
}

fn round(
    kill: &Kill,
    scenario: Scenario,
    subjects: &Subjects,
    length: Duration,
    c: &mut Counts,
) -> Result<(Duration, bool), Box<dyn std::error::Error>> {
    // Returns how long the scenario ran, and whether a random kill cut it.
    let (trial_ind, base, silent) = &subjects.trial;
    let mut written = Vec::new();
    let launch = || subjects.launch.as_ref().ok_or("no launcher's individual");
    let ind = match scenario {
        Scenario::Talk => &subjects.talk,
        Scenario::Undecided => {
            leave_a_request(&subjects.talk, &mut written)?;
            &subjects.talk
        }
        Scenario::Trial => {
            promote_by_hand(trial_ind, base, silent)?;
            trial_ind
        }
        Scenario::Promoted | Scenario::BackUp => {
            ready_silent(&subjects.trial, &mut written)?;
            promote_by_hand(trial_ind, silent, base)?;
            trial_ind
        }
        Scenario::BackDown => {
            ready_silent(&subjects.trial, &mut written)?;
            trial_ind
        }
        Scenario::Seed => subjects.seed.as_ref().ok_or("no seed individual")?,
        Scenario::Handover => {
            let l = launch()?;
            promote_by_hand(&l.ind, &l.base, &l.v2)?;
            &l.ind
        }
        Scenario::Rollback => {
            let l = launch()?;
            on_trial_by_hand(&l.ind, &l.base, &l.v3)?;
            &l.ind
        }
        Scenario::Organs => {
            // The archive stays; its tree and the set are made again.
            let (ind, _) = subjects.organs.as_ref().ok_or("no individual with organs")?;
            let cache = teneral::organs::cache::Cache::new(ind.path());
            for dir in [cache.root.join("trees"), cache.sets()] {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)?;
                }
            }
            ind
        }
    };
    let what = format!("{scenario:?} {kill:?}");
    let vars: Vec<(&str, String)> = match kill {
        Kill::At(spec) => vec![(teneral_core::crash::CRASH_VAR, spec.clone())],
        Kill::Trace(file) => vec![(teneral_core::crash::TRACE_VAR, file.display().to_string())],
        Kill::Random | Kill::Call(..) | Kill::CallTrace(_) => Vec::new(),
    };
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let log_before = ind.kernel_log().len();
    let readies = count(ind, "generation.ready");
    let started = Instant::now();
    let kill_at = matches!(kill, Kill::Random).then(|| {
        let ms = length.as_millis() as u64;
        started + Duration::from_millis(ms / 20 + random_below(ms * 13 / 20))
    });
    let how = match kill {
        Kill::Call(call, n) => Some(Strace::Kill { call: call.clone(), n: *n }),
        Kill::CallTrace(file) => Some(Strace::Record { file: file.clone() }),
        _ => None,
    };
    let traced = scenario.traced();
    let mut only = Vec::new();
    let mut tracer = None;
    let (kernel, pid) = match (&how, traced) {
        (Some(how), Traced::Kernel) if scenario == Scenario::Organs => {
            let (_, paths) = subjects.organs.as_ref().ok_or("no individual with organs")?;
            let (kernel, pid, attached) = strace::attach(ind, how, &|pid| paths(pid))?;
            only = paths(pid);
            tracer = Some(attached);
            (kernel, pid)
        }
        (Some(how), Traced::Kernel | Traced::Launcher) => strace::start(ind, how, traced, &[])?,
        (_, Traced::Back) if scenario == Scenario::BackDown => {
            (Kernel { child: None, log: ind.path().join("kernel.log") }, 0)
        }
        _ => {
            let kernel = ind.start_with(&vars)?;
            let pid = kernel.pid();
            (kernel, pid)
        }
    };
    let mut run = Run::of(kernel, pid, kill_at);
    run.tracer = tracer;
    if traced == Traced::Back {
        run.back = how;
    }
    run.back_to = match scenario {
        // From the generation the kernel was left at, to the other one.
        Scenario::BackDown => {
            let at = super::state_of(ind.path())["generation"].as_str().map(str::to_owned);
            Some(if at.as_ref() == Some(base) { silent } else { base }.clone())
        }
        // Back to the generation the promotion came from.
        Scenario::Promoted | Scenario::BackUp => Some(silent.clone()),
        _ => None,
    };
    drive(scenario, ind, &mut run, readies, &mut written);
    if traced == Traced::Back {
        // The kernel was not what the round killed: it stops cleanly.
        run.stop();
    }
    let took = started.elapsed();
    if let Kill::At(_) | Kill::Call(..) = kill {
        // A point passed just after what the scenario waited for.
        run.until(Duration::from_secs(3), || false);
    }
    let died_at_point = || {
        let log = ind.kernel_log();
        log.get(log_before.min(log.len())..).is_some_and(|l| l.contains("crash point "))
    };
    // strace ends as its tracee did: by SIGKILL only at the injected call.
    let killed_by_call = match traced {
        Traced::Back => run.back_status.flatten().and_then(|s| s.signal()) == Some(libc::SIGKILL),
        Traced::Kernel | Traced::Launcher => {
            !run.alive() && run.status.and_then(|s| s.signal()) == Some(libc::SIGKILL)
        }
    };
    let mid_action = match kill {
        Kill::At(_) => !run.alive() && died_at_point(),
        Kill::Random => run.killed,
        Kill::Call(..) => killed_by_call,
        Kill::Trace(_) | Kill::CallTrace(_) => false,
    };
    if run.alive() {
        run.kill();
    }
    if let Some(mut tracer) = run.tracer.take() {
        // It ends with its tracee; one that has not is killed.
        strace::finish(&mut tracer, Duration::from_secs(10));
    }
    if let Kill::Trace(file) = kill {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let passes = c.passes.entry(scenario).or_default();
        for name in text.lines().filter_map(|l| l.strip_prefix(&format!("{pid} "))) {
            *passes.entry(name.to_owned()).or_default() += 1;
        }
        let _ = std::fs::remove_file(file);
    } else if let Kill::CallTrace(file) = kill {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.is_empty() {
            let log = ind.kernel_log();
            let tail: Vec<&str> = log.lines().rev().take(6).collect();
            eprintln!("{what}: the log ends: {tail:?}");
            let said: Vec<String> = ind
                .kernel_log()
                .lines()
                .filter(|l| l.starts_with("strace"))
                .map(str::to_owned)
                .collect();
            eprintln!("{what}: strace recorded nothing ({:?}): {said:?}", run.status);
        }
        let most = strace::most_per_thread(&text, ind.path(), &only);
        if most.is_empty() {
            let first: Vec<&str> = text.lines().take(8).collect();
            eprintln!("{what}: no durability call in the record, which begins: {first:?}");
        }
        c.calls.insert(scenario, most);
        let _ = std::fs::remove_file(file);
    } else if let Kill::Call(..) = kill {
        c.tried += 1;
        if mid_action {
            c.mid_action += 1;
        } else {
            c.not_mid_action.push(what.clone());
        }
    } else {
        c.tried += 1;
        if mid_action {
            c.mid_action += 1;
        } else {
            c.not_mid_action.push(what.clone());
        }
        if let (Kill::At(spec), true) = (kill, died_at_point()) {
            c.reached.insert(spec.split('@').next().unwrap_or_default().to_owned());
        }
        if let Kill::Random = kill {
            c.random += 1;
        }
    }
    super::check::after_kill(ind, c, &what);
    let starts = count(ind, "kernel.started");
    let readies = count(ind, "generation.ready") + 1;
    let mut again = Run::new(ind.start()?, None);
    let ready =
        || count(ind, "kernel.started") > starts && count(ind, "generation.ready") >= readies;
    if !again.until(Duration::from_secs(120), ready) {
        let log = ind.kernel_log();
        let tail: Vec<&str> = log.lines().rev().take(12).collect();
        eprintln!("{what}: the restart did not become ready; its log ends:\n{tail:#?}");
        c.unstartable += 1;
    }
    if again.alive() {
        again.signal(15);
        again.until(Duration::from_secs(30), || false);
    }
    check(ind, &written, c, &what);
    Ok((took, run.killed))
}

/// The named kills to make: every pass a scenario was seen to make, point
/// by point in turn (so every point comes early), `wanted` in all (the
/// list is gone through again when it is shorter).
fn plan(
    passes: &BTreeMap<Scenario, BTreeMap<String, u32>>,
    wanted: usize,
) -> Vec<(Kill, Scenario)> {
    let mut per_point: BTreeMap<&str, Vec<(u32, Scenario)>> = BTreeMap::new();
    for (scenario, points) in passes {
        for (name, n) in points {
            let Some(name) =
                teneral_core::crash::POINTS.iter().map(|(p, _)| *p).find(|p| p == name)
            else {
                continue;
            };
            per_point.entry(name).or_default().extend((1..=*n).map(|i| (i, *scenario)));
        }
    }
    for list in per_point.values_mut() {
        list.sort();
    }
    let deepest = per_point.values().map(Vec::len).max().unwrap_or(0);
    let mut once = Vec::new();
    for k in 0..deepest {
        for (name, list) in &per_point {
            if let Some((n, scenario)) = list.get(k) {
                once.push((Kill::At(format!("{name}@{n}")), *scenario));
            }
        }
    }
    once.iter().cycle().take(if once.is_empty() { 0 } else { wanted }).cloned().collect()
}

#[test]
#[ignore = "the kill -9 suite; scripts/bench-crash runs it"]
fn kill_nine_suite() -> TestResult {
    let wanted: usize =
        std::env::var("TENERAL_BENCH_CRASH_POINTS").ok().and_then(|n| n.parse().ok()).unwrap_or(40);
    let with_seed = std::env::var("TENERAL_BENCH_CRASH_SEED").as_deref() != Ok("0");
    let t0 = Instant::now();
    let subjects = Subjects {
        talk: Individual::with_mode("mutate", "", &[])?,
        trial: trial_individual()?,
        seed: if with_seed { Some(Individual::seed("", &[])?) } else { None },
        launch: None,
        organs: None,
    };
    let mut scenarios =
        vec![Scenario::Talk, Scenario::Trial, Scenario::Promoted, Scenario::Undecided];
    if with_seed {
        scenarios.push(Scenario::Seed);
    }
    // The dry run: what each scenario passes, and how long it takes.
    let mut c = Counts::default();
    let mut lengths = BTreeMap::new();
    let traces = tempfile::tempdir()?;
    for scenario in &scenarios {
        // Twice: the first builds what the scenario runs (and may take
        // longer); a pass counts only when both made it.
        let mut seen: Vec<BTreeMap<String, u32>> = Vec::new();
        for time in 0..2 {
            let file = traces.path().join(format!("{scenario:?}-{time}"));
            let (took, _) =
                round(&Kill::Trace(file), *scenario, &subjects, Duration::ZERO, &mut c)?;
            let shortest = lengths.entry(*scenario).or_insert(took);
            *shortest = took.min(*shortest);
            seen.push(c.passes.remove(scenario).unwrap_or_default());
        }
        let both: BTreeMap<String, u32> = seen[0]
            .iter()
            .filter_map(|(name, n)| Some((name.clone(), (*n).min(*seen[1].get(name)?))))
            .collect();
        eprintln!("bench-crash: dry runs of {scenario:?}: {:?}, {both:?}", lengths[scenario]);
        c.passes.insert(*scenario, both);
    }
    // Four named points, then a random moment.
    let named = wanted - wanted / 5;
    let mut rounds = plan(&c.passes, named);
    for i in 0..wanted - rounds.len() {
        let at = (i * 5 + 4).min(rounds.len());
        rounds.insert(at, (Kill::Random, scenarios[i % scenarios.len()]));
    }
    for (i, (kill, scenario)) in rounds.iter().enumerate() {
        let length = lengths.get(scenario).copied().unwrap_or(Duration::from_secs(5));
        let mut length = length;
        for attempt in 1.. {
            let (took, killed) = round(kill, *scenario, &subjects, length, &mut c)?;
            if !matches!(kill, Kill::Random) || killed {
                break;
            }
            // The scenario ended before its random moment: the shortest
            // whole run seen bounds the next moment, drawn again (at most
            // twice; the rounds stay checked, and are counted as redrawn).
            let shortest = lengths.entry(*scenario).or_insert(took);
            *shortest = took.min(*shortest);
            length = *shortest;
            if attempt == 3 {
                break;
            }
            c.redraw();
        }
        eprintln!(
            "bench-crash: {}/{} done ({:?}): {scenario:?} {kill:?}",
            i + 1,
            rounds.len(),
            t0.elapsed()
        );
    }
    c.report(t0.elapsed());
    Ok(())
}

/// A comma-separated list from `var`, or `default` when it is unset.
fn list_var(var: &str, default: &[&str]) -> Vec<String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => {
            v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()
        }
        _ => default.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Which invocations of a call made `seen` times (most per thread) to kill
/// at, `most` at most: all when they fit; else the first half of `most`, and
/// the rest spread evenly up to the last, so late transitions are met too.
fn invocations(seen: u32, most: u32) -> Vec<u32> {
    if seen <= most {
        return (1..=seen).collect();
    }
    let first = (most / 2).max(1);
    let rest = most - first;
    let mut ns: Vec<u32> = (1..=first).collect();
    for k in 1..=rest {
        ns.push(first + (seen - first) * k / rest);
    }
    ns.dedup();
    ns
}

/// One point's line of the table, from the counts before and after it.
fn outcome(before: &Counts, after: &Counts) -> String {
    if after.mid_action == before.mid_action {
        return "not reached".to_owned();
    }
    let broke: Vec<String> = [
        ("lost", after.lines_lost - before.lines_lost),
        ("duplicated", after.lines_duplicated - before.lines_duplicated),
        ("unanswered mutations", after.unanswered_or_twice - before.unanswered_or_twice),
        ("unanswered lines", after.lines_unanswered - before.lines_unanswered),
        ("contradictions", after.disagreements - before.disagreements),
        ("leftover processes", after.leftover_processes - before.leftover_processes),
        ("leftover files", after.leftover_files - before.leftover_files),
        ("unstartable", after.unstartable - before.unstartable),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{n} {what}"))
    .collect();
    if broke.is_empty() {
        "killed, ok".to_owned()
    } else {
        format!("killed, {}", broke.join(", "))
    }
}

/// A copy of the figures the table's outcomes are the difference of.
fn figures(c: &Counts) -> Counts {
    Counts {
        mid_action: c.mid_action,
        lines_lost: c.lines_lost,
        lines_duplicated: c.lines_duplicated,
        unanswered_or_twice: c.unanswered_or_twice,
        lines_unanswered: c.lines_unanswered,
        disagreements: c.disagreements,
        leftover_processes: c.leftover_processes,
        leftover_files: c.leftover_files,
        unstartable: c.unstartable,
        ..Counts::default()
    }
}

/// The system-call mode (`scripts/bench-crash --syscalls`): in each
/// scenario its traced program (the kernel, the launcher, or the owner's
/// `teneralctl back`; [`Scenario::traced`]) runs under `strace`, killed at
/// the Nth invocation of one durability call (rename, renameat2, fsync,
/// fdatasync, unlink, unlinkat, a write to the journal or the state); the
/// kernel is then started again normally and checked as a kill -9 round
/// is. A dry run per scenario records how many of each call one thread
/// makes, and the points are drawn from it. `TENERAL_BENCH_SYSCALLS` (the
/// calls, comma-separated; all unless set), `TENERAL_BENCH_SYSCALLS_N`
/// (invocations per call and scenario, at most; 3 unless set),
/// `TENERAL_BENCH_SYSCALLS_SCENARIOS` (Talk, Trial, Promoted, Undecided,
/// Seed, BackDown, BackUp, Handover, Rollback, Organs; all unless set).
#[test]
#[ignore = "the kill -9 suite's system-call mode; scripts/bench-crash --syscalls runs it"]
fn syscall_suite() -> TestResult {
    let calls = list_var("TENERAL_BENCH_SYSCALLS", &strace::CALLS);
    let most: u32 =
        std::env::var("TENERAL_BENCH_SYSCALLS_N").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    let all = [
        Scenario::Talk,
        Scenario::Trial,
        Scenario::Promoted,
        Scenario::Undecided,
        Scenario::Seed,
        Scenario::BackDown,
        Scenario::BackUp,
        Scenario::Handover,
        Scenario::Rollback,
        Scenario::Organs,
    ];
    let names: Vec<String> = all.iter().map(|s| format!("{s:?}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let wanted = list_var("TENERAL_BENCH_SYSCALLS_SCENARIOS", &names);
    let scenarios: Vec<Scenario> =
        all.iter().copied().filter(|s| wanted.contains(&format!("{s:?}"))).collect();
    for call in &calls {
        if !strace::CALLS.contains(&call.as_str()) {
            return Err(format!("{call} is not one of {:?}", strace::CALLS).into());
        }
    }
    let t0 = Instant::now();
    let subjects = Subjects {
        talk: Individual::with_mode("mutate", "", &[])?,
        trial: trial_individual()?,
        seed: if scenarios.contains(&Scenario::Seed) {
            Some(Individual::seed("", &[])?)
        } else {
            None
        },
        launch: if scenarios.iter().any(|s| s.traced() == Traced::Launcher) {
            Some(launch_individual()?)
        } else {
            None
        },
        organs: if scenarios.contains(&Scenario::Organs) {
            Some(organs_individual()?)
        } else {
            None
        },
    };
    let mut c = Counts::default();
    let records = tempfile::tempdir()?;
    let mut rounds = Vec::new();
    for scenario in &scenarios {
        // Twice: the first builds what the scenario runs; a count is the
        // smaller of the two.
        let mut seen: Vec<BTreeMap<String, u32>> = Vec::new();
        for time in 0..2 {
            let file = records.path().join(format!("{scenario:?}-{time}"));
            round(&Kill::CallTrace(file), *scenario, &subjects, Duration::ZERO, &mut c)?;
            seen.push(c.calls.remove(scenario).unwrap_or_default());
        }
        let both: BTreeMap<String, u32> = seen[0]
            .iter()
            .filter_map(|(name, n)| Some((name.clone(), (*n).min(*seen[1].get(name)?))))
            .collect();
        eprintln!("bench-crash --syscalls: dry runs of {scenario:?}: {both:?}");
        if both.is_empty() {
            // A scenario whose program made no durability call would add
            // no point and pass unseen.
            return Err(format!(
                "{scenario:?}: its {:?} made no durability call in either dry run; see the \
                 kernel log of its individual, or whether the calls moved to another process",
                scenario.traced()
            )
            .into());
        }
        for call in &calls {
            let seen = both.get(call).copied().unwrap_or(0);
            let ns = invocations(seen, most).into_iter().enumerate();
            rounds.extend(ns.map(|(k, n)| (k, *scenario, call.clone(), n)));
        }
        c.calls.insert(*scenario, both);
    }
    // Each scenario's and call's first invocation first, then the second,
    // and so on: a run cut short has met every transition.
    rounds.sort_by_key(|(k, ..)| *k);
    let rounds: Vec<(Scenario, String, u32)> =
        rounds.into_iter().map(|(_, scenario, call, n)| (scenario, call, n)).collect();
    let mut table = Vec::new();
    for (i, (scenario, call, n)) in rounds.iter().enumerate() {
        let before = figures(&c);
        round(&Kill::Call(call.clone(), *n), *scenario, &subjects, Duration::ZERO, &mut c)?;
        let outcome = outcome(&before, &c);
        eprintln!(
            "bench-crash --syscalls: {}/{} done ({:?}): {scenario:?} {call} {n}: {outcome}",
            i + 1,
            rounds.len(),
            t0.elapsed()
        );
        table.push((*scenario, call.clone(), *n, outcome));
    }
    println!("{:<10} {:<10} {:>5}  outcome", "scenario", "call", "N");
    for (scenario, call, n, outcome) in &table {
        println!("{:<10} {call:<10} {n:>5}  {outcome}", format!("{scenario:?}"));
    }
    println!("calls each scenario's kernel made (most per thread): {:?}", c.calls);
    let reached = c.mid_action;
    println!(
        "points run: {} (killed at their call: {reached}; not reached: {})",
        c.tried,
        c.tried - reached
    );
    println!("lost: {}", c.lines_lost);
    println!("duplicated: {}", c.lines_duplicated);
    println!("unanswered mutations: {}", c.unanswered_or_twice);
    println!("unanswered owner lines: {}", c.lines_unanswered);
    println!("contradictions: {}", c.disagreements);
    println!("leftovers: {} processes, {} files", c.leftover_processes, c.leftover_files);
    println!("unstartable: {}", c.unstartable);
    println!("time: {:?}", t0.elapsed());
    let bad = c.lines_lost
        + c.lines_duplicated
        + c.unanswered_or_twice
        + c.lines_unanswered
        + c.disagreements
        + c.leftover_processes
        + c.leftover_files
        + c.unstartable;
    assert_eq!(bad, 0, "{c:?}");
    Ok(())
}
