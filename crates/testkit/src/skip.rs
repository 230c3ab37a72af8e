//! The one way a test skips. A test that cannot run here (no root, no user
//! manager, no cgroup hierarchy, a Linux without what the cage needs, or a
//! system test outside `scripts/test`) calls [`skip`] and returns: one line
//! `SKIPPED <test>: <reason>` goes to stderr and, when `TENERAL_SKIP_LOG`
//! names a file, is appended to it (libtest keeps a passing test's stderr
//! to itself; `scripts/test` counts the file's lines). Under
//! `TENERAL_REQUIRE_ALL=1`, set where the machine has every tier, the skip
//! fails the test instead.
//!
//! [`system_tests`] is the switch of the system tests, which skip outside
//! `scripts/test`.

use std::io::Write;
use std::path::Path;

/// Names the file each skip's line is appended to.
pub const SKIP_LOG: &str = "TENERAL_SKIP_LOG";
/// `1`: a skip fails its test.
pub const REQUIRE_ALL: &str = "TENERAL_REQUIRE_ALL";

/// The running test skips for `reason`; the caller returns right after.
/// Panics (fails the test) when `TENERAL_REQUIRE_ALL=1`.
pub fn skip(reason: &str) {
    let require_all = std::env::var_os(REQUIRE_ALL).is_some_and(|v| v == "1");
    let log = std::env::var_os(SKIP_LOG);
    skip_as(&test_name(), reason, require_all, log.as_deref().map(Path::new));
}

/// The running test's name as libtest prints it (`module::test`): libtest
/// names each test's thread so.
pub fn test_name() -> String {
    std::thread::current().name().unwrap_or("an unnamed thread").to_owned()
}

/// [`skip`] with its settings given: `test` skips for `reason`, the line
/// appended to `log`, or a panic when `require_all`.
pub fn skip_as(test: &str, reason: &str, require_all: bool, log: Option<&Path>) {
    let line = format!("SKIPPED {test}: {reason}");
    if require_all {
        panic!("{line}; {REQUIRE_ALL}=1 says this machine runs every test");
    }
    eprintln!("{line}");
    let Some(log) = log else { return };
    // One write of the whole line to a file opened with O_APPEND: lines of
    // tests running side by side (and of several test binaries) never mix.
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = appended {
        panic!("{line}, and it cannot be counted: appending to {}: {e}", log.display());
    }
}

/// Whether system tests run: `scripts/test` sets `TENERAL_SYSTEM_TESTS=1`.
/// They are left out of a gate's check (whose environment is bare) because
/// they read what a gate keeps apart (the seed body) or need what a check
/// cannot have (a user manager, tmux). Anywhere else each [`skip`]s.
pub fn system_tests() -> bool {
    let on = std::env::var_os("TENERAL_SYSTEM_TESTS").is_some();
    if !on {
        skip("a system test (set TENERAL_SYSTEM_TESTS=1, as scripts/test does)");
    }
    on
}

#[cfg(test)]
mod tests {
    use super::{skip_as, REQUIRE_ALL};

    #[test]
    fn each_skip_appends_its_one_line_to_the_log() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("skips");
        skip_as("a::first", "no user manager", false, Some(&log));
        skip_as("b::second", "needs root", false, Some(&log));
        let lines = std::fs::read_to_string(&log)?;
        assert_eq!(lines, "SKIPPED a::first: no user manager\nSKIPPED b::second: needs root\n");
        Ok(())
    }

    #[test]
    fn under_require_all_a_skip_fails_and_is_not_logged() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("skips");
        let failed =
            std::panic::catch_unwind(|| skip_as("a::first", "needs root", true, Some(&log)));
        let Err(why) = failed else { panic!("a skip under {REQUIRE_ALL}=1 passed") };
        let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(why.starts_with("SKIPPED a::first: needs root"), "{why}");
        assert!(!log.exists(), "a failed skip is counted as a failure, not as a skip");
        Ok(())
    }
}
