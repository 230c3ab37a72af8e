//! The trial of a generation's new kernel.
//!
//! The kernel that promotes a species mutation bringing another kernel
//! writes `.teneral/trial.json` first ([`Trial::save`], atomic), then
//! switches and exits 85. Until the new generation journals
//! `generation.ready` under the new kernel, the launcher holds that kernel on
//! trial: [`verdict`] says what follows its end. A failed trial is rolled
//! back by the launcher itself (`super::rollback`). Once ready, the file is
//! removed: the trial is over.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use teneral_core::commit::Commit;
use teneral_core::fsutil;

pub const TRIAL_FILE: &str = ".teneral/trial.json";
/// How long a kernel on trial has to get its generation ready.
pub const TRIAL_WINDOW: Duration = Duration::from_secs(5 * 60);
/// Test-only: the window in milliseconds instead.
pub const TRIAL_WINDOW_VARIABLE: &str = "TENERAL_TEST_KERNEL_TRIAL_MS";

/// A kernel on trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trial {
    /// The generation promoted, whose kernel is on trial.
    pub commit: Commit,
    /// The generation before it, to go back to.
    pub previous: Commit,
    /// The kernel key of `commit` (`super::kernels::key_of`).
    pub kernel: String,
    /// When the promoting kernel wrote it (ms since the epoch).
    pub since_ms: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {TRIAL_FILE}: {source}")]
pub struct TrialError {
    what: &'static str,
    source: std::io::Error,
}

impl Trial {
    pub fn load(home: &Path) -> Result<Option<Trial>, TrialError> {
        match std::fs::read(home.join(TRIAL_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| TrialError { what: "read", source: std::io::Error::other(e) }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(TrialError { what: "read", source }),
        }
    }

    /// Writes it whole, durably, before the promotion it announces.
    pub fn save(&self, home: &Path) -> Result<(), TrialError> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| TrialError { what: "write", source: std::io::Error::other(e) })?;
        bytes.push(b'\n');
        fsutil::write_atomic(&home.join(TRIAL_FILE), &bytes)
            .map_err(|source| TrialError { what: "write", source })
    }

    /// Ends the trial (passed, rolled back, or stale).
    pub fn remove(home: &Path) -> Result<(), TrialError> {
        match std::fs::remove_file(home.join(TRIAL_FILE)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(TrialError { what: "remove", source }),
        }
    }
}

/// The trial's window: [`TRIAL_WINDOW`], or the test-only setting.
pub fn window() -> Duration {
    std::env::var(TRIAL_WINDOW_VARIABLE)
        .ok()
        .and_then(|ms| ms.trim().parse().ok())
        .map_or(TRIAL_WINDOW, Duration::from_millis)
}

/// How a kernel on trial ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It could not be built or started (why).
    NotStarted(String),
    /// Its process ended with this exit status (or signal, in words).
    Exited { status: Option<i32>, words: String, generation_changed: bool },
    /// The window passed without `generation.ready`; it was stopped.
    NotReady(Duration),
}

/// What follows the end of a kernel on trial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// It changed the generation itself (its body failed and it went back)
    /// and asks for the next kernel: start it; this trial is over.
    Next,
    /// The launcher goes back to the previous generation, for this reason.
    RollBack(String),
    /// The launcher was asked to stop: it ends with this status; the trial
    /// stays for the next start.
    Stop(i32),
}

/// The pure rule of the trial. `asked_to_stop`: the launcher passed on a
/// SIGTERM or SIGINT.
pub fn verdict(end: &End, asked_to_stop: bool) -> After {
    match end {
        End::NotStarted(why) => After::RollBack(format!("its kernel could not be started: {why}")),
        End::NotReady(window) => After::RollBack(format!(
            "its kernel did not get the generation ready within {} s",
            window.as_secs_f32()
        )),
        End::Exited { status, words, generation_changed } => match (status, asked_to_stop) {
            (Some(s), true) if *s != super::contract::EXIT_NEXT_KERNEL => After::Stop(*s),
            (Some(85), _) if *generation_changed => After::Next,
            (Some(85), _) => After::RollBack(
                "its kernel asked for another kernel without having changed the generation".into(),
            ),
            (Some(78), _) => After::RollBack(
                "its kernel says the owner must update the install (exit 78)".into(),
            ),
            _ => After::RollBack(format!(
                "its kernel ended before the generation was ready ({words})"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(digit: char) -> Commit {
        Commit::parse(&digit.to_string().repeat(40)).expect("forty hex digits are a commit")
    }

    fn exited(status: Option<i32>, changed: bool) -> End {
        End::Exited { status, words: format!("{status:?}"), generation_changed: changed }
    }

    #[test]
    fn what_follows_a_kernel_on_trial() {
        let back = |s: &str| After::RollBack(s.to_owned());
        let table = [
            (
                End::NotStarted("no cargo".into()),
                false,
                back("its kernel could not be started: no cargo"),
            ),
            (
                End::NotReady(Duration::from_secs(2)),
                false,
                back("its kernel did not get the generation ready within 2 s"),
            ),
            (exited(Some(85), true), false, After::Next),
            (exited(Some(85), true), true, After::Next),
            (
                exited(Some(85), false),
                false,
                back("its kernel asked for another kernel without having changed the generation"),
            ),
            (exited(Some(0), false), true, After::Stop(0)),
            (
                exited(Some(0), false),
                false,
                back("its kernel ended before the generation was ready (Some(0))"),
            ),
            (
                exited(Some(1), false),
                false,
                back("its kernel ended before the generation was ready (Some(1))"),
            ),
            (
                exited(Some(3), true),
                false,
                back("its kernel ended before the generation was ready (Some(3))"),
            ),
            (
                exited(None, false),
                true,
                back("its kernel ended before the generation was ready (None)"),
            ),
            (
                exited(Some(78), false),
                false,
                back("its kernel says the owner must update the install (exit 78)"),
            ),
        ];
        for (end, stop, want) in table {
            assert_eq!(verdict(&end, stop), want, "{end:?} stop={stop}");
        }
    }

    #[test]
    fn the_file_is_written_whole_and_removed() {
        let home = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(home.path().join(".teneral")).expect(".teneral");
        assert_eq!(Trial::load(home.path()).expect("no file is no trial"), None);
        let trial = Trial { commit: c('c'), previous: c('d'), kernel: "k".into(), since_ms: 7 };
        trial.save(home.path()).expect("saved");
        assert_eq!(Trial::load(home.path()).expect("read back"), Some(trial));
        Trial::remove(home.path()).expect("removed");
        Trial::remove(home.path()).expect("removing twice is fine");
        assert_eq!(Trial::load(home.path()).expect("gone"), None);
    }
}
