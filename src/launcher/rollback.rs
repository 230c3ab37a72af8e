//! The launcher's rollback of a kernel that failed its trial: under the
//! individual's lock (the failed kernel has ended), the journal first
//! (`generation.rolledback`, `by: launcher`, with the reason and the end of
//! that kernel's stderr), then the state (the previous generation, nothing to
//! go back to, no trial), then `lineage/local`, then the trial file, each
//! step a named crash point.
//!
//! The journal is written ahead, so a rollback a kill cut short is known by
//! its event while the trial file is still there: the launcher's next turn
//! finishes it ([`finish_cut`]) before it chooses a kernel, without
//! journaling it again, so that the kernel that failed is never started
//! once more and the journal holds one `generation.rolledback`.

use std::path::Path;

use serde_json::json;

use super::trial::Trial;
use super::LaunchError;
use crate::repo;
use teneral_core::commit::short;
use teneral_core::journal::reader::{parse_line, Backwards};
use teneral_core::journal::{writer::Journal, EventKind, JOURNAL_PATH};
use teneral_core::state::State;
use teneral_core::{crash, lock, log};

/// Goes back from the trial's generation to the one before it.
pub fn roll_back(
    home: &Path,
    trial: &Trial,
    reason: &str,
    stderr: &str,
) -> Result<(), LaunchError> {
    let _lock = lock::acquire(home)?;
    let from = trial.commit.as_str();
    let to = &trial.previous;
    log::at(
        log::Priority::Warning,
        format!("launcher: rolling back from {} to {}: {reason}", short(from), short(to)),
    );
    let mut journal = Journal::open(&home.join(JOURNAL_PATH))?;
    journal.append_kernel(
        from,
        EventKind::GenerationRolledback,
        json!({"from": from, "to": to, "reason": reason, "stderr": stderr, "by": "launcher"}),
    )?;
    drop(journal);
    crash::point("launcher.rolledback.journaled");
    finish(home, trial, Left { state: true, lineage: true })
}

/// What is left of a journaled rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// The state still names the trial's generation.
    pub state: bool,
    /// `lineage/local` does not point at the previous generation yet.
    pub lineage: bool,
}

/// The pure rule: what is left of the launcher's rollback of `trial`, when
/// the journal holds it (`journaled`), the state names `generation` and
/// `lineage/local` points at `lineage`. `None`: no rollback was begun; the
/// trial is the launcher's to act on (or to pass over, when the state does
/// not name its generation).
pub fn left(
    trial: &Trial,
    journaled: bool,
    generation: Option<&str>,
    lineage: Option<&str>,
) -> Option<Left> {
    if !journaled {
        return None;
    }
    // The owner may have moved the state since (`back` with nothing
    // running): only the trial's generation is taken back.
    let state = generation == Some(trial.commit.as_str());
    let after = if state { Some(trial.previous.as_str()) } else { generation };
    let lineage = after == Some(trial.previous.as_str()) && lineage != after;
    Some(Left { state, lineage })
}

/// Finishes a rollback of the trial that a kill cut short, if the journal
/// holds one. Returns whether it did.
pub fn finish_cut(home: &Path) -> Result<bool, LaunchError> {
    let Some(trial) = Trial::load(home)? else { return Ok(false) };
    if !journaled(home, &trial) {
        return Ok(false);
    }
    let _lock = lock::acquire(home)?;
    let state = State::load(home)?;
    let git = repo::open(home)?;
    let lineage = git
        .find_branch(repo::LINEAGE_BRANCH, git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().target())
        .map(|o| o.to_string());
    let generation = state.generation.as_ref().map(|c| c.as_str());
    let Some(left) = left(&trial, true, generation, lineage.as_deref()) else { return Ok(false) };
    log::at(
        log::Priority::Notice,
        format!(
            "launcher: finishing the rollback from {} to {} that the journal holds and a kill \
             cut short",
            short(&trial.commit),
            short(&trial.previous)
        ),
    );
    finish(home, &trial, left)?;
    Ok(true)
}

/// The steps after the journal's event: the state, the lineage, the file.
fn finish(home: &Path, trial: &Trial, left: Left) -> Result<(), LaunchError> {
    let to = &trial.previous;
    if left.state {
        let mut state = State::load(home)?;
        state.generation = Some(to.clone());
        state.previous = None;
        state.trial = None;
        state.pending = None;
        state.stopped = None;
        state.save(home)?;
        crash::point("launcher.switched");
    }
    if left.lineage {
        let git = repo::open(home)?;
        // Every caller holds the individual's lock: a lock file of the
        // lineage is a killed writer's.
        repo::remove_stale_lineage_lock(&git)?;
        let oid = repo::commit_id(&git, home, to)?;
        repo::move_lineage(&git, home, oid)?;
        crash::point("launcher.lineage.moved");
    }
    Trial::remove(home)?;
    Ok(())
}

/// Whether the journal, since the last kernel's start, holds the launcher's
/// rollback of `trial`.
fn journaled(home: &Path, trial: &Trial) -> bool {
    let Ok(file) = std::fs::File::open(home.join(JOURNAL_PATH)) else { return false };
    let Ok(mut lines) = Backwards::new(file) else { return false };
    while let Ok(Some(line)) = lines.next_line() {
        let Some(event) = parse_line(&line) else { continue };
        let Some(kind) = event.known_kind() else { continue };
        match kind {
            EventKind::KernelStarted => return false,
            EventKind::GenerationRolledback => {
                if event.text("by") == "launcher"
                    && event.text("from") == trial.commit.as_str()
                    && event.text("to") == trial.previous.as_str()
                {
                    return true;
                }
            }
            EventKind::GenerationReady
            | EventKind::OwnerLine
            | EventKind::Birth
            | EventKind::Reply
            | EventKind::Reasoning
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::ModelRetry
            | EventKind::Usage
            | EventKind::Stimulus
            | EventKind::MutationRequested
            | EventKind::OfferRequested
            | EventKind::Note
            | EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::KernelStopped
            | EventKind::KernelNotice
            | EventKind::GenerationStarted
            | EventKind::GenerationExited
            | EventKind::MutationCheck
            | EventKind::MutationRejected
            | EventKind::MutationAccepted
            | EventKind::GenerationSentback
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use teneral_core::commit::Commit;

    #[test]
    fn what_is_left_of_a_rollback() {
        let c = |d: char| Commit::parse(&d.to_string().repeat(40)).expect("a commit");
        let trial = Trial { commit: c('c'), previous: c('b'), kernel: "k".into(), since_ms: 0 };
        let (cc, bb, aa) = ("c".repeat(40), "b".repeat(40), "a".repeat(40));
        let both = Left { state: true, lineage: true };
        // (journaled, state's generation, lineage) -> left
        let table = [
            (false, Some(&cc), Some(&cc), None),
            (false, Some(&bb), Some(&bb), None),
            (true, Some(&cc), Some(&cc), Some(both)),
            (true, Some(&cc), Some(&bb), Some(Left { state: true, lineage: false })),
            (true, Some(&bb), Some(&cc), Some(Left { state: false, lineage: true })),
            (true, Some(&bb), Some(&bb), Some(Left { state: false, lineage: false })),
            (true, Some(&aa), Some(&cc), Some(Left { state: false, lineage: false })),
            (true, None, None, Some(Left { state: false, lineage: false })),
        ];
        for (journaled, generation, lineage, want) in table {
            let got = left(
                &trial,
                journaled,
                generation.map(String::as_str),
                lineage.map(String::as_str),
            );
            assert_eq!(got, want, "{journaled} {generation:?} {lineage:?}");
        }
    }
}
