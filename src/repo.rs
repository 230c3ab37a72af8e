//! The individual's git repository and the two checkouts the kernel keeps.
//!
//! - `.teneral/live`: the generation that runs, a repository of its own whose
//!   objects are the main repository's (through `objects/info/alternates`, so
//!   nothing is copied), reset to the exact commit, untracked files removed,
//!   before every start.
//! - `.teneral/candidate`: the agent's workspace, its own clone of the main
//!   repository on `lineage/local`. It is the body's to change; the kernel only
//!   ever reads objects from it. The main repository's refs, config and hooks
//!   are never the body's.

use std::path::{Path, PathBuf};

use git2::build::{CheckoutBuilder, RepoBuilder};
use git2::{BranchType, Oid, Repository};

pub const LIVE_DIR: &str = ".teneral/live";
pub const CANDIDATE_DIR: &str = ".teneral/candidate";
pub const LINEAGE_BRANCH: &str = "lineage/local";

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error(
        "{dir} is not a git checkout ({source}); run teneral in a clone of the teneral repository"
    )]
    NotARepo { dir: PathBuf, source: git2::Error },
    #[error("{dir} has no commit yet; commit your changes first: the first generation is HEAD")]
    NoCommit { dir: PathBuf },
    #[error("commit {commit} is not in the repository at {dir}")]
    NoSuchCommit { dir: PathBuf, commit: String },
    #[error("git ({what}) in {dir}: {source}")]
    Git { what: &'static str, dir: PathBuf, source: git2::Error },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
}

fn git(what: &'static str, dir: &Path) -> impl FnOnce(git2::Error) -> RepoError {
    let dir = dir.to_owned();
    move |source| RepoError::Git { what, dir, source }
}

/// Opens the individual's repository at `home`.
pub fn open(home: &Path) -> Result<Repository, RepoError> {
    Repository::open(home).map_err(|source| RepoError::NotARepo { dir: home.to_owned(), source })
}

/// The commit HEAD points at.
pub fn head_commit(repo: &Repository, home: &Path) -> Result<Oid, RepoError> {
    repo.head()
        .and_then(|h| h.peel_to_commit())
        .map(|c| c.id())
        .map_err(|_| RepoError::NoCommit { dir: home.to_owned() })
}

/// Resolves a full commit id that must exist in `repo`.
pub fn commit_id(repo: &Repository, home: &Path, hex: &str) -> Result<Oid, RepoError> {
    let missing = || RepoError::NoSuchCommit { dir: home.to_owned(), commit: hex.to_owned() };
    let oid = Oid::from_str(hex).map_err(|_| missing())?;
    repo.find_commit(oid).map(|c| c.id()).map_err(|_| missing())
}

/// Makes `lineage/local` in the main repository if it is missing, at `at`.
pub fn ensure_lineage(repo: &Repository, home: &Path, at: Oid) -> Result<(), RepoError> {
    if repo.find_branch(LINEAGE_BRANCH, BranchType::Local).is_ok() {
        return Ok(());
    }
    let commit = repo.find_commit(at).map_err(git("find commit", home))?;
    repo.branch(LINEAGE_BRANCH, &commit, false)
        .map(|_| ())
        .map_err(git("create lineage/local", home))
}

/// Makes `.teneral/live` hold exactly `commit`, nothing more.
pub fn reset_live(repo: &Repository, home: &Path, commit: Oid) -> Result<PathBuf, RepoError> {
    let live = home.join(LIVE_DIR);
    let live_repo = match Repository::open(&live) {
        Ok(r) => r,
        Err(_) => {
            let _ = std::fs::remove_dir_all(&live);
            Repository::init(&live).map_err(git("init live checkout", &live))?
        }
    };
    // Objects come from the main repository. Written every time, so a moved
    // individual directory mends itself at the next start.
    let objects = repo.commondir().join("objects");
    let alternates = live_repo.path().join("objects/info/alternates");
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| RepoError::Io { what, path, source }
    };
    if let Some(dir) = alternates.parent() {
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    }
    let line = format!("{}\n", objects.display());
    crate::fsutil::write_atomic(&alternates, line.as_bytes())
        .map_err(io("cannot write", &alternates))?;
    // Reopen so libgit2 reads the alternates just written.
    let live_repo = Repository::open(&live).map_err(git("open live checkout", &live))?;
    live_repo.find_commit(commit).map_err(git("find generation commit", &live))?;
    live_repo.set_head_detached(commit).map_err(git("detach HEAD", &live))?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force().remove_untracked(true).remove_ignored(true);
    live_repo.checkout_head(Some(&mut checkout)).map_err(git("check out generation", &live))?;
    Ok(live)
}

/// Makes the agent's workspace if it is not there: a clone of the main
/// repository on `lineage/local`. An existing workspace is left as it is.
pub fn ensure_candidate(home: &Path) -> Result<PathBuf, RepoError> {
    let dir = home.join(CANDIDATE_DIR);
    if Repository::open(&dir).is_ok() {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let source = home.to_string_lossy().into_owned();
    RepoBuilder::new()
        .branch(LINEAGE_BRANCH)
        .clone(&source, &dir)
        .map_err(git("clone the workspace", &dir))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_commit(dir: &Path) -> (Repository, Oid) {
        let repo = Repository::init(dir).unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::write(dir.join("a.txt"), "one").unwrap_or_default();
        let oid = commit_all(&repo, "first");
        (repo, oid)
    }

    fn commit_all(repo: &Repository, msg: &str) -> Oid {
        let mut index = repo.index().unwrap_or_else(|e| unreachable!("{e}"));
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap_or_else(|e| unreachable!("{e}"));
        index.write().unwrap_or_else(|e| unreachable!("{e}"));
        let tree = repo.find_tree(index.write_tree().unwrap_or_else(|e| unreachable!("{e}")));
        let tree = tree.unwrap_or_else(|e| unreachable!("{e}"));
        let sig = git2::Signature::now("t", "t@t").unwrap_or_else(|e| unreachable!("{e}"));
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<_> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
            .unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn live_is_reset_to_the_exact_commit() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let home = dir.path();
        let (repo, first) = repo_with_commit(home);
        std::fs::write(home.join("a.txt"), "two").unwrap_or_default();
        let second = commit_all(&repo, "second");
        let live = reset_live(&repo, home, first).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(std::fs::read_to_string(live.join("a.txt")).unwrap_or_default(), "one");
        std::fs::write(live.join("stray.txt"), "x").unwrap_or_default();
        std::fs::write(live.join("a.txt"), "edited").unwrap_or_default();
        reset_live(&repo, home, second).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(std::fs::read_to_string(live.join("a.txt")).unwrap_or_default(), "two");
        assert!(!live.join("stray.txt").exists(), "untracked files are removed");
    }

    #[test]
    fn candidate_is_an_own_clone_on_the_lineage() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let home = dir.path();
        let (repo, first) = repo_with_commit(home);
        ensure_lineage(&repo, home, first).unwrap_or_else(|e| unreachable!("{e}"));
        let cand = ensure_candidate(home).unwrap_or_else(|e| unreachable!("{e}"));
        let c = Repository::open(&cand).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(!c.is_worktree());
        assert_ne!(c.commondir(), repo.commondir(), "its own .git, not the main one");
        let head = c.head().unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(head.shorthand(), Some(LINEAGE_BRANCH));
        assert_eq!(head.target(), Some(first));
    }
}
