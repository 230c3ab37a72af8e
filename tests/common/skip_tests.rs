//! The skip in a real test binary: a test of this binary that skips is one
//! line on stderr and in the log, and under `TENERAL_REQUIRE_ALL=1` it fails
//! (`teneral_testkit::skip`, whose own tests cover the rest).

use std::process::Command;

use super::TestResult;
use teneral_testkit::skip::{REQUIRE_ALL, SKIP_LOG};
use teneral_testkit::{Within, SLOW};

/// A test that skips at once outside `scripts/with-systemd`.
const SKIPPING: &str = "systemd::runner::a_check_past_its_runtime_limit_is_stopped_as_over_time";

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
    run.output_within(SLOW)
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
