//! The kernel's side of the hand-over: after it changed the generation (a
//! promotion, a rollback, the owner's `back`), whether the next generation
//! runs another kernel than this one, so that it ends with exit 85; and,
//! for a promotion that brings a new kernel, the trial to write first.

use std::path::Path;

use git2::{Oid, Repository};

use super::kernels::{self, Which};
use super::trial::{Trial, TrialError};

/// What the kernel does after switching to another generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handover {
    /// The next generation runs this kernel: go on.
    Stay,
    /// It runs another: write `trial` first when there is one, switch, then
    /// end with exit 85.
    Next { trial: Option<Trial> },
}

/// Whether switching from `from` to `to` hands over to another kernel.
/// `promoted`: `to` is a promoted mutation (else a rollback or a `back`).
pub fn decide(
    home: &Path,
    repo: &Repository,
    from: Oid,
    to: Oid,
    promoted: bool,
) -> Result<Handover, git2::Error> {
    let here = Which::here();
    let key = kernels::key_of(repo, to)?;
    let brings_kernel = promoted && kernels::key_of(repo, from)? != key;
    let next = if brings_kernel {
        let install = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .and_then(|c| kernels::key_of(repo, c.id()).ok());
        kernels::choose(&key, install.as_deref(), Some(&key), false)
    } else {
        kernels::which(home, repo, to)?
    };
    if next == here {
        return Ok(Handover::Stay);
    }
    let trial = brings_kernel.then(|| Trial {
        commit: crate::repo::commit_of(to),
        previous: crate::repo::commit_of(from),
        kernel: key,
        since_ms: teneral_core::state::unix_ms_now(),
    });
    Ok(Handover::Next { trial })
}

/// Why the hand-over could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("cannot tell which kernel runs the next generation: {0}")]
    Git(#[from] git2::Error),
    #[error(transparent)]
    Trial(#[from] TrialError),
}

/// Before the state names `to`: decides the hand-over and, when the switch
/// brings a new kernel, writes its trial (crash point
/// `handover.trial.saved`). Returns whether the kernel must end with exit 85
/// once the state names `to`. The kernel's switch and the start's finishing
/// of a promotion a kill cut short both come through here, so the trial
/// file always precedes the state that makes it current.
pub fn prepare(
    home: &Path,
    repo: &Repository,
    from: Oid,
    to: Oid,
    promoted: bool,
) -> Result<bool, HandoverError> {
    match decide(home, repo, from, to, promoted)? {
        Handover::Stay => Ok(false),
        Handover::Next { trial } => {
            if let Some(trial) = trial {
                trial.save(home)?;
                teneral_core::crash::point("handover.trial.saved");
            }
            Ok(true)
        }
    }
}
