//! The individual's git repository and the two checkouts the kernel keeps.
//!
//! - `.teneral/live`: the generation that runs, a repository of its own whose
//!   objects are the main repository's (through `objects/info/alternates`, so
//!   nothing is copied), reset to the exact commit, untracked files removed,
//!   before every start.
//! - `.teneral/candidate`: the agent's workspace, its own clone of the main
//!   repository on `lineage/local`. It is the body's to change, and the
//!   kernel never opens it as a repository: a mutation's commit comes out of
//!   it as a pack made in the cage and checked ([`crate::gate::fetch`]). The
//!   main repository's refs, config and hooks are never the body's.

use std::path::{Path, PathBuf};

use git2::build::{CheckoutBuilder, RepoBuilder};
use git2::{BranchType, Oid, Repository};

use teneral_core::commit::Commit;

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

/// The kernel's name of a commit git2 found.
pub fn commit_of(oid: Oid) -> Commit {
    Commit::from_raw(oid.as_bytes())
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
    checkout_at(repo, &live, commit)?;
    Ok(live)
}

/// Makes `dir` a fresh checkout of exactly `commit` whose objects are the
/// main repository's (through `objects/info/alternates`, so nothing is
/// copied): HEAD detached at the commit. Whatever was there goes first
/// (`fsutil::discard_dir`) and is never opened: caged checks write the
/// whole checkout, its `.git` too (a `commondir`, a config, linked refs),
/// and the kernel does not read a repository a check could have shaped.
pub fn checkout_at(repo: &Repository, dir: &Path, commit: Oid) -> Result<(), RepoError> {
    // The old tree is renamed away and removed in the background: a gate
    // check's checkout holds its tests' leftovers, seconds of unlinking.
    teneral_core::fsutil::discard_dir(dir).map_err(|source| RepoError::Io {
        what: "cannot remove",
        path: dir.to_owned(),
        source,
    })?;
    teneral_core::crash::point("checkout.discarded");
    let checkout = Repository::init(dir).map_err(git("init a checkout", dir))?;
    // Written every time, so a moved individual directory mends itself.
    let objects = repo.commondir().join("objects");
    let alternates = checkout.path().join("objects/info/alternates");
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| RepoError::Io { what, path, source }
    };
    if let Some(parent) = alternates.parent() {
        std::fs::create_dir_all(parent).map_err(io("cannot create", parent))?;
    }
    let line = format!("{}\n", objects.display());
    teneral_core::fsutil::write_atomic(&alternates, line.as_bytes())
        .map_err(io("cannot write", &alternates))?;
    // Reopen so libgit2 reads the alternates just written.
    let checkout = Repository::open(dir).map_err(git("open a checkout", dir))?;
    checkout.find_commit(commit).map_err(git("find the commit", dir))?;
    checkout.set_head_detached(commit).map_err(git("detach HEAD", dir))?;
    let mut opts = CheckoutBuilder::new();
    opts.force().remove_untracked(true).remove_ignored(true);
    checkout.checkout_head(Some(&mut opts)).map_err(git("check out", dir))?;
    Ok(())
}

/// Every entry under `body/` in `commit`, with its git file mode.
pub fn body_entries(
    repo: &Repository,
    home: &Path,
    commit: Oid,
) -> Result<Vec<(String, i32)>, RepoError> {
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(git("read a tree", home))?;
    let Some(body) = tree.get_name("body") else { return Ok(Vec::new()) };
    let body =
        body.to_object(repo).and_then(|o| o.peel_to_tree()).map_err(git("read body/", home))?;
    let mut entries = Vec::new();
    body.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or("?");
        entries.push((format!("body/{dir}{name}"), entry.filemode()));
        git2::TreeWalkResult::Ok
    })
    .map_err(git("walk body/", home))?;
    Ok(entries)
}

/// The tree ids a check's verdict depends on: `(kernel, body)` where the
/// kernel's is the whole tree without `body/` and `BACKLOG.md`.
pub fn tree_ids(
    repo: &Repository,
    home: &Path,
    commit: Oid,
) -> Result<(String, String), RepoError> {
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(git("read a tree", home))?;
    let body = tree.get_name("body").map(|e| e.id().to_string()).unwrap_or_default();
    let mut builder = repo.treebuilder(Some(&tree)).map_err(git("read a tree", home))?;
    for name in ["body", "BACKLOG.md"] {
        if builder.get(name).ok().flatten().is_some() {
            builder.remove(name).map_err(git("read a tree", home))?;
        }
    }
    let kernel = builder.write().map_err(git("write a tree", home))?;
    Ok((kernel.to_string(), body))
}

/// Removes the lock file a kill inside a move of `lineage/local` leaves
/// (git writes the new value into `<ref>.lock` and renames it over the
/// ref): left behind, it makes every later move fail with "failed to lock
/// file". Only the kernel writes the lineage, and only while it holds the
/// individual's lock, so a lock file seen by a holder of that lock is a
/// dead writer's. Call holding the individual's lock. Whether one was
/// removed.
pub fn remove_stale_lineage_lock(repo: &Repository) -> Result<bool, RepoError> {
    let lock = repo.path().join("refs/heads").join(format!("{LINEAGE_BRANCH}.lock"));
    match std::fs::remove_file(&lock) {
        Ok(()) => {
            if let Some(dir) = lock.parent() {
                teneral_core::fsutil::sync_dir(dir).map_err(|source| RepoError::Io {
                    what: "sync",
                    path: dir.into(),
                    source,
                })?;
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(RepoError::Io { what: "remove the stale lock", path: lock, source }),
    }
}

/// Points `lineage/local` of the main repository at `commit`.
pub fn move_lineage(repo: &Repository, home: &Path, commit: Oid) -> Result<(), RepoError> {
    let target = repo.find_commit(commit).map_err(git("find commit", home))?;
    repo.branch(LINEAGE_BRANCH, &target, true).map(|_| ()).map_err(git("move lineage/local", home))
}

/// Makes the agent's workspace if it is not there: a clone of the main
/// repository on `lineage/local`. An existing workspace is left as it is,
/// and never opened: it is the body's (a root kernel's body owns it, and
/// libgit2 refuses a repository of another owner), so a `.git/HEAD` that
/// is a regular file is taken for a clone.
pub fn ensure_candidate(home: &Path) -> Result<PathBuf, RepoError> {
    let dir = home.join(CANDIDATE_DIR);
    if std::fs::symlink_metadata(dir.join(".git/HEAD")).is_ok_and(|m| m.is_file()) {
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
        let repo = Repository::init(dir).expect("git init works in a temporary directory");
        std::fs::write(dir.join("a.txt"), "one").unwrap_or_default();
        let oid = commit_all(&repo, "first");
        (repo, oid)
    }

    fn commit_all(repo: &Repository, msg: &str) -> Oid {
        let mut index = repo.index().expect("the repository has an index");
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .expect("the work tree files can be staged");
        index.write().expect("the index can be written");
        let tree = repo.find_tree(index.write_tree().expect("the index makes a tree"));
        let tree = tree.expect("the tree just written is found");
        let sig = git2::Signature::now("t", "t@t").expect("a signature with a fixed name is valid");
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<_> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
            .expect("the staged tree commits on HEAD")
    }

    #[test]
    fn live_is_reset_to_the_exact_commit() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let home = dir.path();
        let (repo, first) = repo_with_commit(home);
        std::fs::write(home.join("a.txt"), "two").unwrap_or_default();
        let second = commit_all(&repo, "second");
        let live = reset_live(&repo, home, first).expect("live resets to the first commit");
        assert_eq!(std::fs::read_to_string(live.join("a.txt")).unwrap_or_default(), "one");
        std::fs::write(live.join("stray.txt"), "x").unwrap_or_default();
        std::fs::write(live.join("a.txt"), "edited").unwrap_or_default();
        reset_live(&repo, home, second).expect("live resets over stray and edited files");
        assert_eq!(std::fs::read_to_string(live.join("a.txt")).unwrap_or_default(), "two");
        assert!(!live.join("stray.txt").exists(), "untracked files are removed");
    }

    #[test]
    fn candidate_is_an_own_clone_on_the_lineage() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let home = dir.path();
        let (repo, first) = repo_with_commit(home);
        ensure_lineage(&repo, home, first)
            .expect("the lineage branch can point at the first commit");
        let cand = ensure_candidate(home).expect("the candidate clones from the lineage");
        let c = Repository::open(&cand).expect("the candidate is a repository");
        assert!(!c.is_worktree());
        assert_ne!(c.commondir(), repo.commondir(), "its own .git, not the main one");
        let head = c.head().expect("the candidate has a HEAD");
        assert_eq!(head.shorthand(), Some(LINEAGE_BRANCH));
        assert_eq!(head.target(), Some(first));
    }
}
