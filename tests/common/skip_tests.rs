//! The skip helper itself: a skip is one line on stderr and in the log, and
//! under `TENERAL_REQUIRE_ALL=1` it fails its test.

use std::process::Command;

use super::skip::{skip_as, REQUIRE_ALL, SKIP_LOG};
use super::TestResult;

/// A test that skips at once outside `scripts/with-systemd`.
const SKIPPING: &str = "systemd::runner::a_check_past_its_runtime_limit_is_stopped_as_over_time";

#[test]
fn each_skip_appends_its_one_line_to_the_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("skips");
    skip_as("a::first", "no user manager", false, Some(&log));
    skip_as("b::second", "needs root", false, Some(&log));
    let lines = std::fs::read_to_string(&log)?;
    assert_eq!(lines, "SKIPPED a::first: no user manager\nSKIPPED b::second: needs root\n");
    Ok(())
}

#[test]
fn under_require_all_a_skip_fails_and_is_not_logged() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("skips");
    let failed = std::panic::catch_unwind(|| skip_as("a::first", "needs root", true, Some(&log)));
    let Err(why) = failed else { panic!("a skip under {REQUIRE_ALL}=1 passed") };
    let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(why.starts_with("SKIPPED a::first: needs root"), "{why}");
    assert!(!log.exists(), "a failed skip is counted as a failure, not as a skip");
    Ok(())
}

/// Runs [`SKIPPING`] in a test binary of its own with the log at `log`,
/// `TENERAL_REQUIRE_ALL` set to `require_all` or unset.
fn run_skipping(
    log: &std::path::Path,
    require_all: Option<&str>,
) -> std::io::Result<std::process::Output> {
    let mut run = Command::new(std::env::current_exe()?);
    // --nocapture: the test's stderr is shown whether it passes or fails.
    run.args(["--exact", SKIPPING, "--test-threads=1", "--nocapture"]);
    run.env_remove("TENERAL_TEST_SYSTEMD").env_remove(REQUIRE_ALL).env(SKIP_LOG, log);
    if let Some(value) = require_all {
        run.env(REQUIRE_ALL, value);
    }
    run.output()
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_real_test_that_skips_names_itself_and_fails_under_require_all() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("skips");
    let line = format!("SKIPPED {SKIPPING}: no user manager for this test");

    let out = run_skipping(&log, None)?;
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "a skip passes without TENERAL_REQUIRE_ALL: {said}");
    let logged = std::fs::read_to_string(&log)?;
    assert_eq!(logged.lines().count(), 1, "{logged}");
    assert!(logged.starts_with(&line), "{logged}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&line), "the line is on stderr: {said}");

    std::fs::remove_file(&log)?;
    let out = run_skipping(&log, Some("1"))?;
    let said = text(&out);
    assert!(!out.status.success(), "a skip under {REQUIRE_ALL}=1 fails its test: {said}");
    assert!(said.contains("1 failed") && said.contains(&line), "{said}");
    assert!(!log.exists(), "nothing is counted as skipped");
    Ok(())
}
