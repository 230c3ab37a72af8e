//! System test: a new individual on the unscripted stand-in, through the
//! seed body, the real kernel and its gate, shown the four owner lines the
//! stand-in acts on: it reads its code, changes itself (a new generation
//! answers), breaks itself (the gate refuses, the same generation says at
//! which check), says how to go back, and changes itself once more.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(900);
const TURN: Duration = Duration::from_secs(120);

/// The seq of an event, 0 when it has none.
fn seq(event: &Value) -> u64 {
    event["seq"].as_u64().unwrap_or(0)
}

/// Writes an owner line and waits for the first reply journaled after it
/// that `pred` accepts.
fn say(
    ind: &Individual,
    line: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Result<(u64, Value), Box<dyn std::error::Error>> {
    let mark = ind.journal().last().map_or(0, seq);
    teneral_core::owner::write_line(ind.path(), line)?;
    let reply = ind
        .wait_for(&format!("the reply to {line:?}"), timeout, |e| {
            seq(e) > mark && e["type"] == "reply" && pred(e)
        })
        .map_err(|e| e.to_string())?;
    Ok((mark, reply))
}

/// The names of the tool calls journaled between two seqs.
fn calls_between(ind: &Individual, from: u64, to: u64) -> Vec<String> {
    ind.events("tool.call")
        .iter()
        .filter(|e| seq(e) > from && seq(e) < to)
        .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_unscripted_standin_reads_changes_breaks_and_explains_itself() -> TestResult {
    if !system_tests() {
        return Ok(());
    }
    let ind = Individual::seed("", &[])?;
    let base = ind.head()?;
    let _kernel = ind.start()?;

    // The birth letter's answer names the four lines.
    let hello = ind.wait_for("the birth reply", LONG, |e| e["type"] == "reply")?;
    let said = hello["text"].as_str().unwrap_or_default();
    for line in ["show me your code", "change yourself", "break yourself", "go back"] {
        assert!(said.contains(&format!("`{line}`")), "{said}");
    }
    ind.wait_for("the birth turn's end", TURN, |e| e["type"] == "turn.ended")?;

    // show me your code: the body's own tools list and read the running body.
    let (mark, shown) = say(&ind, "show me your code", TURN, |_| true)?;
    assert_eq!(calls_between(&ind, mark, seq(&shown)), ["list_files", "read_file"]);
    let said = shown["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("mutate.rs, prompt.rs, sensors.rs")
            && said.contains("The seed body of a teneral individual."),
        "{said}"
    );
    let results = ind.events("tool.result");
    let listed = results.iter().find(|e| seq(e) > mark).expect("list_files has its result");
    assert_eq!(listed["error"], false, "{listed}");
    assert!(listed["output"].as_str().unwrap_or_default().contains("src/mutate.rs"), "{listed}");

    // change yourself: read, edit, mutate; the gate runs every check; the
    // new generation answers.
    let mark = ind.journal().last().map_or(0, seq);
    teneral_core::owner::write_line(ind.path(), "change yourself")?;
    let verdict = ind.wait_for("the verdict on the change", LONG, |e| {
        seq(e) > mark && (e["type"] == "mutation.accepted" || e["type"] == "mutation.rejected")
    })?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(verdict["from"], base.as_str());
    let next = verdict["to"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        calls_between(&ind, mark, seq(&verdict)),
        ["read_file", "edit_file", "mutate"],
        "the stand-in's calls, each run by the body"
    );
    let requested = ind.events("mutation.requested");
    assert!(requested.iter().any(|e| e["candidate"] == next.as_str()), "{requested:?}");
    let checks: Vec<(String, String)> = ind
        .events("mutation.check")
        .iter()
        .filter(|e| e["candidate"] == next.as_str())
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or_default().to_owned();
            (field("check"), field("result"))
        })
        .collect();
    let names: Vec<&str> = checks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "paths",
            "typecheck-kernel",
            "format-body",
            "lint-body",
            "kernel-tests",
            "body-tests",
            "smoke"
        ]
    );
    assert!(checks.iter().all(|(_, r)| r == "passed" || r == "reused"), "{checks:?}");
    let reply = ind.wait_for("the new generation's reply", LONG, |e| {
        e["type"] == "reply" && e["commit"] == next.as_str()
    })?;
    let said = reply["text"].as_str().unwrap_or_default();
    assert!(said.starts_with(&format!("I am the new generation, {}", &next[..7])), "{said}");
    assert!(said.contains("changed yourself on your owner's word: 1."), "{said}");
    let prompt = std::fs::read_to_string(ind.path().join(".teneral/live/body/src/prompt.rs"))?;
    assert!(prompt.contains("Times you have changed yourself on your owner's word: 1."));

    // break yourself: the gate refuses it at the lints; the same generation
    // undoes it in its workspace and names the check.
    let mark = ind.journal().last().map_or(0, seq);
    teneral_core::owner::write_line(ind.path(), "break yourself")?;
    let verdict = ind.wait_for("the verdict on the break", LONG, |e| {
        seq(e) > mark && (e["type"] == "mutation.accepted" || e["type"] == "mutation.rejected")
    })?;
    assert_eq!(verdict["type"], "mutation.rejected", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(verdict["check"], "lint-body", "{verdict}");
    assert_eq!(verdict["commit"], next.as_str(), "the refusal is journaled by the running one");
    let refused = verdict["candidate"].as_str().unwrap_or_default().to_owned();
    let failed: Vec<Value> = ind
        .events("mutation.check")
        .into_iter()
        .filter(|e| e["candidate"] == refused.as_str() && e["result"] == "failed")
        .collect();
    assert!(failed.iter().any(|e| e["check"] == "lint-body"), "{failed:?}");
    let answer = ind.wait_for("the answer to the refusal", LONG, |e| {
        seq(e) > seq(&verdict) && e["type"] == "reply"
    })?;
    assert_eq!(answer["commit"], next.as_str(), "the same generation goes on");
    assert_eq!(calls_between(&ind, seq(&verdict), seq(&answer)), ["bash"]);
    let said = answer["text"].as_str().unwrap_or_default();
    assert!(
        said.contains(&format!("refused my change {} at the check `lint-body`", &refused[..7]))
            && said.contains("error")
            && said.contains("undid that commit"),
        "{said}"
    );
    ind.wait_for("the end of that turn", TURN, |e| {
        seq(e) > seq(&answer) && e["type"] == "turn.ended"
    })?;

    // go back: words only.
    let (mark, back) = say(&ind, "go back", TURN, |_| true)?;
    assert!(calls_between(&ind, mark, seq(&back)).is_empty());
    let said = back["text"].as_str().unwrap_or_default();
    assert!(said.contains("`teneralctl back`") && said.contains("--list"), "{said}");
    assert_eq!(back["commit"], next.as_str());

    // A second change passes too: it counts on from the first, in the
    // workspace the refused commit was taken out of.
    let mark = ind.journal().last().map_or(0, seq);
    teneral_core::owner::write_line(ind.path(), "change yourself")?;
    let verdict = ind.wait_for("the verdict on the second change", LONG, |e| {
        seq(e) > mark && (e["type"] == "mutation.accepted" || e["type"] == "mutation.rejected")
    })?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(verdict["from"], next.as_str());
    let third = verdict["to"].as_str().unwrap_or_default().to_owned();
    let reply = ind.wait_for("the third generation's reply", LONG, |e| {
        e["type"] == "reply" && e["commit"] == third.as_str()
    })?;
    let said = reply["text"].as_str().unwrap_or_default();
    assert!(said.contains("changed yourself on your owner's word: 2."), "{said}");
    Ok(())
}
