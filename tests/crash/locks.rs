//! State a library writes for the kernel outside the write-ahead scheme:
//! git's lock file of `lineage/local`, left by a kill inside the ref's move.

use git2::Repository;

use super::{lineage_of, SHORT};
use crate::common::*;

/// A kill inside git's move of `lineage/local` leaves `local.lock` beside
/// the ref. The next start removes it and moves the lineage to the state's
/// generation, as it does for any move a kill cut.
#[test]
fn a_lineage_lock_left_by_a_kill_inside_its_move_does_not_stop_the_next_start() -> TestResult {
    let ind = Individual::new("", &[])?;
    let base = ind.head()?;
    let repo = Repository::open(ind.path())?;
    let head = repo.find_commit(git2::Oid::from_str(&base)?)?;
    let sig = git2::Signature::now("test", "test@example.invalid")?;
    let later = repo.commit(None, &sig, &sig, "a later generation", &head.tree()?, &[&head])?;
    // The lineage points at the later commit, the state at the base: the
    // kill fell while the lineage was being moved back, inside git.
    repo.branch("lineage/local", &repo.find_commit(later)?, true)?;
    let state = serde_json::json!({"generation": base});
    std::fs::create_dir_all(ind.path().join(".teneral"))?;
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    let lock = ind.path().join(".git/refs/heads/lineage/local.lock");
    std::fs::write(&lock, format!("{base}\n"))?;

    let _kernel = ind.start()?;
    ind.wait_for("the base ready", SHORT, |e| {
        e["type"] == "generation.ready" && e["commit"] == base.as_str()
    })?;
    assert!(!lock.exists(), "the stale lock is removed:\n{}", ind.kernel_log());
    assert_eq!(lineage_of(ind.path()).as_deref(), Some(base.as_str()), "{}", ind.kernel_log());
    assert!(ind.kernel_log().contains("removed the lock of lineage/local"), "{}", ind.kernel_log());
    Ok(())
}
