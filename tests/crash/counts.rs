//! The lifecycle's counts outlive the kernel: a kill between a body's
//! crashes neither resets the row of crashes nor the restarts.

use super::{die_at, LONG, SHORT};
use crate::common::*;

/// A body that crashes at every start, with no generation to go back to:
/// the third crash in a row stops the kernel, however the three are split
/// between a killed kernel and the next.
#[test]
fn a_kill_between_crashes_does_not_reset_the_row() -> TestResult {
    let ind = Individual::with_mode("crash", "", &[])?;
    die_at(&ind, "exited.journaled", || Ok(()))?;
    let first = ind.events("generation.exited");
    assert_eq!(first.len(), 1, "killed at the first exit: {first:?}");
    assert_eq!(first[0]["crashes_in_row"], 1, "{}", first[0]);

    let mut kernel = ind.start()?;
    let started = ind.wait_for("the second start", SHORT, |e| {
        e["type"] == "kernel.started" && e["seq"].as_u64() > first[0]["seq"].as_u64()
    })?;
    assert_eq!(
        (started["crashes_in_row"].as_u64(), started["restarts"].as_u64()),
        (Some(1), Some(1))
    );
    let status = kernel.wait(LONG)?;
    assert_eq!(status, Some(3), "the kernel stops: {}", ind.kernel_log());
    let exits = ind.events("generation.exited");
    assert_eq!(exits.len(), 3, "two more crashes make three: {exits:?}");
    let stopped = ind.events("kernel.stopped").pop().ok_or("no kernel.stopped")?;
    assert!(
        stopped["reason"].as_str().unwrap_or("").contains("three crashes in a row"),
        "{stopped}"
    );
    Ok(())
}
