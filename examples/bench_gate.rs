//! Benchmark behind `scripts/bench-gate`: the time from a mutation request to
//! the gate's verdict for a one-line change of the seed body, with a warm
//! cache; each step's wall time split into cargo's compile, the test
//! binaries' runs and the rest (process starts, the cage, waiting); the
//! smoke run's build and its body's start, ready and answer; and the gate's
//! own overhead (everything but the checks, the build and the smoke run on
//! the verdict's critical path) as a fraction of the total.
//!
//! The individual is a clone of this repository at HEAD (the real kernel and
//! the real seed body). A first mutation warms the caches and the memo; the
//! next `--rounds N` (default 1) are measured. Each measured round prints
//! `bench-gate: verdict <seconds>` for scripts. A body-only change runs none
//! of the kernel's checks (the running generation's kernel needs none).
//!
//! `--kernel-change`: the first (warming) mutation changes a kernel file
//! instead (a comment, on a local species branch the individual takes it
//! from), so the gate runs the kernel's type check and whole suite in its
//! cage, as it does for a species change ([`kernel_change`]).
//!
//! `--first [SECONDS]`: a new individual's first mutation instead ([`first`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use teneral::events::SharedJournal;
use teneral::gate::{Gate, Verdict};
use teneral::settings::Settings;
use teneral_core::journal::{writer::Journal, JOURNAL_PATH};

fn main() -> Result<()> {
    // The gate builds the body through the cage's helper, which is the
    // running program: be that helper when called as one, as `teneral` is.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "confine") {
        std::process::exit(teneral_cage::helper::main(&args[2..]));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Cargo runs this as <target>/release/examples/<name>, wherever
    // CARGO_TARGET_DIR puts <target>.
    let target =
        std::env::current_exe()?.ancestors().nth(3).context("no target directory")?.to_path_buf();
    let rounds = match args.iter().position(|a| a == "--rounds") {
        Some(at) => args
            .get(at + 1)
            .and_then(|n| n.to_str()?.parse::<usize>().ok())
            .context("--rounds takes a count")?,
        None => 1,
    };
    // `--kernel-checked REV...`: the kernel's checks of these commits are
    // taken as passed (they are what the memo keeps for a body-only change
    // anyway), so the warm-up does not run the kernel's whole test suite.
    let kernel_checked: Vec<String> = match args.iter().position(|a| a == "--kernel-checked") {
        Some(at) => args[at + 1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .take_while(|a| !a.starts_with("--"))
            .collect(),
        None => vec![],
    };
    let kernel_change = args.iter().any(|a| a == "--kernel-change");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    if let Some(at) = args.iter().position(|a| a == "--first") {
        let after = args
            .get(at + 1)
            .and_then(|n| n.to_str()?.parse::<u64>().ok())
            .map_or(FIRST_ASK_AFTER, std::time::Duration::from_secs);
        return runtime.block_on(first(&root, &target, after));
    }
    runtime.block_on(bench(&root, &target, rounds, &kernel_checked, kernel_change))
}

/// When a new individual's first mutation is asked, after its first start.
const FIRST_ASK_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// `--first [SECONDS]`: a new individual (a fresh clone, no kept passes, a
/// gate target directory of its own made empty), its gate's warm-up begun
/// as a body's start begins it, and a one-line body change asked SECONDS
/// (60) after; a warm-up still running then is stopped, as the kernel
/// stops it, and the change judged at once. Then one more change, the warm
/// verdict. Prints both, their ratio (goal: at most 2), and what the status
/// (which talk shows) said the first one waited for.
async fn first(root: &Path, target: &Path, after: std::time::Duration) -> Result<()> {
    teneral::spawn::start_reaper_of_own_children()?;
    let dir = tempfile::Builder::new().prefix("tnl-bench-first").tempdir()?;
    let home = dir.path().join("individual");
    git(
        root,
        &["clone", "-q", "--no-hardlinks", &root.to_string_lossy(), &home.to_string_lossy()],
    )?;
    let cache = target.join("bench-gate-first");
    if cache.exists() {
        std::fs::remove_dir_all(&cache)?;
    }
    std::fs::create_dir_all(&cache)?;
    std::fs::create_dir_all(home.join(".teneral/gate"))?;
    std::os::unix::fs::symlink(&cache, home.join(".teneral/gate/target"))?;
    let repo = teneral::repo::open(&home)?;
    let running = teneral::repo::head_commit(&repo, &home)?;
    teneral::repo::ensure_lineage(&repo, &home, running)?;
    teneral::repo::ensure_candidate(&home)?;
    let settings = Settings::parse("TENERAL_PROVIDER=standin\n").context("settings")?;
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    let running = teneral::repo::commit_of(running);
    let cage = teneral::runner::Cage::On { exe: std::env::current_exe()?, pretend_missing: vec![] };
    let runner =
        teneral::runner::Runner::choose(teneral::settings::RunnerChoice::Direct, cage).await?;
    let kernel_exe = target.join("debug/teneral");
    let reporter = teneral_core::status::Reporter::new(&home);
    let gate = Gate {
        home: &home,
        repo: &repo,
        settings: &settings,
        journal: &journal,
        running: &running,
        kernel_exe: &kernel_exe,
        runner: &runner,
        status: Some(&reporter),
    };
    println!(
        "a new individual: its gate's warm-up starts now, its first mutation is asked {} s after \
         (load average {})",
        after.as_secs(),
        load()
    );
    let start = Instant::now();
    let say = |checks: &str, expected: Option<std::time::Duration>| {
        let expected = expected.map(teneral_core::status::about).unwrap_or("time unknown".into());
        println!("  warm-up at {:.1} s: {checks} ({expected})", start.elapsed().as_secs_f64());
    };
    let warmed = tokio::select! {
        warmed = gate.warm(&say) => Some(warmed),
        () = tokio::time::sleep(after) => None,
    };
    // Dropped when the time came: its checks are killed, as the kernel's stop
    // of the warm-up kills them; what cargo finished stays.
    let warm_took = start.elapsed().as_secs_f64();
    match &warmed {
        Some(Ok(n)) => println!("warm-up: {n} checks passed, ended at {warm_took:.1} s"),
        Some(Err(why)) => println!("warm-up did not pass ({why}), ended at {warm_took:.1} s"),
        None => println!("warm-up: still running at {warm_took:.1} s, stopped for the mutation"),
    }
    tokio::time::sleep(after.saturating_sub(start.elapsed())).await;
    let candidate =
        one_line_change(&home, &format!("first of {:?}", std::time::SystemTime::now()))?;
    let watch = StatusWatch::new(&home);
    let judged = Instant::now();
    let verdict = gate.judge(&candidate).await;
    let first = judged.elapsed().as_secs_f64();
    let said = watch.seen();
    if let Verdict::Rejected { check, output } = &verdict {
        bail!("the gate refused the first change at {check}:\n{output}");
    }
    let label = format!("warm of {:?}", std::time::SystemTime::now());
    let candidate = one_line_change(&home, &label)?;
    let started = Instant::now();
    let verdict = gate.judge(&candidate).await;
    let warm_verdict = started.elapsed().as_secs_f64();
    if let Verdict::Rejected { check, output } = &verdict {
        bail!("the gate refused the second change at {check}:\n{output}");
    }
    let ratio = first / warm_verdict;
    println!(
        "first mutation, asked {} s after the start: {first:.1} s to the verdict",
        after.as_secs()
    );
    println!("the next one (warm): {warm_verdict:.1} s");
    let verdict = if ratio <= 2.0 { "within" } else { "OVER" };
    println!("ratio first / warm: {ratio:.2} ({verdict} the goal of 2)");
    println!("what the status (talk's line) said during the first judgement:");
    for text in &said {
        println!("  {text}");
    }
    let named = said.iter().any(|t| t.starts_with("checking mutation") && t.contains("body-tests"));
    let timed = said.iter().any(|t| t.contains(", from the last run)"));
    println!(
        "talk said what it waited for: {}; how long: {}",
        if named { "yes" } else { "NO" },
        if timed { "yes (from the warm-up's times)" } else { "no time known" }
    );
    if ratio > 2.0 {
        let within = if first <= 300.0 { "within" } else { "OVER" };
        println!("  the wait: {first:.0} s ({within} the 5 minutes an owner may be told to wait)");
    }
    println!("load average after: {}", load());
    Ok(())
}

/// The texts of the individual's status file, collected from a thread
/// until dropped.
struct StatusWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl StatusWatch {
    fn new(home: &Path) -> StatusWatch {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let (home, until, into) = (home.to_owned(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !until.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(file) = teneral_core::status::read(&home) {
                    let mut seen = into.lock().unwrap_or_else(|p| p.into_inner());
                    if seen.last() != Some(&file.status) {
                        seen.push(file.status);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        StatusWatch { stop, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The 1, 5 and 15 minute load averages.
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

async fn bench(
    root: &Path,
    target: &Path,
    rounds: usize,
    kernel_checked: &[String],
    kernel_change: bool,
) -> Result<()> {
    teneral::spawn::start_reaper_of_own_children()?;
    let dir = tempfile::Builder::new().prefix("tnl-bench-gate").tempdir()?;
    let home = dir.path().join("individual");
    git(
        root,
        &["clone", "-q", "--no-hardlinks", &root.to_string_lossy(), &home.to_string_lossy()],
    )?;
    // Keep the gate's cargo cache between runs of this benchmark.
    let cache = target.join("bench-gate");
    // Tests build in its `debug`, type checks and lints in another (the
    // lanes run side by side); both start with what this tree has built.
    let lanes = [cache.join("debug"), cache.join(teneral::gate::plan::CHECK_TARGET).join("debug")];
    for lane in lanes.iter().filter(|lane| !lane.exists()) {
        let started = Instant::now();
        let (files, bytes) = seed_cache(root, &target.join("debug"), lane)?;
        if files == 0 {
            println!("{}: nothing to seed it with (no debug build of this tree)", lane.display());
            continue;
        }
        println!(
            "{} seeded with this tree's built registry crates: {files} files, {} MiB, in {:.1} s",
            lane.display(),
            bytes >> 20,
            started.elapsed().as_secs_f64()
        );
    }
    std::fs::create_dir_all(&cache)?;
    std::fs::create_dir_all(home.join(".teneral/gate"))?;
    std::os::unix::fs::symlink(&cache, home.join(".teneral/gate/target"))?;
    // And the memo of passes (by tree): the kernel's checks of a tree already
    // judged are reused, as the kernel reuses them.
    let memo = home.join(teneral::gate::memo::MEMO_PATH);
    let _ = std::fs::copy(cache.join("memo.json"), &memo);
    let body_cache = target.join("test-bodies");
    std::fs::create_dir_all(&body_cache)?;
    std::os::unix::fs::symlink(&body_cache, home.join(".teneral/target"))?;

    let repo = teneral::repo::open(&home)?;
    let running = teneral::repo::head_commit(&repo, &home)?;
    teneral::repo::ensure_lineage(&repo, &home, running)?;
    teneral::repo::ensure_candidate(&home)?;
    // A kernel change is taken from the species: a local branch, taken
    // without the owner's word (there is none here).
    let settings = Settings::parse(
        "TENERAL_PROVIDER=standin\nTENERAL_SPECIES=auto\nTENERAL_UPSTREAM=species\n",
    )
    .context("settings")?;
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    let running = teneral::repo::commit_of(running);
    let cage = teneral::runner::Cage::On { exe: std::env::current_exe()?, pretend_missing: vec![] };
    let runner =
        teneral::runner::Runner::choose(teneral::settings::RunnerChoice::Direct, cage).await?;

    if !kernel_checked.is_empty() {
        let seeded =
            take_kernel_checks_as_passed(&home, &repo, &runner, &settings, kernel_checked).await?;
        let _ = std::fs::copy(&memo, cache.join("memo.json"));
        println!("kernel checks taken as passed, not run (--kernel-checked): {seeded}");
    }

    for round in 0..=rounds {
        // A label never used before: a tree judged by an earlier run would
        // find its body's checks in the kept memo.
        let label = format!("round {round} of {:?}", std::time::SystemTime::now());
        let candidate = if round == 0 && kernel_change {
            kernel_change_on_species(&home, &label)?
        } else {
            one_line_change(&home, &label)?
        };
        let before = journal_len(&home);
        let kernel_exe = target.join("debug/teneral");
        let gate = Gate {
            home: &home,
            repo: &repo,
            settings: &settings,
            journal: &journal,
            running: &running,
            kernel_exe: &kernel_exe,
            runner: &runner,
            status: None,
        };
        let started = Instant::now();
        let verdict = gate.judge(&candidate).await;
        let total = started.elapsed().as_secs_f64();
        // Kept even after a refusal: the memo holds only passes.
        let _ = std::fs::copy(&memo, cache.join("memo.json"));
        if let Verdict::Rejected { check, output } = &verdict {
            bail!("the gate refused the change at {check}:\n{output}");
        }
        if round == 0 {
            if kernel_change {
                let ran: Vec<String> = steps_since(&home, before)?
                    .iter()
                    .filter(|e| e["result"] == "passed")
                    .filter_map(|e| e["check"].as_str().map(str::to_owned))
                    .collect();
                if !ran.iter().any(|c| c == "kernel-tests") {
                    bail!("the kernel change did not run the kernel's tests (ran: {ran:?})");
                }
                // Back to the running tree: the measured changes are body-only.
                let workspace = home.join(".teneral/candidate");
                git(&workspace, &["reset", "-q", "--hard", running.as_str()])?;
                println!("warm-up, a kernel change (ran {}): {total:.1} s", ran.join(", "));
            } else {
                println!("warm-up (a body change; no kernel check runs): {total:.1} s");
            }
            continue;
        }
        report(total, &steps_since(&home, before)?);
    }
    Ok(())
}

/// Records in the memo a pass of each kernel check (those that read the
/// tree outside `body/`) of each of `revs`, under the key the gate makes.
async fn take_kernel_checks_as_passed(
    home: &Path,
    repo: &git2::Repository,
    runner: &teneral::runner::Runner,
    settings: &Settings,
    revs: &[String],
) -> Result<String> {
    use teneral::gate::{checks, memo, plan};
    let limits = teneral::runner::Limits::for_check(settings);
    let env = checks::bare_env(&std::env::temp_dir(), &home.join(teneral::gate::TARGET_DIR));
    let toolchain = checks::toolchain(runner, "tnl-bench-gate-rustc", &env, limits).await;
    let mut memo = memo::Memo::load(home);
    let mut said = vec![];
    for rev in revs {
        let oid = repo.revparse_single(rev)?.peel_to_commit()?.id();
        let (kernel_tree, body_tree) = teneral::repo::tree_ids(repo, home, oid)?;
        let inputs = plan::Inputs {
            checkout: home,
            kernel_tree: &kernel_tree,
            body_tree: &body_tree,
            running_kernel_tree: None,
            toolchain: &toolchain,
            kernel_identity: "",
            kernel_copy: home,
            socket_dir: home,
            limits,
            test_threads: 1,
        };
        for check in plan::plan(&inputs, &memo) {
            if check.reads == plan::Reads::Kernel {
                memo.record(check.memo_key);
                said.push(format!("{} of {}", check.name, &rev[..rev.len().min(10)]));
            }
        }
    }
    Ok(said.join(", "))
}

/// Prints one measured verdict: each step, the critical path, the overhead.
fn report(total: f64, steps: &[Value]) {
    println!("one-line body change, warm cache: {total:.2} s to the verdict (goal <= 10 s)");
    println!("bench-gate: verdict {total:.3}");
    println!(
        "  {:<17} {:<7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>6}",
        "step", "result", "began", "wall s", "compile", "tests", "rest", "share"
    );
    let figure = |e: &Value, k: &str| e[k].as_f64();
    let cell = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_default();
    // Work on the critical path: where the last of the checks, the build and
    // the smoke run ended, from the start of the checks. An older gate
    // journals no start: its smoke run came after all of them.
    let (mut serial, mut side_by_side, mut ends) = (0.0, 0.0_f64, None::<f64>);
    let mut prepared = None;
    for e in steps {
        let (check, result) =
            (e["check"].as_str().unwrap_or(""), e["result"].as_str().unwrap_or(""));
        let seconds = figure(e, "seconds").unwrap_or(0.0);
        let began = figure(e, "began_seconds");
        let (compile, tests) = (figure(e, "compile_seconds"), figure(e, "tests_seconds"));
        let rest = (compile.is_some() || tests.is_some())
            .then(|| (seconds - compile.unwrap_or(0.0) - tests.unwrap_or(0.0)).max(0.0));
        println!(
            "  {check:<17} {result:<7} {:>7} {seconds:>7.2} {:>8} {:>7} {:>7} {:>5.1}%",
            cell(began),
            cell(compile),
            cell(tests),
            cell(rest),
            100.0 * seconds / total
        );
        if let Some(began) = began {
            ends = Some(ends.unwrap_or(0.0).max(began + seconds));
        }
        match check {
            // Taking the candidate and its paths, organs: the gate's own work.
            "paths" | "organs" => {}
            "smoke" => {
                serial += seconds;
                let build = figure(e, "build_seconds");
                side_by_side = side_by_side.max(build.unwrap_or(0.0));
                ends = ends.map(|end| end.max(build.unwrap_or(0.0)));
                prepared = figure(e, "prepared_seconds");
                println!(
                    "  {:<17} build {} s (beside the checks); smoke began at {} s; body started at {} s, ready at {} s, answered at {} s of it",
                    "",
                    cell(build),
                    cell(began),
                    cell(figure(e, "started_seconds")),
                    cell(figure(e, "ready_seconds")),
                    cell(figure(e, "answered_seconds")),
                );
            }
            _ => side_by_side = side_by_side.max(seconds),
        }
    }
    let work = match ends {
        Some(end) => {
            println!(
                "  critical path: the checks, the build and then the smoke run side by side, all ended {end:.2} s after the checks began (the smoke run alone {serial:.2} s)"
            );
            end
        }
        None => {
            println!(
                "  critical path: the checks and the build side by side {side_by_side:.2} s, then the smoke run {serial:.2} s"
            );
            serial + side_by_side
        }
    };
    let overhead = (total - work).max(0.0);
    if let Some(prepared) = prepared {
        println!(
            "  of the overhead, the gate's steps before its checks: {prepared:.2} s (its log's \"prepared in\" line splits them)"
        );
    }
    println!(
        "  gate overhead (taking the candidate, paths, checkout, fetch, plan, memo, journal, keeping the binary): {overhead:.2} s = {:.1} % of the total (goal <= 5 %)",
        100.0 * overhead / total
    );
}

/// A comment added to a kernel file in the workspace, committed, and that
/// commit made the tip of the local species branch (`species` in the
/// individual's repository), so the species rule takes it as a species
/// change: the gate then runs the kernel's checks of the changed tree.
fn kernel_change_on_species(home: &Path, text: &str) -> Result<teneral_core::commit::Commit> {
    let workspace = home.join(".teneral/candidate");
    let file = workspace.join("src/lib.rs");
    let mut kernel = std::fs::read_to_string(&file)?;
    kernel.push_str(&format!("// {text}: a kernel change the gate's stage judges\n"));
    std::fs::write(&file, kernel)?;
    git(&workspace, &["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", text])?;
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&workspace).output()?;
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let workspace_text = workspace.to_string_lossy().into_owned();
    git(home, &["fetch", "-q", &workspace_text, &format!("+{commit}:refs/heads/species")])?;
    Ok(teneral_core::commit::Commit::parse(&commit)?)
}

/// Changes one line of the workspace's body and commits it.
fn one_line_change(home: &Path, text: &str) -> Result<teneral_core::commit::Commit> {
    let workspace = home.join(".teneral/candidate");
    let prompt = workspace.join("body/src/prompt.rs");
    let body = std::fs::read_to_string(&prompt)?;
    // "You are an agent[ (label)] that lives in a directory": a new label.
    let (head, tail) = ("You are an agent", " that lives in a directory");
    let start = body.find(head).context("the seed body's prompt has no agent line")?;
    let end = start + body[start..].find(tail).context("the agent line has changed")?;
    let changed = format!("{}{head} ({text}){}", &body[..start], &body[end..]);
    std::fs::write(&prompt, changed)?;
    git(&workspace, &["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", text])?;
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&workspace).output()?;
    Ok(teneral_core::commit::Commit::parse(String::from_utf8_lossy(&out.stdout).trim())?)
}

fn journal_len(home: &Path) -> usize {
    std::fs::read_to_string(home.join(JOURNAL_PATH)).map(|t| t.lines().count()).unwrap_or(0)
}

/// The `mutation.check` events after line `skip`.
fn steps_since(home: &Path, skip: usize) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(home.join(JOURNAL_PATH))?;
    Ok(text
        .lines()
        .skip(skip)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "mutation.check")
        .collect())
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    if !Command::new("git").args(args).current_dir(dir).status()?.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

/// Fills an empty gate cache with what this tree's own build (`built`, its
/// `target/debug`) compiled of the registry's crates, as an individual has
/// them after its first judgement: the gate then compiles this tree's own
/// crates, cold (the clone is at another path, so cargo names them anew),
/// and nothing of the registry. Only crates `Cargo.lock` takes from a
/// registry are copied, with their times, so cargo finds them fresh.
/// Returns the files and bytes copied.
fn seed_cache(root: &Path, built: &Path, cache: &Path) -> Result<(u64, u64)> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))?;
    let mut registry = std::collections::HashSet::new();
    for package in lock.split("[[package]]") {
        let field = |key: &str| {
            package.lines().find_map(|l| l.strip_prefix(key)?.trim().strip_prefix("= \""))
        };
        let from_registry = field("source ").is_some_and(|s| s.starts_with("registry+"));
        if let (Some(name), true) = (field("name "), from_registry) {
            registry.insert(name.trim_end_matches('"').replace('-', "_"));
        }
    }
    // `libserde_json-0123abcd.rlib`, `.fingerprint/serde-json-0123abcd`.
    let of_registry = |name: &str| {
        let stem = name.split('.').next().unwrap_or(name);
        let Some((crate_name, _hash)) = stem.rsplit_once('-') else { return false };
        let crate_name = crate_name.replace('-', "_");
        registry.contains(&crate_name)
            || crate_name.strip_prefix("lib").is_some_and(|n| registry.contains(n))
    };
    let (mut files, mut bytes) = (0, 0);
    for part in ["deps", "build", ".fingerprint"] {
        let Ok(entries) = std::fs::read_dir(built.join(part)) else { continue };
        for entry in entries.flatten() {
            if of_registry(&entry.file_name().to_string_lossy()) {
                let (f, b) =
                    copy_with_times(&entry.path(), &cache.join(part).join(entry.file_name()))?;
                files += f;
                bytes += b;
            }
        }
    }
    Ok((files, bytes))
}

/// Copies the file or tree `from` to `to`, keeping each file's modification
/// time (cargo compares them); links are copied as links.
fn copy_with_times(from: &Path, to: &Path) -> Result<(u64, u64)> {
    let meta = std::fs::symlink_metadata(from)?;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if meta.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)?;
        return Ok((1, 0));
    }
    if meta.is_dir() {
        let (mut files, mut bytes) = (0, 0);
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)?.flatten() {
            let (f, b) = copy_with_times(&entry.path(), &to.join(entry.file_name()))?;
            files += f;
            bytes += b;
        }
        return Ok((files, bytes));
    }
    let copied = std::fs::copy(from, to)?;
    std::fs::File::options().write(true).open(to)?.set_modified(meta.modified()?)?;
    Ok((1, copied))
}
