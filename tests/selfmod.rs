//! System test: the seed body changes itself end to end. A scripted stand-in
//! has it edit its own prompt in its workspace and ask for the mutation; the
//! gate passes it; the next generation speaks with the changed prompt.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(900);

const SCRIPT: &str = r#"{"reply": "Hello. I have read my code."}
{"expect": "change yourself", "tool_calls": [{"name": "edit_file", "arguments": {"path": ".teneral/candidate/body/src/prompt.rs", "old": "You are an agent that lives in a directory", "new": "You are an agent, second of your line, that lives in a directory"}}]}
{"tool_calls": [{"name": "mutate", "arguments": {"message": "Say in my prompt that I am the second of my line"}}]}
{"reply": "I have asked for my next generation."}
{"reply": "I am the second of my line now."}
"#;

#[test]
fn the_seed_body_rewrites_itself_and_the_next_generation_runs_the_change() -> TestResult {
    if !system_tests() {
        return Ok(());
    }
    let ind = Individual::seed(SCRIPT, &["TENERAL_STANDIN_LOG=standin.jsonl"])?;
    let base = ind.head()?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    teneral_core::owner::write_line(
        ind.path(),
        "Please change yourself: call yourself second of your line.",
    )?;

    let verdict = ind.wait_for("the verdict", LONG, |e| {
        e["type"] == "mutation.accepted" || e["type"] == "mutation.rejected"
    })?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    let next = verdict["to"].as_str().unwrap_or_default().to_owned();
    let reply = ind.wait_for("the new generation's first reply", LONG, |e| {
        e["type"] == "reply" && e["commit"] == next.as_str()
    })?;
    assert_eq!(reply["text"], "I am the second of my line now.");

    // What the model was shown: the old prompt before, the new one after.
    let log = std::fs::read_to_string(ind.path().join("standin.jsonl"))?;
    let prompts: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["body"]["messages"][0]["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        prompts.first().is_some_and(|p| p.starts_with("You are an agent that lives")),
        "{prompts:?}"
    );
    assert!(
        prompts.last().is_some_and(|p| p.starts_with("You are an agent, second of your line")),
        "{prompts:?}"
    );

    let list = std::process::Command::new(teneralctl())
        .args(["back", "--list", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains(&base[..7]) && listed.contains(&next[..7]), "{listed}");
    Ok(())
}
