//! The owner's side of offers: `teneralctl offer list|approve|token|publish`
//! and `/offers`, `/approve <commit>` in talk.
//!
//! `list` is the kernel's own account, read from git and the kept reports,
//! not from anything the agent said. An approval is the owner channel's
//! empty dot-file for exactly one commit (`teneral_core::owner`), written
//! only here, from a terminal or talk; it is used up by the publishing it
//! allowed.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::Value;
use teneral_core::commit::Commit;
use teneral_core::journal::{writer::Journal, JOURNAL_PATH};
use teneral_core::{lock, owner};
use teneral_offer::approve::{self, Mode};
use teneral_offer::{forge, publish, token};

use crate::accept::{self, AcceptError};
use crate::journal::EventKind;

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error(transparent)]
    Commit(#[from] AcceptError),
    #[error("{0} was never checked: run teneralctl offer check on its branch first, and read the report")]
    Unchecked(String),
    #[error("{0} failed its check: the report in .teneral/offers/ says what to put right; nothing failed is approved")]
    Failed(String),
    #[error("cannot write the approval in {dir}: {source}; the directory must be the individual's, writable by you")]
    Write { dir: String, source: std::io::Error },
    #[error("cannot read the offer branches: {0}")]
    Git(String),
    #[error(transparent)]
    Refused(#[from] approve::Refused),
    #[error(transparent)]
    Token(#[from] token::TokenError),
    #[error(transparent)]
    Forge(#[from] forge::ForgeError),
    #[error(transparent)]
    Publish(#[from] publish::PublishError),
    #[error("the kernel is running this individual: publishing is asked of it by the agent's offer tool (or stop the kernel and publish from here)")]
    KernelRuns,
    #[error("cannot read the token: {0}")]
    Ask(String),
    #[error(transparent)]
    Witness(#[from] teneral_offer::witness::WitnessError),
    #[error("published, but the journal could not be written: {0}")]
    Journal(String),
}

/// One offer branch as the kernel sees it.
pub struct Listed {
    pub branch: String,
    pub commit: Commit,
    pub title: String,
    /// `None`: never checked.
    pub passed: Option<bool>,
    pub approved: bool,
    pub pull: Option<String>,
}

/// Every `offer/<name>` branch of the individual at `home`.
pub fn list(home: &Path) -> Result<Vec<Listed>, OwnerError> {
    let git = |e: git2::Error| OwnerError::Git(e.message().to_owned());
    let repo = git2::Repository::open(home).map_err(git)?;
    let mut listed = Vec::new();
    for branch in repo.branches(Some(git2::BranchType::Local)).map_err(git)? {
        let (branch, _) = branch.map_err(git)?;
        let Some(name) = branch.name().map_err(git)?.map(str::to_owned) else { continue };
        if !name.starts_with("offer/") {
            continue;
        }
        let head = branch.get().peel_to_commit().map_err(git)?;
        let commit = Commit::from_raw(head.id().as_bytes());
        let report = approve::kept_report(home, &commit);
        listed.push(Listed {
            branch: name,
            title: head.summary().unwrap_or("").to_owned(),
            passed: report.map(|r| r["passed"] == true),
            approved: owner::is_approved(home, &commit),
            pull: publish::published(home, &commit)
                .and_then(|p| p["pull"].as_str().map(str::to_owned)),
            commit,
        });
    }
    Ok(listed)
}

/// What `list` prints (and `/offers` shows), one row an offer.
pub fn list_text(home: &Path) -> Result<String, OwnerError> {
    let mode = approve::mode(home)?;
    let rows = list(home)?;
    let mut text = format!("TENERAL_PUBLISH={}\n", mode_name(mode));
    if rows.is_empty() {
        text.push_str("no offer/<name> branch: the agent offers nothing now\n");
    }
    for r in rows {
        let state = match (&r.pull, r.passed, r.approved) {
            (Some(pull), _, _) => format!("published: {pull}"),
            (None, None, _) => "not checked".to_owned(),
            (None, Some(false), _) => "check failed".to_owned(),
            (None, Some(true), true) => "approved, waits to be published".to_owned(),
            (None, Some(true), false) if mode == Mode::Ask => {
                format!("passed; waits for you: teneralctl offer approve {}", r.commit.short())
            }
            (None, Some(true), false) => "passed".to_owned(),
        };
        text.push_str(&format!("{} {} {}: {state}\n", r.commit.short(), r.branch, r.title));
    }
    Ok(text)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Ask => "ask",
        Mode::Auto => "auto",
        Mode::Off => "off",
    }
}

/// Approves exactly the commit `text` names (7 or more hex digits), which
/// must have passed its check. Returns it.
pub fn approve(home: &Path, text: &str) -> Result<Commit, OwnerError> {
    let commit = accept::resolve(home, text)?;
    let report: Option<Value> = approve::kept_report(home, &commit);
    match report {
        // The head of a pull request fetched to witness it: approved to be checked.
        None if witnessed(home, &commit) => {}
        None => return Err(OwnerError::Unchecked(commit.short().to_owned())),
        Some(r) if r["passed"] != true => {
            return Err(OwnerError::Failed(commit.short().to_owned()))
        }
        Some(_) => {}
    }
    owner::write_approval(home, &commit).map_err(|source| OwnerError::Write {
        dir: home.join(owner::APPROVED_DIR).display().to_string(),
        source,
    })?;
    Ok(commit)
}

/// Whether `commit` is the head of a pull request fetched to be witnessed.
fn witnessed(home: &Path, commit: &Commit) -> bool {
    let Ok(repo) = git2::Repository::open(home) else { return false };
    let Ok(refs) = repo.references_glob("refs/witness/*") else { return false };
    let found = refs
        .flatten()
        .any(|r| r.target().is_some_and(|t| Commit::from_raw(t.as_bytes()) == *commit));
    found
}

/// `teneralctl offer witness <number> [--also '<command>']`: the report
/// posted, and where. The gate's checks and the command run unless `no_gates`.
pub fn witness(
    home: &Path,
    number: u64,
    also: Option<&str>,
    no_gates: bool,
) -> Result<String, OwnerError> {
    let run = |head: &Commit| super::gates::run(home, head, also).map_err(|e| e.to_string());
    let gates: Option<teneral_offer::witness::RunGates<'_>> =
        if no_gates { None } else { Some(&run) };
    let done = teneral_offer::witness::witness(home, number, gates)?;
    let verdict = if done.passed { "passed" } else { "FAILED" };
    Ok(format!(
        "{}
the check {verdict}; posted as {}",
        done.text, done.comment
    ))
}

/// What is said after an approval.
pub fn approved_text(home: &Path, commit: &Commit) -> String {
    let off = matches!(approve::mode(home), Ok(Mode::Off));
    let note = if off {
        " (but TENERAL_PUBLISH is off: nothing goes out until you change it)"
    } else {
        ""
    };
    format!("approved {} for publishing, that commit alone{note}", commit.short())
}

/// `teneralctl offer token`: typed unseen, tried once against the
/// species' repository, stored only when it works.
pub fn token(home: &Path) -> Result<String, OwnerError> {
    let species = forge::species(home)?;
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    let mut asker =
        crate::setup::ask::Asker { input: stdin.lock(), out: std::io::stdout(), terminal };
    let typed = asker
        .secret("the token", &format!("A GitHub token for {}/{}:", species.owner, species.repo))
        .map_err(|e| OwnerError::Ask(e.to_string()))?;
    let typed = token::Token::new(&typed)?;
    forge::Forge::new(&species, &typed)?.try_token()?;
    token::store(home, &typed)?;
    Ok(format!(
        "the token works for {}/{} and is stored in {}",
        species.owner,
        species.repo,
        token::token_path(home).display()
    ))
}

/// `teneralctl offer publish <commit>`: with no kernel running, publishes
/// and journals `offer.published`.
pub fn publish(home: &Path, text: &str) -> Result<String, OwnerError> {
    let commit = accept::resolve(home, text)?;
    if lock::is_held(home) {
        return Err(OwnerError::KernelRuns);
    }
    let _lock = lock::acquire(home).map_err(|_| OwnerError::KernelRuns)?;
    let done = publish::publish(home, &commit)?;
    let generation = teneral_core::state::State::load(home)
        .ok()
        .and_then(|s| s.generation)
        .map(|c| c.as_str().to_owned())
        .unwrap_or_default();
    Journal::open(&home.join(JOURNAL_PATH))
        .and_then(|mut j| {
            j.append_kernel(&generation, EventKind::OfferPublished, publish::event(&done))
        })
        .map_err(|e| OwnerError::Journal(e.to_string()))?;
    let how = if done.pushed { "pushed" } else { "already pushed" };
    Ok(format!("{} {how} to {}; pull request {}", done.commit.short(), done.branch, done.pull.url))
}
