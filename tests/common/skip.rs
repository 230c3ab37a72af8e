//! The one way a test skips. A test that cannot run here (no root, no user
//! manager, no cgroup hierarchy, a Linux without what the cage needs, or a
//! system test outside `scripts/test`) calls [`skip`] and returns: one line
//! `SKIPPED <test>: <reason>` goes to stderr and, when `TENERAL_SKIP_LOG`
//! names a file, is appended to it (libtest keeps a passing test's stderr
//! to itself; `scripts/test` counts the file's lines). Under
//! `TENERAL_REQUIRE_ALL=1`, set where the machine has every tier, the skip
//! fails the test instead.
//!
//! The kernel's integration tests and the client's (`crates/ctl/tests`)
//! both include this file.
#![allow(dead_code, clippy::panic)]

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
