//! `.teneral/state.json`: what the kernel must know across its own restarts.
//! Written atomically (fsutil) and only by the kernel.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::commit::Commit;
use crate::fsutil::write_atomic;

pub const STATE_PATH: &str = ".teneral/state.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The commit of the current generation.
    pub generation: Option<Commit>,
    /// The generation before it, the one a failure goes back to.
    #[serde(default)]
    pub previous: Option<Commit>,
    /// The body process of the running generation, so a kernel that was
    /// killed can have it stopped by the next one.
    #[serde(default)]
    pub body: Option<BodyProcess>,
    /// Why the kernel last stopped by itself, if it did.
    #[serde(default)]
    pub stopped: Option<Stopped>,
    /// A mutation the gate was judging; still set at a start means the kernel
    /// stopped before deciding, and the agent must be told so.
    #[serde(default)]
    pub pending: Option<Commit>,
    /// The commit refused last and how many times in a row.
    #[serde(default)]
    pub refused: Option<Refused>,
    /// The generation on trial (promoted, no reply yet), with its deadline.
    #[serde(default)]
    pub trial: Option<Trial>,
}

/// A promoted generation's trial, kept across the kernel's restarts: it
/// ends with the generation's first reply, or fails at its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub commit: Commit,
    /// When its first reply is due (milliseconds since the Unix epoch, wall
    /// clock); none until it was first ready.
    #[serde(default)]
    pub reply_by: Option<u64>,
}

/// Now, in milliseconds since the Unix epoch.
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refused {
    pub commit: Commit,
    pub times: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BodyProcess {
    pub pid: u32,
    /// Start time in clock ticks (`/proc/<pid>/stat`), to tell a reused pid.
    pub start_time: u64,
    /// The transient unit it runs in, under systemd.
    #[serde(default)]
    pub unit: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub reason: String,
    pub status: i32,
    pub at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "{path} is not valid state ({source}); move it aside and start again to begin from HEAD"
    )]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

impl State {
    /// Reads the state of the individual at `home`; none yet is the default.
    pub fn load(home: &Path) -> Result<State, StateError> {
        let path = home.join(STATE_PATH);
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| StateError::Parse { path, source })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(source) => Err(StateError::Read { path, source }),
        }
    }

    pub fn save(&self, home: &Path) -> Result<(), StateError> {
        let path = home.join(STATE_PATH);
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| StateError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes).map_err(|source| StateError::Write { path, source })?;
        crate::crash::point("state.saved");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(digit: &str) -> Commit {
        Commit::parse(&digit.repeat(40)).expect("forty hex digits are a commit")
    }

    #[test]
    fn round_trip_and_default() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        assert_eq!(State::load(dir.path()).ok(), Some(State::default()));
        std::fs::create_dir_all(dir.path().join(".teneral")).unwrap_or_default();
        let s = State {
            generation: Some(c("a")),
            previous: None,
            body: Some(BodyProcess { pid: 7, start_time: 9, unit: None }),
            stopped: None,
            pending: Some(c("b")),
            refused: Some(Refused { commit: c("c"), times: 2 }),
            trial: Some(Trial { commit: c("a"), reply_by: Some(1) }),
        };
        s.save(dir.path()).expect("the state saves into an existing .teneral");
        assert_eq!(State::load(dir.path()).ok(), Some(s));
    }

    #[test]
    fn damaged_state_says_what_to_do() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        std::fs::create_dir_all(dir.path().join(".teneral")).unwrap_or_default();
        std::fs::write(dir.path().join(STATE_PATH), "{").unwrap_or_default();
        let err = State::load(dir.path()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("move it aside"), "{err}");
    }

    #[test]
    fn a_state_naming_something_that_is_not_a_commit_is_damaged() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        std::fs::create_dir_all(dir.path().join(".teneral")).expect("mkdir .teneral");
        std::fs::write(dir.path().join(STATE_PATH), r#"{"generation": "../../etc"}"#)
            .expect("write the state");
        let err = State::load(dir.path()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("not a full commit id") && err.contains("move it aside"), "{err}");
    }
}
