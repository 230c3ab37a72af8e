//! Whether an offer may go out: the owner's `TENERAL_PUBLISH` (read from
//! `.env` itself at each command, so a variable set in the agent's shell
//! changes nothing, and by the kernel's reader, `teneral_core::dotenv`, so
//! the file means the same here as to the kernel), the check's report, and
//! the owner's approval of exactly that commit
//! (`teneral_core::owner::write_approval`).
//!
//! The decision is pure ([`decide`]); reading the setting and the report
//! are thin.

use std::path::{Path, PathBuf};

use teneral_core::commit::Commit;
use teneral_core::dotenv;

use crate::OFFERS_DIR;

/// `TENERAL_PUBLISH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing goes out until the owner approves exactly that commit (the default).
    Ask,
    /// A commit that passed the check goes out when the agent publishes it.
    Auto,
    /// Nothing goes out, approved or not.
    Off,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    /// `.env` cannot be read by the kernel's rules, or its `TENERAL_PUBLISH`
    /// is not a mode (the message names the file, the line and what to
    /// write instead).
    #[error("{0}")]
    Settings(String),
    #[error("TENERAL_PUBLISH is off in .env: nothing goes out, approved or not; set it to ask to publish what you approve")]
    Off,
    #[error("{0} has no passed check: run teneralctl offer check on its branch and put right what it marks")]
    NotChecked(String),
    #[error("{0} waits for its owner's approval: read its report (teneralctl offer list), then teneralctl offer approve {0}, or /approve {0} in talk")]
    NotApproved(String),
}

/// The mode `.env` text (called `file` in messages) names, by the kernel's
/// rules; left out, the table's default (`ask`).
pub fn mode_of(text: &str, file: &str) -> Result<Mode, Refused> {
    let refused = |e: dotenv::SettingsError| Refused::Settings(e.to_string());
    let entries = dotenv::read(text, file).map_err(refused)?;
    dotenv::choice(
        &entries,
        "TENERAL_PUBLISH",
        &[("ask", Mode::Ask), ("auto", Mode::Auto), ("off", Mode::Off)],
    )
    .map_err(refused)
}

/// `TENERAL_PUBLISH` of the `.env` at `home`, read now by the kernel's rules;
/// no `.env` is the default.
pub fn mode(home: &Path) -> Result<Mode, Refused> {
    match dotenv::text_in(home).map_err(|e| Refused::Settings(e.to_string()))? {
        Some((text, file)) => mode_of(&text, &file),
        None => mode_of("", ".env"),
    }
}

/// Whether `commit` may go out now.
pub fn decide(mode: Mode, commit: &Commit, passed: bool, approved: bool) -> Result<(), Refused> {
    match (mode, passed, approved) {
        (Mode::Off, _, _) => Err(Refused::Off),
        (_, false, _) => Err(Refused::NotChecked(commit.short().to_owned())),
        (Mode::Ask, true, false) => Err(Refused::NotApproved(commit.short().to_owned())),
        (Mode::Ask, true, true) | (Mode::Auto, true, _) => Ok(()),
    }
}

/// Where the check's report on `commit` is kept.
pub fn report_path(home: &Path, commit: &Commit) -> PathBuf {
    home.join(OFFERS_DIR).join(format!("{}.json", commit.as_str()))
}

/// The kept report on `commit`, when there is one that parses.
pub fn kept_report(home: &Path, commit: &Commit) -> Option<serde_json::Value> {
    let text = std::fs::read(report_path(home, commit)).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&text).ok()?;
    (value["commit"] == commit.as_str()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        let bad = "TENERAL_PUBLISH=yes in .env line 1: not one of ask, auto, off; \
                   write TENERAL_PUBLISH=ask or auto or off, or leave the line out";
        let table = [
            ("", Ok(Mode::Ask)),
            ("TENERAL_PUBLISH=\n", Ok(Mode::Ask)),
            ("TENERAL_PUBLISH=ask\n", Ok(Mode::Ask)),
            ("TENERAL_PUBLISH=auto\n", Ok(Mode::Auto)),
            ("# TENERAL_PUBLISH=auto\nTENERAL_PUBLISH=off", Ok(Mode::Off)),
            ("TENERAL_PUBLISH=yes\n", Err(Refused::Settings(bad.into()))),
        ];
        for (text, want) in table {
            assert_eq!(mode_of(text, ".env"), want, "{text:?}");
        }
        match mode_of("TENERAL_PUBLISH= off \n", ".env") {
            Err(Refused::Settings(m)) => assert!(m.contains("spaces around the value"), "{m}"),
            other => panic!("a value with spaces around it was taken: {other:?}"),
        }
    }

    #[test]
    fn what_may_go_out() {
        let c = Commit::parse(&"c".repeat(40)).expect("a commit id");
        let short = c.short().to_owned();
        use Mode::*;
        let table = [
            (Off, true, true, Err(Refused::Off)),
            (Ask, false, true, Err(Refused::NotChecked(short.clone()))),
            (Auto, false, false, Err(Refused::NotChecked(short.clone()))),
            (Ask, true, false, Err(Refused::NotApproved(short.clone()))),
            (Ask, true, true, Ok(())),
            (Auto, true, false, Ok(())),
        ];
        for (mode, passed, approved, want) in table {
            assert_eq!(decide(mode, &c, passed, approved), want, "{mode:?} {passed} {approved}");
        }
    }

    #[test]
    fn the_setting_is_read_from_the_file_at_each_call() {
        let home = tempfile::tempdir().expect("a temporary directory");
        assert_eq!(mode(home.path()), Ok(Mode::Ask));
        std::fs::write(home.path().join(".env"), "TENERAL_PUBLISH=off\n").expect("written");
        assert_eq!(mode(home.path()), Ok(Mode::Off));
        std::fs::write(home.path().join(".env"), "TENERAL_PUBLISH=auto\n").expect("written");
        assert_eq!(mode(home.path()), Ok(Mode::Auto));
    }

    /// The kernel's rules, not a lenient reading: what the kernel refuses
    /// never quietly takes effect here.
    #[test]
    fn the_setting_is_read_by_the_kernels_rules() {
        let home = tempfile::tempdir().expect("a temporary directory");
        let cases = [
            ("TENERAL_PUBLISH=\"auto\"\n", "the value is in quotes"),
            ("export TENERAL_PUBLISH=auto\n", "not written exactly as the setting's name"),
            ("TENERAL_PUBLISH=auto\nTENERAL_PUBLISH=off\n", "set twice"),
            ("TENERAL_PUBLISH=auto # yes\n", "a comment follows the value"),
        ];
        let file = home.path().join(".env").display().to_string();
        for (text, why) in cases {
            std::fs::write(home.path().join(".env"), text).expect("written");
            let kernels = dotenv::read(text, &file).err().map(|e| e.to_string());
            match mode(home.path()) {
                Err(Refused::Settings(message)) => {
                    assert!(message.contains(why), "{text}: {message}");
                    assert_eq!(Some(message), kernels, "{text}: the kernel's message");
                }
                other => panic!("{text:?} was taken: {other:?}"),
            }
        }
    }
}
