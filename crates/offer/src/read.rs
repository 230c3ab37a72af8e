//! The git side of a check: an `offer/<name>` branch's commits since the
//! species' head, read with git2 into what the scan takes, with each
//! commit's signature and the files the offer changes.

use std::collections::BTreeSet;
use std::path::Path;

use git2::{Diff, DiffOptions, Oid, Patch, Repository, Sort, Tree};

use super::scan::{CommitChange, FileChange};
use teneral_core::commit::Commit;

/// What an offer branch holds, as read.
pub struct Offer {
    /// `offer/<name>`.
    pub branch: String,
    pub head: Commit,
    /// The species' head the offer is checked against.
    pub base: Commit,
    /// Whether the species' head is an ancestor of the offer's head.
    pub descends: bool,
    /// Oldest first.
    pub commits: Vec<CommitChange>,
    /// Per commit (same order): its SSH signature and the data it signs.
    pub signatures: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    /// The files the offer changes from the species' head to its own:
    /// path and size at the offer's head (`None`: deleted).
    pub files: Vec<(String, Option<u64>)>,
    /// Top-level names at the species' head.
    pub known_top: BTreeSet<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0:?} is no offer branch: offers are branches named offer/<name>")]
    NotOffer(String),
    #[error("cannot open the repository at {dir}: {why}; run this in the individual's checkout or pass -d")]
    Repo { dir: String, why: String },
    #[error("{what} {name:?} is not in the repository ({why}); {next}")]
    Missing { what: &'static str, name: String, why: String, next: &'static str },
    #[error("cannot read the offer's history: {0}")]
    Git(#[from] git2::Error),
}

/// `offer/<name>` for `offer/<name>` or `<name>`.
pub fn branch_name(text: &str) -> Result<String, ReadError> {
    let name = text.strip_prefix("refs/heads/").unwrap_or(text);
    let name = if name.starts_with("offer/") { name.to_owned() } else { format!("offer/{name}") };
    let valid = git2::Reference::is_valid_name(&format!("refs/heads/{name}"));
    if !valid || name.len() <= "offer/".len() {
        return Err(ReadError::NotOffer(text.to_owned()));
    }
    Ok(name)
}

fn commit_of(oid: Oid) -> Commit {
    Commit::from_raw(oid.as_bytes())
}

/// Reads the offer `branch` of the repository at `dir` against `base` (a
/// ref or commit naming the species' head).
pub fn read(dir: &Path, branch: &str, base: &str) -> Result<Offer, ReadError> {
    let branch = branch_name(branch)?;
    let head = format!("refs/heads/{branch}");
    read_ref(dir, branch, &head, base)
}

/// Reads the offer at the ref `head` (named `branch` in the report), as
/// [`read`] does; a witness reads a fetched pull request this way.
pub fn read_ref(dir: &Path, branch: String, head: &str, base: &str) -> Result<Offer, ReadError> {
    let repo = Repository::open(dir)
        .map_err(|e| ReadError::Repo { dir: dir.display().to_string(), why: e.message().into() })?;
    let head = repo.revparse_single(head).and_then(|o| o.peel_to_commit()).map_err(|e| {
        ReadError::Missing {
            what: "the branch",
            name: branch.clone(),
            why: e.message().into(),
            next: "prepare it with git switch -c offer/<name> at the species' head",
        }
    })?;
    let base_commit = repo.revparse_single(base).and_then(|o| o.peel_to_commit()).map_err(|e| {
        ReadError::Missing {
            what: "the species' head",
            name: base.to_owned(),
            why: e.message().into(),
            next: "name it with --base <ref>",
        }
    })?;
    let descends =
        repo.graph_descendant_of(head.id(), base_commit.id())? || head.id() == base_commit.id();
    let fork = repo.merge_base(head.id(), base_commit.id()).unwrap_or(base_commit.id());

    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.push(head.id())?;
    walk.hide(fork)?;
    let mut commits = Vec::new();
    let mut signatures = Vec::new();
    for oid in walk {
        let oid = oid?;
        let commit = repo.find_commit(oid)?;
        let parent_tree = match commit.parents().next() {
            Some(p) => Some(p.tree()?),
            None => None,
        };
        // No context: only added lines are wanted.
        let mut options = DiffOptions::new();
        options.context_lines(0).interhunk_lines(0);
        let diff = repo.diff_tree_to_tree(
            parent_tree.as_ref(),
            Some(&commit.tree()?),
            Some(&mut options),
        )?;
        commits.push(CommitChange {
            commit: commit_of(oid),
            message: String::from_utf8_lossy(commit.message_bytes()).into_owned(),
            files: changes(&diff)?,
        });
        signatures
            .push(repo.extract_signature(&oid, None).ok().map(|(s, d)| (s.to_vec(), d.to_vec())));
    }
    let base_tree = repo.find_commit(fork)?.tree()?;
    let head_tree = head.tree()?;
    let files = sizes(&repo, &base_tree, &head_tree)?;
    let known_top =
        base_commit.tree()?.iter().filter_map(|e| e.name().map(str::to_owned)).collect();
    Ok(Offer {
        branch,
        head: commit_of(head.id()),
        base: commit_of(base_commit.id()),
        descends,
        commits,
        signatures,
        files,
        known_top,
    })
}

/// Each file of a diff with the lines it adds; binary files unread.
fn changes(diff: &Diff<'_>) -> Result<Vec<FileChange>, git2::Error> {
    let mut files = Vec::new();
    for i in 0..diff.deltas().len() {
        let Some(delta) = diff.get_delta(i) else { continue };
        let path = delta.new_file().path().or_else(|| delta.old_file().path());
        let path = path.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mut file = FileChange { path, binary: false, added: Vec::new() };
        let patch = Patch::from_diff(diff, i)?;
        let binary = delta.flags().is_binary()
            || patch.as_ref().is_none_or(|p| p.delta().flags().is_binary());
        match patch {
            Some(patch) if !binary => {
                for h in 0..patch.num_hunks() {
                    for l in 0..patch.num_lines_in_hunk(h)? {
                        let line = patch.line_in_hunk(h, l)?;
                        if line.origin() != '+' {
                            continue;
                        }
                        let text = String::from_utf8_lossy(line.content());
                        let text = text.strip_suffix('\n').unwrap_or(&text);
                        file.added.push((line.new_lineno().unwrap_or(0), text.to_owned()));
                    }
                }
            }
            _ => file.binary = true,
        }
        files.push(file);
    }
    Ok(files)
}

/// The files changed from `base` to `head`, with their size at `head`.
fn sizes(
    repo: &Repository,
    base: &Tree<'_>,
    head: &Tree<'_>,
) -> Result<Vec<(String, Option<u64>)>, git2::Error> {
    let diff = repo.diff_tree_to_tree(Some(base), Some(head), None)?;
    let mut files = Vec::new();
    for delta in diff.deltas() {
        let new = delta.new_file();
        let path = new.path().or_else(|| delta.old_file().path());
        let path = path.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let size = if delta.status() == git2::Delta::Deleted {
            None
        } else {
            Some(repo.find_blob(new.id()).map(|b| b.size() as u64).unwrap_or(new.size()))
        };
        files.push((path, size));
    }
    Ok(files)
}
