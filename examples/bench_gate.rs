//! Benchmark behind `scripts/bench-gate`: the time from a mutation request to
//! the gate's verdict for a one-line change of the seed body, with a warm
//! cache, each step's share, and the gate's own overhead (everything but
//! cargo, the tests and the smoke run) as a fraction of the total.
//!
//! The individual is a clone of this repository at HEAD (the real kernel and
//! the real seed body). A first mutation warms the caches and the memo (its
//! kernel checks run once); the second is the one measured.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use teneral::events::SharedJournal;
use teneral::gate::{Gate, Verdict};
use teneral::journal::{writer::Journal, JOURNAL_PATH};
use teneral::settings::Settings;

fn main() -> Result<()> {
    // The gate builds the body through the cage's helper, which is the
    // running program: be that helper when called as one, as `teneral` is.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "confine") {
        std::process::exit(teneral::confine::helper_main(&args[2..]));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Cargo runs this as <target>/release/examples/<name>, wherever
    // CARGO_TARGET_DIR puts <target>.
    let target =
        std::env::current_exe()?.ancestors().nth(3).context("no target directory")?.to_path_buf();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(bench(&root, &target))
}

async fn bench(root: &Path, target: &Path) -> Result<()> {
    teneral::spawn::start_reaper_of_own_children()?;
    let dir = tempfile::Builder::new().prefix("tnl-bench-gate").tempdir()?;
    let home = dir.path().join("individual");
    git(
        root,
        &["clone", "-q", "--no-hardlinks", &root.to_string_lossy(), &home.to_string_lossy()],
    )?;
    // Keep the gate's cargo cache between runs of this benchmark.
    let cache = target.join("bench-gate");
    std::fs::create_dir_all(&cache)?;
    std::fs::create_dir_all(home.join(".teneral/gate"))?;
    std::os::unix::fs::symlink(&cache, home.join(".teneral/gate/target"))?;
    let body_cache = target.join("test-bodies");
    std::fs::create_dir_all(&body_cache)?;
    std::os::unix::fs::symlink(&body_cache, home.join(".teneral/target"))?;

    let repo = teneral::repo::open(&home)?;
    let running = teneral::repo::head_commit(&repo, &home)?;
    teneral::repo::ensure_lineage(&repo, &home, running)?;
    teneral::repo::ensure_candidate(&home)?;
    let settings = Settings::parse("TENERAL_PROVIDER=standin\n").context("settings")?;
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    let running = running.to_string();
    let cage = teneral::runner::Cage::On { exe: std::env::current_exe()?, pretend_missing: vec![] };
    let runner =
        teneral::runner::Runner::choose(teneral::settings::RunnerChoice::Direct, cage).await?;

    for (round, text) in ["first", "second"].iter().enumerate() {
        let candidate = one_line_change(&home, text)?;
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
        if let Verdict::Rejected { check, output } = &verdict {
            bail!("the gate refused the change at {check}:\n{output}");
        }
        if round == 0 {
            println!("warm-up (kernel checks run once, then memoized): {total:.1} s");
            continue;
        }
        let steps = steps_since(&home, before)?;
        println!("one-line body change, warm cache: {total:.2} s to the verdict (goal <= 20 s)");
        let mut measured = 0.0;
        for (check, result, seconds) in &steps {
            measured += seconds;
            println!(
                "  {check:<17} {result:<7} {seconds:>6.2} s  {:>5.1} %",
                100.0 * seconds / total
            );
        }
        let overhead = (total - measured).max(0.0);
        println!(
            "  gate overhead (fetch, paths, checkout, memo, journal): {overhead:.2} s = {:.1} % of the total (goal <= 10 %)",
            100.0 * overhead / total
        );
    }
    Ok(())
}

/// Changes one line of the workspace's body and commits it.
fn one_line_change(home: &Path, text: &str) -> Result<String> {
    let workspace = home.join(".teneral/candidate");
    let prompt = workspace.join("body/src/prompt.rs");
    let body = std::fs::read_to_string(&prompt)?;
    let marker = "You are an agent that lives in a directory";
    let changed = match body.find(marker) {
        Some(_) => body.replacen(
            marker,
            &format!("You are an agent ({text}) that lives in a directory"),
            1,
        ),
        None => body.replacen(
            "You are an agent (first) that",
            &format!("You are an agent ({text}) that"),
            1,
        ),
    };
    std::fs::write(&prompt, changed)?;
    git(&workspace, &["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", text])?;
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&workspace).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn journal_len(home: &Path) -> usize {
    std::fs::read_to_string(home.join(JOURNAL_PATH)).map(|t| t.lines().count()).unwrap_or(0)
}

/// The `mutation.check` events after line `skip`: (check, result, seconds).
fn steps_since(home: &Path, skip: usize) -> Result<Vec<(String, String, f64)>> {
    let text = std::fs::read_to_string(home.join(JOURNAL_PATH))?;
    Ok(text
        .lines()
        .skip(skip)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "mutation.check")
        .map(|e| {
            (
                e["check"].as_str().unwrap_or("").to_owned(),
                e["result"].as_str().unwrap_or("").to_owned(),
                e["seconds"].as_f64().unwrap_or(0.0),
            )
        })
        .collect())
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    if !Command::new("git").args(args).current_dir(dir).status()?.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}
