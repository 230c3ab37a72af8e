//! The owner's consent to species commits: `.teneral/species.json` (what was
//! accepted, and the commit the gate last asked about) and the acceptance
//! files in `.teneral/owner/`.
//!
//! An acceptance is a file whose name starts with a dot and ends in
//! `.accept` ([`ACCEPT_EXTENSION`]), holding the commit on its first line
//! and the way it came (`ctl` or `talk`) on its second. Bodies pass over
//! names starting with a dot, and the cage keeps a body from creating any
//! file there. The kernel takes each in before it judges ([`take_in`]):
//! opened beneath the owner directory following no link, a regular file
//! only, then recorded, journaled as `species.accepted` and removed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::events::{kernel_event, SharedJournal};
use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;
use teneral_core::owner::OWNER_DIR;
use teneral_core::{fsutil, log};

/// The kernel's record of the owner's consent.
pub const SPECIES_FILE: &str = ".teneral/species.json";

/// How an acceptance file's name ends.
pub const ACCEPT_EXTENSION: &str = ".accept";

/// The most an acceptance file may hold.
const MAX_ACCEPT: u64 = 4096;

/// What `.teneral/species.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Every species commit the owner accepted, oldest first; each accepts
    /// the commits before it.
    #[serde(default)]
    pub accepted: Vec<String>,
    /// The species commit the gate last asked the owner to accept.
    #[serde(default)]
    pub asked: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    #[error("cannot read {path}: {source}; remove it to start the record of acceptances anew")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a record of acceptances ({source}); remove it to start anew")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("cannot write {path}: {source}; see that the individual's directory is writable")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot list {path}: {source}")]
    List { path: PathBuf, source: io::Error },
}

impl Record {
    /// Reads the record of `home`; none yet is an empty record.
    pub fn load(home: &Path) -> Result<Record, ConsentError> {
        let path = home.join(SPECIES_FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|source| ConsentError::Parse { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Record::default()),
            Err(source) => Err(ConsentError::Read { path, source }),
        }
    }

    /// Writes the record of `home` atomically.
    pub fn save(&self, home: &Path) -> Result<(), ConsentError> {
        let path = home.join(SPECIES_FILE);
        let write = |path: &Path| -> io::Result<()> {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            let text = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
            fsutil::write_atomic(path, &text)
        };
        write(&path).map_err(|source| ConsentError::Write { path, source })
    }
}

/// Whether `name` is an acceptance file's: a leading dot, the ending, and
/// no temporary file's.
pub fn is_accept_name(name: &str) -> bool {
    name.starts_with('.')
        && name.strip_suffix(ACCEPT_EXTENSION).is_some_and(|stem| stem.len() > 1)
        && !name.contains('/')
}

/// What an acceptance file says: the commit, and how it came.
pub fn parse_accept(text: &str) -> Result<(Commit, &'static str), String> {
    let mut lines = text.lines().map(str::trim);
    let commit = Commit::parse(lines.next().unwrap_or_default()).map_err(|e| e.to_string())?;
    let via = match lines.next().unwrap_or("ctl") {
        "talk" => "talk",
        "ctl" | "" => "ctl",
        other => return Err(format!("{other:?} is not a way an acceptance comes (ctl or talk)")),
    };
    Ok((commit, via))
}

/// One acceptance taken in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub commit: Commit,
    pub via: &'static str,
}

/// Takes in every acceptance file of `home`, oldest name first: records it
/// in `.teneral/species.json`, journals `species.accepted` {`species`,
/// `via`} stamped with `running`, and removes the file. A file that is not
/// an acceptance is logged and removed.
pub fn take_in(
    home: &Path,
    journal: &SharedJournal,
    running: &Commit,
) -> Result<Vec<Accepted>, ConsentError> {
    let dir = home.join(OWNER_DIR);
    let mut names: Vec<String> = match fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_accept_name(n))
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ConsentError::List { path: dir, source }),
    };
    names.sort();
    let mut taken = Vec::new();
    if names.is_empty() {
        return Ok(taken);
    }
    let mut record = Record::load(home)?;
    for name in names {
        let read = fsutil::read_beneath(&dir, Path::new(&name), MAX_ACCEPT);
        let parsed = match &read {
            Ok(bytes) => parse_accept(&String::from_utf8_lossy(bytes)),
            Err(e) => Err(e.to_string()),
        };
        match parsed {
            Ok((commit, via)) => {
                if !record.accepted.iter().any(|a| a == commit.as_str()) {
                    record.accepted.push(commit.to_string());
                }
                record.save(home)?;
                kernel_event(
                    journal,
                    running,
                    EventKind::SpeciesAccepted,
                    json!({"species": commit.as_str(), "via": via}),
                );
                taken.push(Accepted { commit, via });
            }
            Err(why) => {
                log::info(format!("species: {name} in {OWNER_DIR} is no acceptance: {why}"))
            }
        }
        if let Err(e) = fs::remove_file(dir.join(&name)) {
            if e.kind() != io::ErrorKind::NotFound {
                log::warn(format!("species: cannot remove {OWNER_DIR}/{name}: {e}"));
            }
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptance_names_and_contents() {
        let names = [
            (".01700000000000000000-42-000000ab.accept", true),
            ("..01700000000000000000-42-000000ab.accept.tmp", false),
            ("01700000000000000000-42-000000ab.accept", false),
            (".accept", false),
            (".x.accept", true),
            (".x.txt", false),
        ];
        for (name, want) in names {
            assert_eq!(is_accept_name(name), want, "{name}");
        }
        let full = "a".repeat(40);
        assert_eq!(parse_accept(&format!("{full}\ntalk\n")).map(|(_, v)| v), Ok("talk"));
        assert_eq!(parse_accept(&format!("{full}\n")).map(|(_, v)| v), Ok("ctl"));
        assert!(parse_accept("abc123\nctl\n").is_err());
        assert!(parse_accept(&format!("{full}\nbody\n")).is_err());
    }
}
