//! The owner's evaluations: what *better* means for this individual, held
//! against every candidate.
//!
//! Each evaluation is a file of `evals/` ([`format`]): a stimulus, the
//! stand-in model's answers or a budget of tokens for the owner's provider,
//! files to place first, and checks. It runs on a
//! throwaway individual in the cage exactly as a replay does
//! ([`crate::replay::run`]); its checks are pure functions over what the
//! kernel observed ([`checks`]); the gate's decision is [`decide`].
//!
//! Invariants: no body's cage holds `evals/` (the generation's plan never
//! grants it, tracked or not), and no result passes through a body: the
//! kernel reads the throwaway journal and workspace after the body stopped
//! and journals each result itself as `eval.result`. A result is kept by
//! (body tree, evaluation hash) in `.teneral/evals/` ([`memo`]), so the
//! running generation's results are reused rather than run again; a result
//! that decided nothing is never kept.

pub mod checks;
pub mod decide;
pub mod draft;
pub mod format;
pub mod memo;
pub mod now;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::replay::run::{Ground, Workspace};
use crate::replay::stimuli::{Kind, Stimulus as ReplayStimulus};
use checks::Outcome;
use format::{Evaluation, Stimulus};
use teneral_core::commit::Commit;

pub use format::{LoadError, EVALS_DIR};

/// Why the evaluations cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalsError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(
        "git tracks {EVALS_DIR}/ in {}, so every clone of the individual (the agent's workspace \
         among them) would hold the evaluations; untrack them with \
         `git rm -r --cached {EVALS_DIR}`, add /{EVALS_DIR}/ to .gitignore and commit",
        home.display()
    )]
    Tracked { home: PathBuf },
}

/// Every evaluation of the individual at `home` ([`format::load_all`]),
/// refused whole when git tracks `evals/` at HEAD.
pub fn load_all(home: &Path) -> Result<Vec<Evaluation>, EvalsError> {
    let evaluations = format::load_all(home)?;
    let tracked = git2::Repository::open(home).ok().is_some_and(|repo| {
        let tree = repo.head().and_then(|head| head.peel_to_tree());
        tree.is_ok_and(|tree| tree.get_name(EVALS_DIR).is_some())
    });
    if tracked {
        return Err(EvalsError::Tracked { home: home.to_owned() });
    }
    Ok(evaluations)
}

pub use teneral_core::evals::RESULTS_PATH;

/// What a body may know of its own generation's results: each
/// evaluation's name, result and, when it failed, the failed check's words
/// and what was seen; never the evaluation files. Taken from the kept
/// results of the generation's body tree, for the evaluations as they are
/// now; one with no kept result is not listed.
pub fn own_results(home: &Path, commit: &Commit) -> Value {
    let evaluations = load_all(home).unwrap_or_default();
    let tree = git2::Repository::open(home).ok().and_then(|git| {
        let oid = crate::repo::commit_id(&git, home, commit.as_str()).ok()?;
        crate::repo::tree_ids(&git, home, oid).ok().map(|(_, body)| body)
    });
    let memo = memo::Memo::at(home);
    let results: Vec<Value> = evaluations
        .iter()
        .filter_map(|evaluation| {
            let kept = memo.get(tree.as_deref()?, &evaluation.hash)?;
            let mut one = json!({"evaluation": evaluation.name, "result": kept.outcome.word()});
            if let (Some(check), Outcome::Failed { said, .. }) =
                (kept.failed_check(), &kept.outcome)
            {
                one["failed_check"] = json!(check);
                one["said"] = json!(said);
            }
            Some(one)
        })
        .collect();
    json!({"generation": commit, "evaluations": results})
}

/// Writes [`RESULTS_PATH`] for the generation `commit` about to start; a
/// failure is logged and the body starts anyway.
pub fn keep_own_results(home: &Path, commit: &Commit) {
    let text = own_results(home, commit).to_string();
    if let Err(e) = teneral_core::fsutil::write_atomic(&home.join(RESULTS_PATH), text.as_bytes()) {
        teneral_core::log::warn(format!("cannot write {RESULTS_PATH} for the body: {e}"));
    }
}

/// `TENERAL_EVALS`, a setting like the others.
pub use crate::settings::EvalsMode as Mode;

/// One evaluation's result on one body.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub hash: String,
    pub outcome: Outcome,
    /// Each check's words and, when it failed, what was seen.
    pub checks: Vec<(String, Option<String>)>,
    pub tokens: u64,
    pub seconds: f64,
    pub reply_seconds: Option<f64>,
    /// The budget of tokens, when the owner's provider answered; `tokens`
    /// is then the kernel's count of what the provider reported.
    pub budget: Option<u64>,
}

impl Record {
    /// The words of the first failed check, with what was seen.
    pub fn failed_check(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Failed { check, .. } => Some(
                self.checks
                    .get(*check)
                    .map(|(words, _)| words.clone())
                    .unwrap_or_else(|| "the body's turn".to_owned()),
            ),
            Outcome::Passed | Outcome::Undecided(_) => None,
        }
    }

    /// The fields of its `eval.result` event; `generation` is the commit
    /// run, `role` what it was to the gate (`candidate`, `running`, `run`).
    pub fn fields(&self, generation: &Commit, role: &str, reused: bool) -> Value {
        let round = |s: f64| (s * 100.0).round() / 100.0;
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|(check, failed)| match failed {
                None => json!({"check": check, "passed": true}),
                Some(said) => json!({"check": check, "passed": false, "said": said}),
            })
            .collect();
        let mut fields = json!({
            "evaluation": self.name,
            "hash": self.hash,
            "generation": generation,
            "role": role,
            "result": self.outcome.word(),
            "checks": checks,
            "tokens": self.tokens,
            "seconds": round(self.seconds),
            "reused": reused,
        });
        if let Some(r) = self.reply_seconds {
            fields["reply_seconds"] = json!(round(r));
        }
        if let Some(budget) = self.budget {
            fields["budget"] = json!(budget);
        }
        match &self.outcome {
            Outcome::Failed { said, .. } => {
                fields["failed_check"] = json!(self.failed_check());
                fields["said"] = json!(said);
            }
            Outcome::Undecided(why) => fields["why"] = json!(why),
            Outcome::Passed => {}
        }
        fields
    }
}

/// Runs `evaluation` on `binary`, the body of `commit`, in the throwaway
/// individual `place` under replay's directory.
pub async fn run_one(
    ground: &Ground<'_>,
    commit: &Commit,
    binary: &Path,
    evaluation: &Evaluation,
    place: &str,
) -> Record {
    let kind = match &evaluation.stimulus {
        Stimulus::Line(text) => Kind::Line(text.clone()),
        Stimulus::Envelope(envelope) => Kind::Envelope(envelope.clone()),
    };
    let stimulus = ReplayStimulus { seq: 0, kind, script: Vec::new() };
    let look: Vec<PathBuf> = checks::files_named(&evaluation.checks);
    let commands = checks::commands_named(&evaluation.checks);
    let workspace = Workspace {
        files: &evaluation.files,
        script: evaluation.script.as_deref(),
        look: &look,
        commands: &commands,
        budget: evaluation.budget,
    };
    let (run, left) = ground.run_in(commit, binary, &stimulus, place, &workspace).await;
    // The owner's provider is counted by the kernel's proxy, never from the
    // usage the body journals; the stand-in's from the throwaway journal.
    let spent = left.spent.clone();
    let tokens = match &spent {
        Some(spent) => spent.tokens,
        None => checks::tokens_of(&left.events, 0),
    };
    let observed = checks::observed(&run, tokens, left);
    let outcome = match spent.and_then(|s| s.stopped) {
        Some(why) => Outcome::Undecided(why),
        None => checks::judge(&evaluation.checks, &run.ending, &observed),
    };
    let each = match outcome {
        Outcome::Undecided(_) => vec![],
        _ => evaluation
            .checks
            .iter()
            .map(|c| (checks::describe(c), checks::check(c, &observed).err()))
            .collect(),
    };
    Record {
        name: evaluation.name.clone(),
        hash: evaluation.hash.clone(),
        outcome,
        checks: each,
        tokens,
        seconds: run.run_seconds,
        reply_seconds: run.reply_seconds,
        budget: evaluation.budget,
    }
}
