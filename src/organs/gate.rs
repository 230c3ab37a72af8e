//! An organ's `check`: its first word, a file of the organ, run in the
//! organ's root with the environment the caller gives, in the cage's
//! `organ` profile, through the kernel's runner with a time limit.
//!
//! Invariants: the program is a regular file inside the organ's tree (the
//! pin's word is a relative path without `..`, and the unpacker proved every
//! link of the tree stays inside); the check starts through the runner like
//! every child, and all of it is stopped when it passes its limit.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::runner::{Launch, Limits, Profile, Runner};
use crate::spawn::{Exit, Spec};

/// How a check ended, when it did not pass.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("its first word {0:?} is not a file of the organ")]
    NotAFile(String),
    #[error("it cannot be started: {0}")]
    Spawn(Box<crate::runner::RunError>),
    #[error("it ended with {exit}; its output ends with:\n{tail}")]
    Failed { exit: Exit, tail: String },
    #[error("it ran past {} s and was killed; its output ends with:\n{tail}", limit.as_secs())]
    TimedOut { limit: Duration, tail: String },
}

/// Runs `words` in `root` with `env` as unit `unit` through `runner`, within
/// `limits`, in the cage's `organ` profile (the temp dir of `env` writable).
pub async fn run_check(
    runner: &Runner,
    unit: &str,
    root: &Path,
    words: &[String],
    env: &[(String, OsString)],
    limits: Limits,
) -> Result<(), CheckError> {
    let Some((first, args)) = words.split_first() else {
        return Err(CheckError::NotAFile(String::new()));
    };
    let program = root.join(first);
    if !program.metadata().is_ok_and(|m| m.is_file()) {
        return Err(CheckError::NotAFile(first.clone()));
    }
    let mut spec = Spec::new(program, root);
    spec.args = args.iter().map(OsString::from).collect();
    spec.env = env.to_vec();
    let writable: Vec<PathBuf> =
        env.iter().filter(|(k, _)| k == "TMPDIR").map(|(_, v)| v.into()).collect();
    let launch =
        Launch::new(spec, limits).caged(Profile::Organ { root: root.to_owned(), writable });
    let (ended, run) =
        runner.run(unit, launch).await.map_err(|e| CheckError::Spawn(Box::new(e)))?;
    let tail = run.output_tail();
    match ended {
        e if e.over_time => {
            Err(CheckError::TimedOut { limit: limits.runtime_max.unwrap_or_default(), tail })
        }
        e if e.exit.success() => Ok(()),
        e => Err(CheckError::Failed { exit: e.exit, tail }),
    }
}
