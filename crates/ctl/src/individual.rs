//! Whether a directory is an individual's, checked before a command acts on
//! it, so that `talk`, `status` and `back` pointed at a wrong path refuse
//! instead of creating files there.
//!
//! Invariant: a directory is an individual's when it holds the kernel's
//! `.teneral/` directory or a journal (`memory/journal.jsonl`); nothing is
//! created or changed by asking.
//!
//! Also whose `teneralctl` runs `talk`, `back` and `accept` ([`client`]):
//! once the generation runs a kernel of its own with a client beside it,
//! that one (the install's execs it), unless the owner says `--install`.

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

/// Which kernel the launcher started last (`teneral::launcher::kernels::
/// RUNNING_FILE`): its key, or `install`.
pub const RUNNING_FILE: &str = ".teneral/kernels/running";
/// Set by the install's `teneralctl` on the generation's, which it execs:
/// that one then runs itself.
pub const CHOSEN_VARIABLE: &str = "TENERAL_CTL_CHOSEN";

/// Whose `teneralctl` runs `talk`, `back` and `accept`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Client {
    /// This one: the install's (or the generation's, when it was chosen).
    Here,
    /// The generation's own, built beside its kernel.
    Generation(PathBuf),
}

/// The pure rule: `running` is what [`RUNNING_FILE`] holds, `client` the
/// generation's client for that key if it exists, `forced` the owner's
/// `--install`, `chosen` whether an install's client already chose this one.
pub fn choose(
    running: Option<&str>,
    client: Option<PathBuf>,
    forced: bool,
    chosen: bool,
) -> Client {
    let key = running.map(str::trim).filter(|k| is_key(k));
    match (key, client) {
        (Some(_), Some(path)) if !forced && !chosen => Client::Generation(path),
        _ => Client::Here,
    }
}

/// A kernel key: a git tree id, 40 (or 64) hex digits; never a path.
fn is_key(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The generation's client for the individual at `home`, when its kernel
/// has one and this process may hand over to it.
pub fn client(home: &Path, forced: bool) -> Client {
    let running = std::fs::read_to_string(home.join(RUNNING_FILE)).ok();
    let key = running.as_deref().map(str::trim).filter(|k| is_key(k));
    let path = key
        .map(|k| home.join(".teneral/kernels").join(k).join("teneralctl"))
        .filter(|p| p.is_file());
    let chosen = std::env::var_os(CHOSEN_VARIABLE).is_some();
    choose(running.as_deref(), path, forced, chosen)
}

/// Runs the generation's client in this process's place, with this
/// process's arguments. Returns only when it could not be started.
pub fn exec(path: &Path) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(path)
        .args(std::env::args_os().skip(1))
        .env(CHOSEN_VARIABLE, "1")
        .exec()
}

/// The line `teneralctl status` says about the client.
pub fn said(client: &Client) -> String {
    match client {
        Client::Here => "talk, back and accept: the install's teneralctl".into(),
        Client::Generation(path) => format!(
            "talk, back and accept: the generation's own teneralctl ({});              `teneralctl --install <command>` runs the install's",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_client_runs() {
        let key = "a".repeat(40);
        let path = || Some(PathBuf::from("/k/teneralctl"));
        let theirs = Client::Generation(PathBuf::from("/k/teneralctl"));
        // (running, client exists, --install, chosen already) -> client
        let table = [
            (Some(key.as_str()), path(), false, false, theirs.clone()),
            (Some(key.as_str()), path(), true, false, Client::Here),
            (Some(key.as_str()), path(), false, true, Client::Here),
            (Some(key.as_str()), None, false, false, Client::Here),
            (Some("install"), path(), false, false, Client::Here),
            (Some("../../bin"), path(), false, false, Client::Here),
            (None, path(), false, false, Client::Here),
        ];
        for (running, client, forced, chosen, want) in table {
            assert_eq!(
                choose(running, client, forced, chosen),
                want,
                "{running:?} {forced} {chosen}"
            );
        }
    }

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
