//! Whether an offer may go out: the owner's `TENERAL_PUBLISH` (read at each
//! command from where the kernel reads its settings, `.env` and the file its
//! `TENERAL_ENV_FILE` names, such as a Kubernetes Secret's, so a variable
//! set in the agent's shell changes nothing; and by the kernel's reader,
//! `teneral_core::dotenv::Files`, so the files mean the same here as to the
//! kernel, a named file where a body writes refused alike), the check's
//! report, and
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
    /// The settings cannot be read by the kernel's rules, or `TENERAL_PUBLISH`
    /// is not a mode (the message names the file, the line and what to
    /// write instead).
    #[error("{0}")]
    Settings(String),
    #[error("TENERAL_PUBLISH is off in the owner's settings: nothing goes out, approved or not; set it to ask to publish what you approve")]
    Off,
    #[error("{0} has no passed check: run teneralctl offer check on its branch and put right what it marks")]
    NotChecked(String),
    #[error("{0} waits for its owner's approval: read its report (teneralctl offer list), then teneralctl offer approve {0}, or /approve {0} in talk")]
    NotApproved(String),
}

/// The mode `.env` text (called `file` in messages) names, by the kernel's
/// rules; left out, the table's default (`ask`).
pub fn mode_of(text: &str, file: &str) -> Result<Mode, Refused> {
    let entries = dotenv::read(text, file).map_err(refused)?;
    mode_in(&entries)
}

/// The mode settings already read name.
fn mode_in(entries: &dotenv::Entries<'_>) -> Result<Mode, Refused> {
    dotenv::choice(
        entries,
        "TENERAL_PUBLISH",
        &[("ask", Mode::Ask), ("auto", Mode::Auto), ("off", Mode::Off)],
    )
    .map_err(refused)
}

fn refused(e: dotenv::SettingsError) -> Refused {
    Refused::Settings(e.to_string())
}

/// `TENERAL_PUBLISH` of the individual at `home`, read now as the kernel
/// reads its settings: `.env` and the file its `TENERAL_ENV_FILE` names. No
/// `.env` is the default.
pub fn mode(home: &Path) -> Result<Mode, Refused> {
    let path = home.join(".env");
    let files = match dotenv::Files::load(&path) {
        Ok(files) => files,
        Err(dotenv::SettingsError::Missing { path: missing }) if missing == path => {
            return mode_of("", ".env")
        }
        Err(e) => return Err(refused(e)),
    };
    mode_in(&files.entries().map_err(refused)?)
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

    /// A `TENERAL_PUBLISH` in the file `.env`'s `TENERAL_ENV_FILE` names
    /// (a pod's Secret) is obeyed; one in a file below a directory a body
    /// writes is not, named there directly or through a link, and neither
    /// is one in a `.env` of the body's own tree.
    #[test]
    fn the_setting_is_read_where_the_kernel_reads_its_settings() {
        let home = tempfile::tempdir().expect("a temporary directory");
        let secret = tempfile::tempdir().expect("a temporary directory");
        let file = secret.path().join("settings.env");
        std::fs::write(&file, "TENERAL_PUBLISH=off\n").expect("written");
        let env = home.path().join(".env");
        std::fs::write(&env, format!("TENERAL_ENV_FILE={}\n", file.display())).expect("written");
        assert_eq!(mode(home.path()), Ok(Mode::Off));
        std::fs::write(&file, "TENERAL_PUBLISH=auto\n").expect("written");
        assert_eq!(mode(home.path()), Ok(Mode::Auto));

        std::fs::create_dir_all(home.path().join("soul")).expect("made");
        std::fs::write(home.path().join("soul/settings.env"), "TENERAL_PUBLISH=auto\n")
            .expect("written");
        std::os::unix::fs::symlink(
            home.path().join("soul/settings.env"),
            home.path().join("link.env"),
        )
        .expect("linked");
        for named in ["soul/settings.env", "./memory/../soul/settings.env", "link.env"] {
            std::fs::write(&env, format!("TENERAL_ENV_FILE={named}\n")).expect("written");
            match mode(home.path()) {
                Err(Refused::Settings(m)) => {
                    assert!(m.contains("it lies in soul/, which a body writes"), "{named}: {m}")
                }
                other => panic!("{named}: a file a body writes was read: {other:?}"),
            }
        }

        std::fs::write(&env, "").expect("written");
        std::fs::create_dir_all(home.path().join(".teneral/candidate")).expect("made");
        std::fs::write(home.path().join(".teneral/candidate/.env"), "TENERAL_PUBLISH=auto\n")
            .expect("written");
        assert_eq!(mode(home.path()), Ok(Mode::Ask));
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
