//! The species rule as pure decisions over facts the edges computed: which
//! paths a mutation may change on its own, where a candidate stands on the
//! species compared with the running generation, and what the owner's
//! consent allows. Every refusal's words are made here.

use crate::settings::Species as Setting;
use teneral_core::commit::Commit;

/// Files no kernel runs: a species commit that changes only these (outside
/// the changeable paths) is taken like a change to the body.
const DOCUMENT_FILES: [&str; 2] = ["README.md", "LICENSE"];
const DOCUMENT_DIRS: [&str; 4] = ["docs/", ".github/", ".ci/", "site/"];

/// Whether a mutation may change `path` on its own: `body/` and `BACKLOG.md`.
pub fn changeable(path: &str) -> bool {
    path.starts_with("body/") || path == "BACKLOG.md"
}

/// Whether `path` is a document: the README, a licence file, `docs/`, the CI.
pub fn document(path: &str) -> bool {
    DOCUMENT_FILES.iter().any(|f| path == *f || (*f == "LICENSE" && path.starts_with(f)))
        || DOCUMENT_DIRS.iter().any(|d| path.starts_with(d))
}

/// The paths of `changed` outside the changeable ones.
pub fn outside(changed: &[String]) -> Vec<String> {
    changed.iter().filter(|p| !changeable(p)).cloned().collect()
}

/// Why the gate refuses, in the words the agent and the owner read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The check the refusal is journaled under (`mutation.rejected`):
    /// `paths` for a protected path, `species` for the rest.
    pub check: &'static str,
    pub message: String,
    /// Whether it counts toward the three refusals of one commit. A refusal
    /// that waits for the owner or the network does not.
    pub counts: bool,
    /// The species commit the owner is asked to accept, if that is the wait.
    pub awaiting: Option<Commit>,
}

impl Refusal {
    pub(crate) fn counted(check: &'static str, message: String) -> Refusal {
        Refusal { check, message, counts: true, awaiting: None }
    }

    /// A refusal that does not count: it waits for the owner or the network.
    pub fn waiting(message: String) -> Refusal {
        Refusal { check: "species", message, counts: false, awaiting: None }
    }
}

/// The refusal for paths outside the changeable ones, with `why` after it.
pub fn protected(outside: &[String], why: &str) -> Refusal {
    Refusal::counted(
        "paths",
        format!(
            "protected paths changed: {}. A mutation may change only body/ and BACKLOG.md{why}; \
             undo the others in your workspace (git -C .teneral/candidate checkout <running commit> -- <path>) \
             and ask again",
            outside.join(", ")
        ),
    )
}

/// What the first look, before anything is fetched, says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum First {
    /// Nothing outside the changeable paths changed: the species is not looked at.
    Ordinary,
    /// The species must be looked at.
    Species,
    Refused(Refusal),
}

/// The first look: the paths outside and the owner's setting.
pub fn first_look(outside: &[String], setting: Setting) -> First {
    match (outside.is_empty(), setting) {
        (true, _) => First::Ordinary,
        (false, Setting::Off) => First::Refused(protected(
            outside,
            " (TENERAL_SPECIES=off: nothing is taken from the species)",
        )),
        (false, _) => First::Species,
    }
}

/// How the species commit the candidate stands on relates to the running one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Same,
    /// The candidate's is a descendant of the running generation's.
    Later,
    /// The candidate's is an ancestor of the running generation's.
    Earlier,
    /// Neither descends from the other.
    Beside,
}

/// Where the two commits stand on the species (merge bases with its tip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The species ref as named (`origin/main`, `main`).
    pub species: String,
    pub running_on: Option<Commit>,
    pub candidate_on: Option<Commit>,
    /// Meaningful when both stand on a commit.
    pub relation: Relation,
    /// The repository is a shallow clone.
    pub shallow: bool,
    /// Paths outside the changeable ones where the candidate differs from
    /// the species commit it stands on.
    pub differing: Vec<String>,
}

/// A species commit the candidate may come to stand on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// It differs from the running generation only in documents.
    Documents(Commit),
    /// It brings a new kernel.
    Kernel(Commit),
}

impl Placed {
    pub fn commit(&self) -> &Commit {
        match self {
            Placed::Documents(c) | Placed::Kernel(c) => c,
        }
    }
}

/// The rule: where the candidate stands decides whether its changes outside
/// `body/` and `BACKLOG.md` (`outside`, never empty here) are taken.
pub fn place(outside: &[String], standing: &Standing) -> Result<Placed, Refusal> {
    let unshallow = if standing.shallow {
        "; this repository is a shallow clone, so git may not see the history it shares with \
         the species: `git fetch --unshallow` in the individual's directory mends it"
    } else {
        ""
    };
    if standing.shallow && standing.running_on.is_none() {
        // The history that decides may lie beyond the clone's depth.
        return Err(Refusal::waiting(format!(
            "protected paths changed: {}. The running generation stands on no commit git can \
             see of the species {}{unshallow}; then ask for the mutation again",
            outside.join(", "),
            standing.species
        )));
    }
    let Some(on) = &standing.candidate_on else {
        let why = format!(
            " (or merge a later commit of the species {} and hold exactly its files: \
             the candidate shares no history with it{unshallow})",
            standing.species
        );
        let mut refusal = protected(outside, &why);
        refusal.counts = !standing.shallow;
        return Err(refusal);
    };
    if let Some(running_on) = &standing.running_on {
        match standing.relation {
            Relation::Same => return Err(protected(outside, "")),
            Relation::Earlier | Relation::Beside => {
                return Err(Refusal::counted(
                    "species",
                    format!(
                        "would move the species back from {} to {}: a lineage only moves forward \
                         on the species {}; merge {} or a later commit of it into your workspace \
                         and ask again",
                        running_on.short(),
                        on.short(),
                        standing.species,
                        running_on.short()
                    ),
                ))
            }
            Relation::Later => {}
        }
    }
    if !standing.differing.is_empty() {
        return Err(Refusal::counted(
            "species",
            format!(
                "outside body/ and BACKLOG.md the candidate must hold exactly what species commit \
                 {on} holds, and these paths differ: {}. Take them from it \
                 (git -C .teneral/candidate checkout {} -- <path>), commit and ask again",
                standing.differing.join(", "),
                on.short()
            ),
        ));
    }
    if outside.iter().all(|p| document(p)) {
        Ok(Placed::Documents(on.clone()))
    } else {
        Ok(Placed::Kernel(on.clone()))
    }
}

/// The owner's consent to a new kernel: under `ask`, `accepted` says whether
/// the owner accepted `on` or a later commit.
pub fn consent(setting: Setting, on: &Commit, accepted: bool) -> Result<(), Refusal> {
    match setting {
        Setting::Auto => Ok(()),
        Setting::Ask if accepted => Ok(()),
        Setting::Ask => Err(Refusal {
            awaiting: Some(on.clone()),
            ..Refusal::waiting(format!(
                "species commit {on} brings a new kernel, and the owner has not accepted it \
                 (TENERAL_SPECIES=ask). Ask your owner to accept it (`teneralctl accept {}`, or \
                 /accept in talk), then ask for this mutation again",
                on.short()
            ))
        }),
        Setting::Off => Err(protected(&[], " (TENERAL_SPECIES=off)")),
    }
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
