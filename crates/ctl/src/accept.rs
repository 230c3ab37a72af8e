//! `teneralctl accept [COMMIT]` (and `/accept` in talk): the owner accepts
//! a species commit, and with it every commit of the species before it.
//!
//! The acceptance travels as a file in `.teneral/owner/` whose name starts
//! with a dot (no body takes it) and ends in `.accept`: the commit on its
//! first line, the way it came (`ctl` or `talk`) on its second. It appears
//! under that name only whole (written under a temporary name ending in
//! `.tmp`, synced, renamed, the directory synced), named like an owner line
//! so that names sort by time. The kernel takes it in before it next judges
//! a mutation; no kernel need be running.
//!
//! Without a commit, the one the gate last asked about is accepted (the
//! `asked` field of `.teneral/species.json`). A commit may be named by 7 or
//! more of its hex digits when the individual's repository has it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::commit::Commit;
use crate::fsutil::sync_dir;
use crate::owner::{self, Kind, OWNER_DIR};

/// The kernel's record of acceptances; read here for the commit it asked about.
pub const SPECIES_FILE: &str = ".teneral/species.json";

/// How an acceptance file's name ends.
pub const ACCEPT_EXTENSION: &str = ".accept";

/// How an acceptance came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Ctl,
    Talk,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Ctl => "ctl",
            Via::Talk => "talk",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    #[error("no species commit was asked about yet ({SPECIES_FILE} names none); name the one to accept: teneralctl accept <commit>")]
    NothingAsked,
    #[error("cannot read {path}: {source}")]
    Record { path: PathBuf, source: io::Error },
    #[error("{0:?} is not a commit: give 7 or more of its hex digits, or all 40")]
    NotHex(String),
    #[error(
        "{text:?} names no single commit of the repository at {dir} ({why}); give its full id"
    )]
    Unknown { text: String, dir: PathBuf, why: String },
    #[error("cannot write the acceptance to {dir}: {source}; the directory must be the individual's, writable by you")]
    Write { dir: PathBuf, source: io::Error },
}

/// The commit `text` names: a full id as it is, a shorter one resolved in
/// the repository at `home`.
pub fn resolve(home: &Path, text: &str) -> Result<Commit, AcceptError> {
    let text = text.trim();
    if text.len() < 7 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AcceptError::NotHex(text.to_owned()));
    }
    if let Ok(full) = Commit::parse(text) {
        return Ok(full);
    }
    let unknown =
        |why: String| AcceptError::Unknown { text: text.to_owned(), dir: home.to_owned(), why };
    let repo = git2::Repository::open(home).map_err(|e| unknown(e.message().to_owned()))?;
    let object = repo.revparse_single(text).map_err(|e| unknown(e.message().to_owned()))?;
    let commit = object.peel_to_commit().map_err(|e| unknown(e.message().to_owned()))?;
    Commit::parse(&commit.id().to_string()).map_err(|e| unknown(e.to_string()))
}

/// The commit the gate last asked the owner to accept.
pub fn asked(home: &Path) -> Result<Commit, AcceptError> {
    let path = home.join(SPECIES_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(AcceptError::NothingAsked),
        Err(source) => return Err(AcceptError::Record { path, source }),
    };
    let record: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| AcceptError::Record { path, source: io::Error::other(e) })?;
    record["asked"].as_str().and_then(|a| Commit::parse(a).ok()).ok_or(AcceptError::NothingAsked)
}

/// The name of a new acceptance file: an owner line's name, with a dot
/// before it and `.accept` for its ending.
pub fn file_name(unix_nanos: u128, pid: u32, random: u32) -> String {
    let line = owner::file_name(unix_nanos, pid, random, Kind::Line);
    let stem = line.strip_suffix(Kind::Line.extension()).unwrap_or(&line);
    format!(".{stem}{ACCEPT_EXTENSION}")
}

/// Accepts `commit` (or, with none, the one asked about) for the individual
/// at `home`: writes the acceptance file. Returns the commit accepted.
pub fn accept(home: &Path, commit: Option<&str>, via: Via) -> Result<Commit, AcceptError> {
    let commit = match commit {
        Some(text) => resolve(home, text)?,
        None => asked(home)?,
    };
    let dir = home.join(OWNER_DIR);
    let failed = |source| AcceptError::Write { dir: dir.clone(), source };
    fs::create_dir_all(&dir).map_err(failed)?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let random = getrandom::u32().map_err(|e| failed(io::Error::other(e.to_string())))?;
    let name = file_name(nanos, std::process::id(), random);
    let tmp = dir.join(owner::temp_name(&name));
    let result = (|| {
        let mut file = File::create_new(&tmp)?;
        file.write_all(format!("{commit}\n{}\n", via.as_str()).as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, dir.join(&name))?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(failed)?;
    Ok(commit)
}

/// What `teneralctl accept` prints once the file is written.
pub fn said(commit: &Commit) -> String {
    format!(
        "accepted species commit {} and every species commit before it; the kernel takes this in \
         before it next judges a mutation: tell the agent to ask for its mutation again",
        commit.short()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acceptance_is_a_dot_file_named_like_a_line() {
        let name = file_name(1_700_000_000_000_000_000, 42, 0xab);
        assert_eq!(name, ".01700000000000000000-42-000000ab.accept");
        assert_eq!(Kind::of(&name), None, "no body or line reader takes it");
        assert!(owner::temp_name(&name).ends_with(".tmp"));
    }

    #[test]
    fn accept_writes_the_file_and_resolves_what_was_asked() {
        let home = tempfile::tempdir().expect("a temp dir");
        assert!(matches!(accept(home.path(), None, Via::Ctl), Err(AcceptError::NothingAsked)));
        assert!(matches!(accept(home.path(), Some("xyz"), Via::Ctl), Err(AcceptError::NotHex(_))));
        let full = "b".repeat(40);
        fs::create_dir_all(home.path().join(".teneral")).expect("mkdir");
        fs::write(home.path().join(SPECIES_FILE), format!("{{\"asked\": \"{full}\"}}"))
            .expect("write the record");
        let got = accept(home.path(), None, Via::Talk).expect("accepts what was asked");
        assert_eq!(got.as_str(), full);
        let dir = home.path().join(OWNER_DIR);
        let names: Vec<String> = fs::read_dir(&dir)
            .expect("the owner dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with('.') && names[0].ends_with(".accept"), "{names:?}");
        let text = fs::read_to_string(dir.join(&names[0])).expect("read it");
        assert_eq!(text, format!("{full}\ntalk\n"));
    }
}
