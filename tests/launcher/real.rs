//! Slow (ignored; the species stage of `scripts/test` runs it alone, as
//! does `scripts/bench-species --real`): the real teneral tree of
//! this checkout as a generation's kernel. The generation is put on trial as
//! a promoting kernel leaves it (no gate: the gate would run the real
//! kernel's own test suite); the launcher builds that tree's `teneral` and
//! `teneralctl` from `.teneral/live` in the cage, offline, and starts it; it
//! must get its generation ready, and the owner's `teneralctl` must hand
//! over to the generation's. The kernels' target directory is shared
//! between runs (`<target>/test-kernels`), so a second run is warm.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git2::Repository;

use crate::common::*;

const BUILD: Duration = Duration::from_secs(3600);

/// Replaces everything of the clone `work` but `body/` and `.gitignore` by
/// this checkout's files (tracked and new, not ignored), `body/` left out.
fn real_tree_into(work: &Path) -> TestResult {
    for entry in std::fs::read_dir(work)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if [".git", "body", ".gitignore"].contains(&name.as_str()) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            std::fs::remove_dir_all(path)?;
        } else {
            std::fs::remove_file(path)?;
        }
    }
    let root = repo_root();
    let mut ls = Command::new("git");
    ls.arg("-C").arg(&root).args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"]);
    let listed = run_within(&mut ls, QUICK, "listing this repository's files")?;
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    for rel in listed.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel)?);
        if rel.starts_with("body") || !root.join(rel).is_file() {
            continue;
        }
        let to = work.join(rel);
        std::fs::create_dir_all(to.parent().expect("a file's directory"))?;
        std::fs::copy(root.join(rel), &to)?;
    }
    Ok(())
}

#[test]
#[ignore = "slow: builds the whole kernel (the species stage of scripts/test)"]
fn the_real_tree_built_as_a_generations_kernel_runs_it() -> TestResult {
    // A cold build of the whole kernel may take longer than a check's 10
    // minutes on a loaded machine: no limit here.
    let ind = Individual::new("", &["TENERAL_CHECK_MINUTES=0"])?;
    let base = ind.head()?;
    let work = tempfile::tempdir()?;
    Repository::clone(&ind.path().to_string_lossy(), work.path())?;
    real_tree_into(work.path())?;
    let v2 = commit_all(work.path(), "the real kernel")?;
    let mut fetch = Command::new("git");
    fetch.arg("-C").arg(ind.path()).args(["fetch", "-q"]).arg(work.path());
    fetch.arg(format!("+{v2}:refs/heads/real"));
    succeed_within(&mut fetch, QUICK, "fetching the generation with the real kernel")?;
    let repo = Repository::open(ind.path())?;
    let oid = git2::Oid::from_str(&v2)?;
    repo.branch("lineage/local", &repo.find_commit(oid)?, true)?;
    let key = teneral::launcher::kernels::key_of(&repo, oid)?;
    let trial = serde_json::json!({"commit": v2, "previous": base, "kernel": key, "since_ms": 1});
    std::fs::write(ind.path().join(".teneral/trial.json"), trial.to_string())?;
    let state = serde_json::json!({"generation": v2, "previous": base,
        "trial": {"commit": v2, "reply_by": null}});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    let shared =
        teneral().ancestors().nth(2).expect("<target>/<profile>/teneral").join("test-kernels");
    std::fs::create_dir_all(&shared)?;
    std::os::unix::fs::symlink(&shared, ind.path().join(".teneral/kernels/target")).or_else(
        |_| {
            std::fs::create_dir_all(ind.path().join(".teneral/kernels"))?;
            std::os::unix::fs::symlink(&shared, ind.path().join(".teneral/kernels/target"))
        },
    )?;

    let began = Instant::now();
    let kernel = ind.start()?;
    let ready = ind.wait_for("v2 ready under the real tree's kernel", BUILD, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    let log = ind.kernel_log();
    let built = log.lines().find(|l| l.contains("built the kernel")).unwrap_or("(kept)").to_owned();
    println!("real tree: {built}; ready after {:.1} s", began.elapsed().as_secs_f64());
    assert!(log.contains("its own kernel"), "{log}");
    let started = ind.events("kernel.started");
    let last = started.last().expect("a kernel.started");
    assert_eq!(last["commit"], v2.as_str(), "{last}");
    assert_ne!(last["pid"].as_u64(), Some(u64::from(kernel.pid())), "a child: the generation's");
    assert!(ready["seq"].as_u64() > last["seq"].as_u64());
    let client = teneral::launcher::kernels::kept_client(ind.path(), &key);
    assert!(client.is_file(), "its teneralctl is kept beside it");
    let status = Command::new(teneralctl())
        .args(["status", "--json", "--dir"])
        .arg(ind.path())
        .stdin(Stdio::null())
        .output_within(QUICK)?;
    let value: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    assert_eq!(value["client"], client.display().to_string().as_str(), "{value}");
    // The install's talk hands over to the generation's, which prints the
    // last exchanges and exits.
    let talk = Command::new(teneralctl())
        .args(["talk", "--dir"])
        .arg(ind.path())
        .stdin(Stdio::null())
        .output_within(SLOW)?;
    assert_eq!(talk.status.code(), Some(0), "{}", String::from_utf8_lossy(&talk.stderr));
    Ok(())
}
