//! Kills in the hand-over to a generation's own kernel and in the launcher's
//! rollback of a kernel that failed its trial, at their named points: the
//! next start must finish what was begun (the promotion and its trial, or
//! the rollback), never act on a half-written one, and journal the
//! rollback exactly once.
//!
//! The generation's own kernel is kept already (`.teneral/kernels/<key>/
//! teneral`, a script), so no test here waits for cargo: a script that
//! becomes the real kernel, or one that fails on start; each start of it
//! leaves a line in `kept-starts`.

use std::path::Path;

use git2::Repository;
use serde_json::Value;

use super::{lineage_of, state_of, LONG, SHORT};
use crate::common::*;

/// Keeps a script as the kernel of `commit`: it notes its start, says
/// `words` on stderr, then execs the real kernel (`exec`) or exits 1.
pub(crate) fn keep_kernel(ind: &Individual, commit: &str, words: &str, exec: bool) -> TestResult {
    let repo = Repository::open(ind.path())?;
    let key = teneral::launcher::kernels::key_of(&repo, git2::Oid::from_str(commit)?)?;
    let kept = teneral::launcher::kernels::kept(ind.path(), &key);
    std::fs::create_dir_all(kept.parent().expect("a kernel's directory"))?;
    let marks = ind.path().join("kept-starts");
    let then =
        if exec { format!("exec {} \"$@\"", teneral().display()) } else { "exit 1".to_owned() };
    let script =
        format!("#!/bin/sh\necho started >> {}\necho '{words}' >&2\n{then}\n", marks.display());
    std::fs::write(&kept, script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn kept_starts(home: &Path) -> usize {
    std::fs::read_to_string(home.join("kept-starts")).unwrap_or_default().lines().count()
}

fn trial_file(home: &Path) -> Value {
    let bytes = std::fs::read(home.join(".teneral/trial.json")).unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// The pid of the last `kernel.started`.
fn last_kernel_pid(ind: &Individual) -> Option<u64> {
    ind.events("kernel.started").last().and_then(|e| e["pid"].as_u64())
}

#[test]
fn a_kill_between_the_trial_file_and_the_state_completes_the_hand_over() -> TestResult {
    let (ind, mut kernel, base) =
        crate::launcher::started(&[("TENERAL_TEST_CRASH_AT", "handover.trial.saved")])?;
    let v2 = crate::launcher::species_commit(&ind, crate::launcher::HELLO, "{\"launcher\": 1}\n")?;
    keep_kernel(&ind, &v2, "kept kernel v2: hello", true)?;
    crate::launcher::promoted(&ind, &v2)?;
    assert_eq!(kernel.wait(LONG)?, None, "killed at the point:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains("crash point handover.trial.saved"));
    // Cut: the trial names v2, the state still the base.
    assert_eq!(trial_file(ind.path())["commit"], v2.as_str());
    assert_eq!(state_of(ind.path())["generation"], base.as_str());
    assert_eq!(kept_starts(ind.path()), 0);

    let again = ind.start()?;
    ind.wait_for("v2 ready under its own kernel", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    ind.wait_for("the finished promotion's notice", SHORT, |e| {
        e["type"] == "kernel.notice"
            && e["text"].as_str().unwrap_or_default().contains("finished the promotion")
    })?;
    let end = std::time::Instant::now() + SHORT;
    while ind.path().join(".teneral/trial.json").exists() {
        assert!(std::time::Instant::now() < end, "the trial never ended:\n{}", ind.kernel_log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(kept_starts(ind.path()), 1, "v2's kernel started once:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains("kept kernel v2: hello"));
    let started = ind.events("kernel.started");
    assert_eq!(started.last().map(|e| e["commit"].clone()), Some(Value::from(v2.as_str())));
    assert_ne!(last_kernel_pid(&ind), Some(u64::from(again.pid())), "a child, not the install's");
    let state = state_of(ind.path());
    assert_eq!(
        (state["generation"].as_str(), state["previous"].as_str()),
        (Some(&*v2), Some(&*base))
    );
    assert_eq!(lineage_of(ind.path()).as_deref(), Some(v2.as_str()));
    assert!(
        ind.events("generation.rolledback").is_empty(),
        "{:?}",
        ind.events("generation.rolledback")
    );
    assert_eq!(ind.events("mutation.accepted").len(), 1);
    Ok(())
}

/// An individual whose generation v2 (with a kernel of its own that fails
/// on start) is on trial, as a promoting kernel leaves it.
fn on_trial() -> Result<(Individual, String, String), Box<dyn std::error::Error>> {
    on_trial_with("kept kernel v2: cannot start, on purpose", false)
}

/// The same with a kept kernel that says `words`, then becomes the real
/// kernel (`exec`) or exits 1.
pub(crate) fn on_trial_with(
    words: &str,
    exec: bool,
) -> Result<(Individual, String, String), Box<dyn std::error::Error>> {
    let ind = Individual::new("", &[])?;
    let base = ind.head()?;
    let v2 = own_kernel_commit(&ind, "// more kernel\n", "later")?;
    keep_kernel(&ind, &v2, words, exec)?;
    put_on_trial(&ind, &v2, &base)?;
    Ok((ind, v2, base))
}

/// A commit after HEAD whose kernel is its own (a launch file, and
/// `src/extra.rs` holding `extra`), fetched into branch `branch`; HEAD, and
/// so the install's kernel, stays.
pub(crate) fn own_kernel_commit(
    ind: &Individual,
    extra: &str,
    branch: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let work = tempfile::tempdir()?;
    Repository::clone(&ind.path().to_string_lossy(), work.path())?;
    std::fs::write(work.path().join("launch.json"), "{\"launcher\": 1}\n")?;
    std::fs::write(work.path().join("src/extra.rs"), extra)?;
    let commit = commit_all(work.path(), "a kernel of its own")?;
    let mut fetch = std::process::Command::new("git");
    fetch.arg("-C").arg(ind.path()).args(["fetch", "-q"]).arg(work.path());
    fetch.arg(format!("+{commit}:refs/heads/{branch}"));
    succeed_within(&mut fetch, QUICK, "fetching a generation with a kernel of its own")?;
    Ok(commit)
}

/// Puts `commit` (whose own kernel is kept) on trial after `base`, as a
/// promoting kernel leaves it: the lineage, the trial file, the state.
pub(crate) fn put_on_trial(ind: &Individual, commit: &str, base: &str) -> TestResult {
    let repo = Repository::open(ind.path())?;
    let oid = git2::Oid::from_str(commit)?;
    repo.branch("lineage/local", &repo.find_commit(oid)?, true)?;
    let key = teneral::launcher::kernels::key_of(&repo, oid)?;
    let trial =
        serde_json::json!({"commit": commit, "previous": base, "kernel": key, "since_ms": 1});
    std::fs::write(ind.path().join(".teneral/trial.json"), trial.to_string())?;
    let state = serde_json::json!({"generation": commit, "previous": base,
        "trial": {"commit": commit, "reply_by": null}});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    Ok(())
}

/// The launcher dies at `point` of its rollback of v2; the next start
/// finishes it: one `generation.rolledback`, v2's kernel not started again,
/// the install's kernel (the launcher's own process) serving the base.
fn rollback_cut_at(point: &str, cut: impl Fn(&Individual, &str, &str)) -> TestResult {
    let (ind, v2, base) = on_trial()?;
    let mut kernel = ind.start_with(&[("TENERAL_TEST_CRASH_AT", point)])?;
    assert_eq!(kernel.wait(LONG)?, None, "killed at {point}:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains(&format!("crash point {point}")), "{}", ind.kernel_log());
    assert_eq!(ind.events("generation.rolledback").len(), 1);
    assert_eq!(trial_file(ind.path())["commit"], v2.as_str(), "the trial file is left");
    cut(&ind, &v2, &base);

    let again = ind.start()?;
    ind.wait_for("the base ready again", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == base.as_str()
    })?;
    let back = ind.events("generation.rolledback");
    assert_eq!(back.len(), 1, "exactly one rollback: {back:?}");
    assert_eq!((back[0]["from"].as_str(), back[0]["to"].as_str()), (Some(&*v2), Some(&*base)));
    assert_eq!(back[0]["by"], "launcher");
    assert!(back[0]["stderr"].as_str().unwrap_or_default().contains("cannot start, on purpose"));
    assert_eq!(kept_starts(ind.path()), 1, "v2's kernel never again:\n{}", ind.kernel_log());
    let state = state_of(ind.path());
    assert_eq!(state["generation"], base.as_str(), "{state}");
    assert!(state["previous"].is_null() && state["trial"].is_null(), "{state}");
    assert_eq!(lineage_of(ind.path()).as_deref(), Some(base.as_str()));
    assert!(!ind.path().join(".teneral/trial.json").exists(), "the trial is over");
    assert_eq!(last_kernel_pid(&ind), Some(u64::from(again.pid())), "the install's, in-process");
    assert!(ind.kernel_log().contains("finishing the rollback"), "{}", ind.kernel_log());
    Ok(())
}

#[test]
fn a_launcher_killed_after_journaling_its_rollback_finishes_it_at_the_next_start() -> TestResult {
    rollback_cut_at("launcher.rolledback.journaled", |ind, v2, _| {
        assert_eq!(state_of(ind.path())["generation"], v2);
        assert_eq!(lineage_of(ind.path()).as_deref(), Some(v2));
    })
}

#[test]
fn a_launcher_killed_after_its_rollback_wrote_the_state_finishes_it() -> TestResult {
    rollback_cut_at("launcher.switched", |ind, v2, base| {
        assert_eq!(state_of(ind.path())["generation"], base);
        assert_eq!(lineage_of(ind.path()).as_deref(), Some(v2));
    })
}

#[test]
fn a_launcher_killed_after_its_rollback_moved_the_lineage_finishes_it() -> TestResult {
    rollback_cut_at("launcher.lineage.moved", |ind, _, base| {
        assert_eq!(state_of(ind.path())["generation"], base);
        assert_eq!(lineage_of(ind.path()).as_deref(), Some(base));
    })
}

#[test]
fn a_trial_file_whose_promotion_was_never_journaled_is_dropped_not_acted_on() -> TestResult {
    // The state and lineage still name the base, and the journal holds no
    // promotion to v2: a trial file naming v2 is stale.
    let (ind, v2, base) = on_trial()?;
    let state = serde_json::json!({"generation": base});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    let repo = Repository::open(ind.path())?;
    let oid = git2::Oid::from_str(&base)?;
    repo.branch("lineage/local", &repo.find_commit(oid)?, true)?;
    let kernel = ind.start()?;
    ind.wait_for("the base ready", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == base.as_str()
    })?;
    ind.wait_for("the start's notice", SHORT, |e| {
        e["type"] == "kernel.notice"
            && e["text"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("dropped the kernel trial of generation {}", &v2[..7]))
    })?;
    assert!(!ind.path().join(".teneral/trial.json").exists(), "the stale trial is gone");
    assert_eq!(kept_starts(ind.path()), 0, "v2's kernel never ran");
    assert_eq!(last_kernel_pid(&ind), Some(u64::from(kernel.pid())), "the install's, in-process");
    assert_eq!(state_of(ind.path())["generation"], base.as_str());
    assert!(ind.events("generation.rolledback").is_empty());
    Ok(())
}
