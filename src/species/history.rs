//! The facts the rule needs, read with git2 from the kernel's own main
//! repository, whose objects of the candidate the gate's fetch verified
//! ([`crate::gate::fetch`]); the agent's workspace is never opened.

use git2::{ErrorCode, Oid, Repository};

use super::rule::{self, Relation, Standing};
use crate::repo::commit_of;
use teneral_core::commit::Commit;

/// The paths outside `body/` and `BACKLOG.md` whose entries differ between
/// the trees of `from` and `to`.
pub fn differing_outside(
    repo: &Repository,
    from: Oid,
    to: Oid,
) -> Result<Vec<String>, git2::Error> {
    let old = repo.find_commit(from)?.tree()?;
    let new = repo.find_commit(to)?.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut paths = Vec::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(p) = file.path().map(|p| p.to_string_lossy().into_owned()) {
                if !rule::changeable(&p) && !paths.contains(&p) {
                    paths.push(p);
                }
            }
        }
    }
    Ok(paths)
}

/// The species commit `commit` stands on: its merge base with the tip.
fn stands_on(repo: &Repository, commit: Oid, tip: Oid) -> Result<Option<Oid>, git2::Error> {
    match repo.merge_base(commit, tip) {
        Ok(oid) => Ok(Some(oid)),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where the running generation and the candidate stand on the species
/// whose tip is `tip` (named `species`).
pub fn standing(
    repo: &Repository,
    species: &str,
    running: Oid,
    candidate: Oid,
    tip: Oid,
) -> Result<Standing, git2::Error> {
    let running_on = stands_on(repo, running, tip)?;
    let candidate_on = stands_on(repo, candidate, tip)?;
    let relation = match (running_on, candidate_on) {
        (Some(g), Some(c)) if g == c => Relation::Same,
        (Some(g), Some(c)) if repo.graph_descendant_of(c, g)? => Relation::Later,
        (Some(g), Some(c)) if repo.graph_descendant_of(g, c)? => Relation::Earlier,
        (Some(_), Some(_)) => Relation::Beside,
        _ => Relation::Same,
    };
    let differing = match candidate_on {
        Some(on) => differing_outside(repo, on, candidate)?,
        None => Vec::new(),
    };
    Ok(Standing {
        species: species.to_owned(),
        running_on: running_on.map(commit_of),
        candidate_on: candidate_on.map(commit_of),
        relation,
        shallow: repo.is_shallow(),
        differing,
    })
}

/// Whether accepting `accepted` accepts `commit`: it is that commit or a
/// later one. A commit not in the repository accepts nothing.
pub fn accepts(repo: &Repository, accepted: &Commit, commit: &Commit) -> bool {
    let (Ok(a), Ok(c)) = (Oid::from_str(accepted.as_str()), Oid::from_str(commit.as_str())) else {
        return false;
    };
    a == c || repo.graph_descendant_of(a, c).unwrap_or(false)
}
