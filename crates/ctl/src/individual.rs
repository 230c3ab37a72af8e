//! Whether a directory is an individual's, checked before a command acts on
//! it, so that `talk`, `status` and `back` pointed at a wrong path refuse
//! instead of creating files there.
//!
//! Invariant: a directory is an individual's when it holds the kernel's
//! `.teneral/` directory or a journal (`memory/journal.jsonl`); nothing is
//! created or changed by asking.

use std::path::{Path, PathBuf};

/// The refusal.
#[derive(Debug, thiserror::Error)]
pub enum NotAnIndividual {
    #[error("{0} does not exist; give the individual's directory with --dir (or -d)")]
    Missing(PathBuf),
    #[error(
        "{0} is not a teneral individual (it has neither .teneral/ nor memory/journal.jsonl); \
         give the individual's directory with --dir (or -d), or start one there with teneral run"
    )]
    Not(PathBuf),
}

/// Checks that `home` is an individual's directory.
pub fn check(home: &Path) -> Result<(), NotAnIndividual> {
    let shown = home.canonicalize().unwrap_or_else(|_| home.to_owned());
    if !home.is_dir() {
        return Err(NotAnIndividual::Missing(shown));
    }
    let journal = home.join(crate::journal::JOURNAL_PATH);
    if home.join(".teneral").is_dir() || journal.is_file() {
        Ok(())
    } else {
        Err(NotAnIndividual::Not(shown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_counts_as_an_individual() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let home = dir.path();
        assert!(matches!(check(&home.join("nope")), Err(NotAnIndividual::Missing(_))));
        assert!(matches!(check(home), Err(NotAnIndividual::Not(_))));
        assert!(!home.join(".teneral").exists(), "asking creates nothing");
        std::fs::create_dir_all(home.join("memory")).expect("memory/");
        std::fs::write(home.join("memory/journal.jsonl"), "").expect("a journal");
        assert!(check(home).is_ok());
        let other = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir(other.path().join(".teneral")).expect(".teneral/");
        assert!(check(other.path()).is_ok());
    }
}
