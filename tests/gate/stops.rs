//! A kernel stopped while it judges, and a species it cannot fetch: nothing
//! decided, nothing counted, no check left running.

use super::*;

#[test]
fn a_kernel_stopped_during_a_check_says_nothing_was_decided_and_leaves_no_check() -> TestResult {
    let (ind, mut kernel, _) = started(&[])?;
    let slow = candidate(&ind, |w| body_edit(w, MODE_TEST, &format!("{MODE_TEST}{SLEEP}")))?;
    teneral_core::owner::write_line(ind.path(), &slow)?;
    ind.wait_for("the body's tests under way", LONG, |e| {
        e["type"] == "mutation.check" && e["check"] == "lint-body" && e["result"] != "failed"
    })?;
    std::thread::sleep(Duration::from_secs(2));
    kernel.signal(15);
    assert_eq!(kernel.wait(Duration::from_secs(10))?, Some(0));
    let leftover = processes_naming(&ind.path().join(".teneral/gate").to_string_lossy());
    assert!(leftover.is_empty(), "no check outlives the kernel: {leftover:?}");
    // Answered before the kernel ended, once; the next start adds nothing.
    assert!(ind.events("mutation.accepted").is_empty());
    let answers = ind.events("mutation.rejected");
    assert_eq!(answers.len(), 1, "{answers:?}");
    let answer = answers[0].clone();
    let _next = ind.start()?;
    ind.wait_for("the next start", SHORT, |e| {
        e["type"] == "kernel.started" && e["seq"].as_u64() > answer["seq"].as_u64()
    })?;
    assert_eq!(ind.events("mutation.rejected").len(), 1, "answered again at the next start");
    assert_eq!(answer["candidate"], slow.as_str());
    assert_eq!(answer["undecided"], true);
    assert!(
        answer["output"].as_str().unwrap_or_default().contains("nothing was decided"),
        "{answer}"
    );
    Ok(())
}

/// A kernel edit from a species that cannot be fetched gets no verdict:
/// the answer says nothing was decided, and asking three times does not
/// stop the kernel (only counted refusals do).
#[test]
fn a_species_that_cannot_be_fetched_decides_nothing_and_counts_nothing() -> TestResult {
    let (ind, _kernel, base) = started(&[])?;
    // An origin no one answers at: the species is origin/main, fetched on
    // every judgement of a change outside body/.
    let mut git = std::process::Command::new("git");
    git.args(["remote", "add", "origin", "http://127.0.0.1:9/species.git"]).current_dir(ind.path());
    succeed_within(&mut git, QUICK, "naming an origin no one answers at")?;
    let kernel_edit = candidate(&ind, |w| std::fs::write(w.join("BIRTH.md"), "a new letter\n"))?;
    let mut after = 0;
    for round in 1..=3 {
        teneral_core::owner::write_line(ind.path(), &kernel_edit)?;
        let answer = ind.wait_for("the answer", LONG, |e| {
            e["type"] == "mutation.rejected"
                && e["candidate"] == kernel_edit.as_str()
                && e["seq"].as_u64() > Some(after)
        })?;
        assert_eq!(answer["undecided"], true, "round {round}: {answer}");
        assert_eq!(answer["check"], "undecided", "round {round}: {answer}");
        let out = answer["output"].as_str().unwrap_or_default();
        assert!(out.contains("could not be fetched"), "round {round}: {out}");
        after = answer["seq"].as_u64().unwrap_or_default();
        ind.wait_for("the same generation again", LONG, |e| {
            e["type"] == "generation.ready"
                && e["commit"] == base.as_str()
                && e["seq"].as_u64() > Some(after)
        })?;
    }
    assert!(!ind.kernel_log().contains("times in a row"), "{}", ind.kernel_log());
    Ok(())
}

/// A kernel asked to stop while it judges a mutation answers the request
/// before it ends ("nothing decided"): a clean stop leaves no request open,
/// and the next start answers nothing twice.
#[test]
fn a_stop_during_the_gate_answers_the_request_once() -> TestResult {
    let (ind, mut kernel, _) = started(&[])?;
    let v2 = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"s: \";")
    })?;
    teneral_core::owner::write_line(ind.path(), &v2)?;
    ind.wait_for("the gate under way", LONG, |e| {
        e["type"] == "mutation.check" && e["candidate"] == v2.as_str() && e["check"] == "paths"
    })?;
    kernel.signal(15);
    kernel.wait(LONG)?;
    let answers = |ind: &Individual| {
        ind.events("mutation.rejected")
            .into_iter()
            .chain(ind.events("mutation.accepted"))
            .filter(|e| e["candidate"] == v2.as_str() || e["to"] == v2.as_str())
            .collect::<Vec<_>>()
    };
    let first = answers(&ind);
    assert_eq!(first.len(), 1, "{first:?}\n{}", ind.kernel_log());
    assert_eq!(first[0]["undecided"], true, "{:?}", first[0]);
    let _again = ind.start()?;
    ind.wait_for("the next start", LONG, |e| {
        e["type"] == "kernel.started" && e["seq"].as_u64() > first[0]["seq"].as_u64()
    })?;
    ind.wait_for("its generation ready", LONG, |e| {
        e["type"] == "generation.ready" && e["seq"].as_u64() > first[0]["seq"].as_u64()
    })?;
    assert_eq!(answers(&ind).len(), 1, "answered again at the next start");
    Ok(())
}
