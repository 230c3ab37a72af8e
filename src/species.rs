//! The species: how a lineage takes in what the project gained after its
//! birth, as a mutation checked at the gate (docs/species.md).
//!
//! [`judge`] runs before any of the candidate's code runs, once the gate's
//! fetch has put the candidate's verified objects in the main repository:
//! 1. acceptances waiting in `.teneral/owner/` are taken in ([`consent`]);
//! 2. a candidate that leaves everything outside `body/` and `BACKLOG.md` as
//!    the running generation has it is ordinary: nothing is fetched;
//! 3. otherwise, unless `TENERAL_SPECIES=off`, the species ref
//!    ([`upstream`]) is fetched when it is on a remote, and the rule
//!    ([`rule::place`]) says whether the candidate stands on a later species
//!    commit and holds exactly its files outside those paths;
//! 4. when the install's `SIGNERS` lists keys, that commit must carry a
//!    valid SSH signature by one of them ([`signers`]);
//! 5. a commit that brings a new kernel (more than documents) needs the
//!    owner's consent under `ask`.
//!
//! Invariants: the agent's workspace is never opened; the kernel never
//! pushes or changes a remote; a refusal that waits for the owner or the
//! network does not count toward the three refusals of one commit.

pub mod consent;
mod history;
pub mod rule;
pub mod signers;
mod sys;
mod transport;
pub mod upstream;

use std::path::Path;
use std::time::Duration;

use git2::{Oid, Repository};

use crate::events::SharedJournal;
use crate::settings::Settings;
pub use consent::{take_in as take_in_accepts, Accepted, Record, SPECIES_FILE};
pub use rule::Refusal;
pub use signers::SIGNERS_FILE;
use teneral_core::commit::Commit;
pub use upstream::FETCH_LIMIT;

/// What one judgement reads.
pub struct SpeciesContext<'a> {
    /// The individual's directory: the main repository's checkout, the install.
    pub home: &'a Path,
    /// The main repository at `home`.
    pub repo: &'a Repository,
    pub settings: &'a Settings,
    pub journal: &'a SharedJournal,
    /// The install's `SIGNERS` (`home/SIGNERS`): never a generation's copy.
    pub signers: &'a Path,
    /// How long the species' fetch may take ([`FETCH_LIMIT`]).
    pub fetch_limit: Duration,
}

/// What the species rule makes of a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Only `body/` and `BACKLOG.md` changed: judge it as always.
    Ordinary,
    /// It comes to stand on `species`, which differs from the running
    /// generation only in documents: taken like a body change, no consent,
    /// no new kernel.
    DocumentsOnly { species: Commit },
    /// It comes to stand on `species` (from `from`, when the running
    /// generation stood on one) and brings a new kernel; the owner consented
    /// or `TENERAL_SPECIES=auto`.
    Species { species: Commit, from: Option<Commit> },
}

fn git_refusal(what: &str, e: git2::Error) -> Refusal {
    Refusal::waiting(format!(
        "the species rule could not read the repository ({what}: {e}); see `git status` in the \
         individual's directory and ask again"
    ))
}

/// Judges `candidate` replacing `running` by the species rule. Takes in the
/// owner's acceptances first. `Err` is a refusal, with its words and whether
/// it counts.
pub async fn judge(
    ctx: &SpeciesContext<'_>,
    running: Oid,
    candidate: Oid,
) -> Result<Judgement, Refusal> {
    if let Err(e) = take_in_accepts(ctx.home, ctx.journal, &crate::repo::commit_of(running)) {
        teneral_core::log::info(format!("species: acceptances not taken in: {e}"));
    }
    let changed = history::differing_outside(ctx.repo, running, candidate)
        .map_err(|e| git_refusal("diff", e))?;
    let outside = rule::outside(&changed);
    match rule::first_look(&outside, ctx.settings.species) {
        rule::First::Ordinary => return Ok(Judgement::Ordinary),
        rule::First::Refused(refusal) => return Err(refusal),
        rule::First::Species => {}
    }
    // Without a species, a change outside is what it always was.
    let upstream = which(ctx).map_err(|why| rule::protected(&outside, &format!(" ({why})")))?;
    let tip = upstream::tip(ctx.home, &upstream, ctx.fetch_limit)
        .await
        .map_err(|e| Refusal::waiting(e.to_string()))?;
    let standing = history::standing(ctx.repo, &upstream.name(), running, candidate, tip)
        .map_err(|e| git_refusal("merge base", e))?;
    let placed = rule::place(&outside, &standing)?;
    let on = placed.commit().clone();
    signed(ctx, &on)?;
    match placed {
        rule::Placed::Documents(species) => Ok(Judgement::DocumentsOnly { species }),
        rule::Placed::Kernel(species) => {
            launcher_for(ctx, &species)?;
            let record = Record::load(ctx.home).map_err(|e| Refusal::waiting(e.to_string()))?;
            let accepted = record
                .accepted
                .iter()
                .filter_map(|a| Commit::parse(a).ok())
                .any(|a| history::accepts(ctx.repo, &a, &species));
            if let Err(refusal) = rule::consent(ctx.settings.species, &species, accepted) {
                if refusal.awaiting.is_some() {
                    ask(ctx.home, record, &species);
                }
                return Err(refusal);
            }
            Ok(Judgement::Species { species, from: standing.running_on })
        }
    }
}

/// The species ref of this repository and its settings.
fn which(ctx: &SpeciesContext<'_>) -> Result<upstream::Upstream, String> {
    let remotes: Vec<String> = ctx
        .repo
        .remotes()
        .map(|names| names.iter().flatten().map(str::to_owned).collect())
        .unwrap_or_default();
    let head = ctx.repo.head().ok();
    let current = head.as_ref().filter(|h| h.is_branch()).and_then(|h| h.shorthand());
    upstream::resolve(ctx.settings.upstream.as_deref(), &remotes, current)
}

/// The signature check, when the install's `SIGNERS` lists keys.
fn signed(ctx: &SpeciesContext<'_>, on: &Commit) -> Result<(), Refusal> {
    let listed = signers::load(ctx.signers).map_err(Refusal::waiting)?;
    if listed.is_empty() {
        return Ok(());
    }
    let oid = Oid::from_str(on.as_str()).map_err(|e| git_refusal("commit id", e))?;
    signers::check_commit(ctx.repo, oid, &listed).map(|_| ()).map_err(|why| Refusal {
        check: "species",
        message: format!(
            "species commit {on} is not signed by a maintainer the install's SIGNERS lists: {why}. \
             Only a commit signed by a listed key can be stood on; wait for a signed commit of \
             the species, or the owner adds the maintainer's key to SIGNERS"
        ),
        counts: true,
        awaiting: None,
    })
}

/// A species commit whose kernel needs a newer launcher than the install's
/// is refused (not counted: only the owner can mend it).
fn launcher_for(ctx: &SpeciesContext<'_>, species: &Commit) -> Result<(), Refusal> {
    use crate::launcher::{contract, kernels};
    let oid = Oid::from_str(species.as_str()).map_err(|e| git_refusal("commit id", e))?;
    let text = kernels::launch_file(ctx.repo, oid).map_err(|e| git_refusal("launch file", e))?;
    let needed = contract::needs(text.as_deref())
        .map_err(|e| Refusal::counted("species", format!("species commit {species}: {e}")))?;
    let have = contract::launcher_here();
    if needed > have {
        let what = format!("species commit {species}");
        return Err(Refusal::waiting(contract::update_the_install(&what, needed, have)));
    }
    Ok(())
}

/// Records that the gate asked about `species`, for `teneralctl accept`
/// without a commit.
fn ask(home: &Path, mut record: Record, species: &Commit) {
    record.asked = Some(species.to_string());
    if let Err(e) = record.save(home) {
        teneral_core::log::info(format!("species: {e}"));
    }
}
