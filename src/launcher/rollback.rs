//! The launcher's rollback of a kernel that failed its trial: under the
//! individual's lock (the failed kernel has ended), the journal first
//! (`generation.rolledback`, `by: launcher`, with the reason and the end of
//! that kernel's stderr), then the state (the previous generation, nothing to
//! go back to, no trial), then `lineage/local`, then the trial file. A kill
//! between the event and the state is finished by the next kernel's start,
//! as for its own rollbacks (the journal is written ahead).

use std::path::Path;

use serde_json::json;

use super::trial::Trial;
use super::LaunchError;
use crate::commit::short;
use crate::journal::{writer::Journal, JOURNAL_PATH};
use crate::state::State;
use crate::{lock, log, repo};

/// Goes back from the trial's generation to the one before it.
pub fn roll_back(
    home: &Path,
    trial: &Trial,
    reason: &str,
    stderr: &str,
) -> Result<(), LaunchError> {
    let _lock = lock::acquire(home)?;
    let mut state = State::load(home)?;
    let from = trial.commit.as_str();
    let to = &trial.previous;
    log::at(
        log::Priority::Warning,
        format!("launcher: rolling back from {} to {}: {reason}", short(from), short(to)),
    );
    let mut journal = Journal::open(&home.join(JOURNAL_PATH))?;
    journal.append_kernel(
        from,
        "generation.rolledback",
        json!({"from": from, "to": to, "reason": reason, "stderr": stderr, "by": "launcher"}),
    )?;
    drop(journal);
    state.generation = Some(to.clone());
    state.previous = None;
    state.trial = None;
    state.pending = None;
    state.stopped = None;
    state.save(home)?;
    let git = repo::open(home)?;
    let oid = repo::commit_id(&git, home, to)?;
    repo::move_lineage(&git, home, oid)?;
    Trial::remove(home)?;
    Ok(())
}
