//! Promoted generations that fail after the gate: rolled back one step.

use super::*;

fn rolled_back(ind: &Individual, from: &str, to: &str) -> Result<Value, String> {
    ind.wait_for("the rollback", LONG, |e| {
        e["type"] == "generation.rolledback" && e["from"] == from && e["to"] == to
    })
}

#[test]
fn a_promoted_generation_that_crashes_before_ready_is_rolled_back() -> TestResult {
    let (ind, _kernel, base) = started(&[])?;
    let bad = candidate(&ind, |w| mode(w, "crash-unless-smoke"))?;
    assert_eq!(ask(&ind, &bad)?["type"], "mutation.accepted");
    let back = rolled_back(&ind, &bad, &base)?;
    assert!(back["reason"].as_str().unwrap_or_default().contains("before it was ready"), "{back}");
    assert!(back["stderr"].as_str().unwrap_or_default().contains("crashing on purpose"), "{back}");
    ind.wait_for("the old generation running", LONG, |e| {
        e["type"] == "generation.ready"
            && e["commit"] == base.as_str()
            && e["seq"].as_u64() > back["seq"].as_u64()
    })?;
    let state: Value =
        serde_json::from_slice(&std::fs::read(ind.path().join(".teneral/state.json"))?)?;
    assert_eq!(state["generation"], base.as_str());
    assert_eq!(state["previous"], Value::Null, "one step back, not a history");
    Ok(())
}

#[test]
fn a_promoted_generation_silent_past_its_window_is_rolled_back() -> TestResult {
    let (ind, _kernel, base) = started(&["TENERAL_TEST_REPLY_SECONDS=3"])?;
    let silent = candidate(&ind, |w| mode(w, "silent-unless-smoke"))?;
    assert_eq!(ask(&ind, &silent)?["type"], "mutation.accepted");
    let back = rolled_back(&ind, &silent, &base)?;
    assert!(back["reason"].as_str().unwrap_or_default().contains("no reply within 3 s"), "{back}");
    Ok(())
}

#[test]
fn three_crashes_after_a_reply_roll_back() -> TestResult {
    let (ind, _kernel, base) = started(&[])?;
    let flaky = candidate(&ind, |w| mode(w, "crash-after-reply-unless-smoke"))?;
    assert_eq!(ask(&ind, &flaky)?["type"], "mutation.accepted");
    ind.wait_for("ready", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == flaky.as_str()
    })?;
    teneral_core::owner::write_line(ind.path(), "say something")?;
    let back = rolled_back(&ind, &flaky, &base)?;
    assert!(
        back["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("three crashes in a row without a reply"),
        "{back}"
    );
    let replies = ind.events("reply").iter().filter(|e| e["commit"] == flaky.as_str()).count();
    assert_eq!(replies, 1, "it answered once, so it was past its trial");
    Ok(())
}

#[test]
fn when_the_generation_gone_back_to_fails_too_the_kernel_stops() -> TestResult {
    let ind = Individual::with_mode("mutate-once", "", &[])?;
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let bad = candidate(&ind, |w| {
        body_edit(
            w,
            "const MODE: &str = \"mutate-once\";",
            "const MODE: &str = \"crash-unless-smoke\";",
        )
    })?;
    assert_eq!(ask(&ind, &bad)?["type"], "mutation.accepted");
    assert_eq!(kernel.wait(LONG)?, Some(3), "{}", ind.kernel_log());
    let reason = ind
        .events("kernel.stopped")
        .last()
        .and_then(|e| e["reason"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(reason.contains("nothing to go back to"), "{reason}");
    assert_eq!(ind.events("generation.rolledback").len(), 1);
    Ok(())
}
