//! `teneralctl replay`: two real generations of a test individual on the
//! same five stimuli, side by side.
//!
//! Generation A, the fixture body, answers directly. It asks for generation
//! B, the same body in `tool-first` mode, which runs its `number` tool
//! before it asks the model (failing on a line that is no number); the gate
//! accepts it, and B answers five owner lines, the stand-in scripted with
//! answers the replay can only know from the journal. The replay runs each
//! line through both in the cage and must print exactly what each did,
//! change nothing of the individual, build no body again, and reach no
//! provider: the owner's `.env` names one, with a key, at an address the
//! test listens on.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{teneralctl, Individual, TestResult, Within, SLOW};

const LINES: [&str; 5] = ["hello", "21", "what is the time", "-4", "bye"];
const ANSWERS: [&str; 5] =
    ["Answer one.", "Answer two.", "Answer three.", "Answer four.", "Answer five."];

/// What must not change: the journal's bytes, the state's, every reference.
fn snapshot(home: &Path) -> (Vec<u8>, Vec<u8>, BTreeMap<String, String>) {
    let read = |p: &str| std::fs::read(home.join(p)).expect("the individual's file is readable");
    let repo = git2::Repository::open(home).expect("the individual is a repository");
    let refs = repo
        .references()
        .expect("references can be listed")
        .flatten()
        .map(|r| {
            let name = r.name().unwrap_or_default().to_owned();
            let target = r.target().map(|t| t.to_string()).unwrap_or_default();
            (name, target)
        })
        .collect();
    (read("memory/journal.jsonl"), read(".teneral/state.json"), refs)
}

/// Commits the fixture body of the agent's workspace in `mode`, as an agent
/// would; returns the commit.
pub(crate) fn candidate(home: &Path, mode: &str) -> Result<String, Box<dyn std::error::Error>> {
    let workspace = home.join(".teneral/candidate");
    let main = workspace.join("body/src/main.rs");
    let text = std::fs::read_to_string(&main)?;
    let was = "const MODE: &str = \"mutate\";";
    assert!(text.contains(was), "the workspace's body is in mutate mode");
    std::fs::write(&main, text.replace(was, &format!("const MODE: &str = \"{mode}\";")))?;
    let repo = git2::Repository::open(&workspace)?;
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("agent", "agent@localhost")?;
    let parent = repo.head()?.peel_to_commit()?;
    let commit = repo.commit(Some("HEAD"), &sig, &sig, "run a tool first", &tree, &[&parent])?;
    crate::common::give_to_individual(home, &workspace)?;
    Ok(commit.to_string())
}

#[test]
fn two_generations_side_by_side_on_five_stimuli() -> TestResult {
    let mut script = String::from("{\"reply\": \"Hello, owner.\"}\n");
    for answer in ANSWERS {
        script.push_str(&format!("{}\n", json!({"reply": answer})));
    }
    // Generation A answers directly (`mutate` answers any line that names no
    // commit as `normal` does, and asks for the one that does).
    let ind = Individual::with_mode("mutate", &script, &[])?;
    let home = ind.path();
    let from = ind.head()?;
    let mut kernel = ind.start()?;
    let wait = Duration::from_secs(600);
    ind.wait_for("the birth turn", wait, |e| e["type"] == "turn.ended")?;
    // Generation B, through the gate: the same body, calling a tool first.
    let to = candidate(home, "tool-first")?;
    teneral_core::owner::write_line(home, &to)?;
    let verdict = ind.wait_for("the verdict", wait, |e| {
        e["type"] == "mutation.rejected" || e["type"] == "mutation.accepted"
    })?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    // B lives the five lines; what the model answered is in the journal.
    for (i, line) in LINES.iter().enumerate() {
        teneral_core::owner::write_line(home, line)?;
        ind.wait_for("its answer", wait, |e| {
            e["type"] == "reply" && e["text"] == ANSWERS[i] && e["commit"] == to.as_str()
        })?;
    }
    kernel.signal(15);
    kernel.wait(Duration::from_secs(30))?;

    // The owner's provider, with a key: the replay must never reach it.
    let provider = TcpListener::bind("127.0.0.1:0")?;
    provider.set_nonblocking(true)?;
    let dotenv = std::fs::read_to_string(home.join(".env"))?.replace(
        "TENERAL_PROVIDER=standin\n",
        &format!(
            "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL=http://{}/v1\n\
             TENERAL_API_KEY=sk-replay-must-not-leave\nTENERAL_MODEL=some-model\n",
            provider.local_addr()?
        ),
    );
    assert!(dotenv.contains("sk-replay-must-not-leave"), "the provider is named: {dotenv}");
    std::fs::write(home.join(".env"), dotenv)?;
    let before = snapshot(home);
    // Each body, built when A started and when the gate judged B, is kept
    // and not built again.
    let kept = |commit: &str| home.join(".teneral/bin").join(commit).join("teneral-body");
    let built = |commit: &str| std::fs::metadata(kept(commit))?.modified();
    let built_before = (built(&from)?, built(&to)?);

    let out = Command::new(teneralctl())
        .args(["replay", "--dir"])
        .arg(home)
        .args(["--from", "1", "--to", "2", "--last", "5", "--json"])
        .output_within(SLOW)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "replay failed: {stderr}\n{}", ind.kernel_log());
    if std::env::var_os("TENERAL_TEST_NO_CAGE").is_none() {
        assert!(!stderr.contains("UNSAFE"), "the runs were not caged: {stderr}");
    }
    let report: Value = serde_json::from_slice(&out.stdout)?;

    assert_eq!(snapshot(home), before, "the replay changed the journal, the state or a reference");
    assert!(!home.join(".teneral/replay").exists(), "the throwaway individuals are left");
    assert!(provider.accept().is_err(), "the replay reached the owner's provider");

    assert_eq!((built(&from)?, built(&to)?), built_before, "a body was built again");

    assert_eq!(report["from"], json!(from));
    assert_eq!(report["to"], json!(to));
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5);
    for (i, row) in rows.iter().enumerate() {
        let fails = LINES[i].parse::<i64>().is_err();
        let answer = json!({"reply": ANSWERS[i]});
        let mut row = row.clone();
        for side in ["a", "b"] {
            let reply = row[side]["reply_seconds"].take();
            let whole = row[side]["run_seconds"].take();
            let (reply, whole) = (reply.as_f64().unwrap_or(-1.0), whole.as_f64().unwrap_or(-1.0));
            assert!(reply > 0.0 && whole >= reply, "{side} of {i}: {reply} s to reply, {whole} s");
        }
        row["seq"].take();
        let said = if fails { "called number (failed)" } else { "called number" };
        assert_eq!(
            row,
            json!({
                "seq": null,
                "stimulus": LINES[i],
                "scripted": true,
                "a": {"replied": true, "tool_calls": [], "failed": [], "reply_seconds": null,
                      "run_seconds": null, "ending": "turn.ended", "actions": [answer]},
                "b": {"replied": true, "tool_calls": ["number"],
                      "failed": if fails { json!(["number"]) } else { json!([]) },
                      "reply_seconds": null, "run_seconds": null, "ending": "turn.ended",
                      "actions": [{"tool": "number", "failed": fails}, answer]},
                "first_difference": format!("step 1: A replied {:?}, B {said}", ANSWERS[i]),
            }),
            "row {i}"
        );
    }
    let figures = &report["figures"];
    assert_eq!(figures["a"]["replied"], 5);
    assert_eq!(figures["a"]["tool_calls"], 0);
    assert_eq!(figures["a"]["failed"], 0);
    assert_eq!(figures["b"]["replied"], 5);
    assert_eq!(figures["b"]["tool_calls"], 5);
    assert_eq!(figures["b"]["failed"], 3);

    // The table, for the last two lines, naming B as the current one and A
    // by its short commit.
    let out = Command::new(teneralctl())
        .args(["replay", "-d"])
        .arg(home)
        .args(["--from", &from[..7], "--to", "current", "--last", "2"])
        .output_within(SLOW)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 9, "{stdout}");
    let short = |c: &str| c[..7].to_owned();
    assert_eq!(
        lines[0],
        format!(
            "replay of 2 stimuli: A = {}, B = {} (the stand-in model; nothing of the individual \
             changed)",
            short(&from),
            short(&to)
        )
    );
    assert!(
        lines[2].starts_with("  1  \"-4\"                     | yes       0 -       "),
        "{stdout}"
    );
    assert!(lines[2].contains("| yes       1 -       "), "{stdout}");
    assert_eq!(lines[3], "     step 1: A replied \"Answer four.\", B called number");
    assert!(lines[4].contains("| yes       1 number  "), "{stdout}");
    assert_eq!(lines[5], "     step 1: A replied \"Answer five.\", B called number (failed)");
    assert!(lines[6].starts_with("A: replied 2/2, 0 tool calls, 0 failed, median time to reply "));
    assert!(lines[7].starts_with("B: replied 2/2, 2 tool calls, 1 failed, median time to reply "));
    assert_eq!(snapshot(home), before, "the second replay changed the individual");
    Ok(())
}

#[test]
fn a_name_that_is_no_generation_is_refused_with_what_to_give() -> TestResult {
    let ind = Individual::new("", &[])?;
    let home = ind.path();
    std::fs::create_dir_all(home.join("memory"))?;
    std::fs::write(
        home.join("memory/journal.jsonl"),
        "{\"type\":\"owner.line\",\"ts\":\"2026-12-01T00:00:00.000Z\",\"seq\":0,\"commit\":\"\",\"text\":\"hi\",\"file\":\"a.txt\"}\n",
    )?;
    let run = |from: &str| {
        Command::new(teneralctl())
            .args(["replay", "-d"])
            .arg(home)
            .args(["--from", from, "--to", "1"])
            .output_within(SLOW)
    };
    for (from, words) in [
        ("main", "names no generation: give 7 or more hex digits"),
        ("3", "there is no generation 3"),
        ("eeeeeee", "is no generation of this individual's journal and no commit git has"),
    ] {
        let out = run(from)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{from}: {stderr}");
        assert!(stderr.contains(words), "{from}: {stderr}");
    }
    Ok(())
}
