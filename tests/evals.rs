//! The owner's evaluations: their files read strictly at start, run on
//! throwaway individuals in the cage, hidden from every body, and held
//! against each candidate by the gate.

use std::time::Duration;

use crate::common::*;

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
"#;

/// An evaluation file that cannot be used stops the start: the file and the
/// field are named, and nothing of the individual changes (no journal, no
/// state, the same commit).
#[test]
fn a_malformed_evaluation_refuses_the_start() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let head = ind.head()?;
    std::fs::create_dir_all(ind.path().join("evals"))?;
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n\n[[check]]\nreply_contains = \"hello\"\nrpely = \"x\"\n",
    )?;
    let out = std::process::Command::new(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .stdin(std::process::Stdio::null())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the evaluation evals/greets.toml cannot be used"), "{err}");
    assert!(
        err.contains("check[0]: it has 2 keys (reply_contains, rpely)"),
        "the field is named: {err}"
    );
    assert!(!ind.path().join("memory/journal.jsonl").exists(), "nothing journaled");
    assert!(!ind.path().join(".teneral/state.json").exists(), "no state written");
    assert_eq!(ind.head()?, head);
    // Mended, the same individual starts.
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n\n[[check]]\nreply_contains = \"hello\"\n",
    )?;
    let _kernel = ind.start()?;
    ind.wait_for("kernel.started", Duration::from_secs(240), |e| e["type"] == "kernel.started")?;
    Ok(())
}

/// Evaluations git tracks would be in every clone of the individual, the
/// agent's workspace among them: the start is refused, saying how to
/// untrack them.
#[test]
fn tracked_evaluations_refuse_the_start() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    std::fs::create_dir_all(ind.path().join("evals"))?;
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n\n[[check]]\nreply_contains = \"hello\"\n",
    )?;
    commit_all(ind.path(), "the owner's evaluations")?;
    let out = std::process::Command::new(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .stdin(std::process::Stdio::null())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("git tracks evals/"), "{err}");
    assert!(err.contains("git rm -r --cached evals"), "{err}");
    assert!(!ind.path().join("memory/journal.jsonl").exists(), "nothing journaled");
    Ok(())
}

/// The three evaluations of the lineage test: one the first generation
/// fails, one every generation passes, one the last candidate breaks.
const TAGGED: &str = "description = \"replies carry the tag\"\nline = \"hello\"\n\n[[step]]\nreply = \"hi\"\n\n[[check]]\nreply_contains = \"[tag]\"\n";
/// Its command shows the throwaway individual as the command sees it: the
/// run's journal there, the evaluations not.
const GREETS: &str = "line = \"hello\"\n\n[[step]]\nreply = \"hi\"\n\n[[check]]\nreply_contains = \"hi\"\n\n[[check]]\ntool_not_called = \"number\"\n\n[[check]]\ncommand = \"test -s memory/journal.jsonl && ! test -e evals\"\n";
/// A command that writes in the workspace and fails.
const WRITES: &str = "line = \"hello\"\n\n[[check]]\ncommand = \"echo x > made.txt && test -s made.txt && exit 3\"\n";
const ENDS: &str =
    "line = \"hello\"\n\n[[step]]\nreply = \"hi\"\n\n[[check]]\nreply_matches = \"*hi\"\n";

/// Asks for `commit` and waits for the answer about it.
fn ask(ind: &Individual, commit: &str) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    teneral_core::owner::write_line(ind.path(), commit)?;
    Ok(ind.wait_for("the verdict", LONG, |e| {
        (e["type"] == "mutation.rejected" || e["type"] == "mutation.accepted")
            && (e["candidate"] == commit || e["to"] == commit)
    })?)
}

/// Commits an edit of the fixture body's `main.rs` in the agent's
/// workspace, as an agent would.
fn mutation(ind: &Individual, from: &str, to: &str) -> Result<String, Box<dyn std::error::Error>> {
    let workspace = ind.path().join(".teneral/candidate");
    let main = workspace.join("body/src/main.rs");
    let text = std::fs::read_to_string(&main)?;
    assert!(text.contains(from), "{from:?} is not in the fixture body");
    std::fs::write(&main, text.replace(from, to))?;
    let commit = commit_all(&workspace, "a mutation")?;
    give_to_individual(ind.path(), &workspace)?;
    Ok(commit)
}

const LONG: Duration = Duration::from_secs(400);

/// A lineage under `TENERAL_EVALS=gate`: a candidate that passes one more
/// evaluation is promoted and journaled as better on it; the next, which
/// breaks an evaluation its parent passes, is refused with the evaluation
/// and its check named, and the parent's results are taken from the memo,
/// not run again. `teneralctl evals --json` shows exactly that history.
#[test]
fn the_gate_holds_candidates_to_the_evaluations() -> TestResult {
    let ind = Individual::with_mode("mutate", "", &["TENERAL_EVALS=gate"])?;
    let base = ind.head()?;
    let evals = ind.path().join("evals");
    std::fs::create_dir_all(&evals)?;
    for (name, text) in [("tagged", TAGGED), ("greets", GREETS), ("ends", ENDS)] {
        std::fs::write(evals.join(format!("{name}.toml")), text)?;
    }
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;

    let prefix = "const REPLY_PREFIX: &str = \"\";";
    let v2 = mutation(&ind, prefix, "const REPLY_PREFIX: &str = \"[tag] \";")?;
    let verdict = ask(&ind, &v2)?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    let step = ind
        .events("mutation.check")
        .into_iter()
        .find(|e| e["check"] == "evals" && e["candidate"] == v2.as_str())
        .ok_or("no evals step for the first candidate")?;
    assert_eq!(step["result"], "passed", "{step}");
    let better: Vec<&str> =
        step["better_on"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
    assert!(better.contains(&"passes tagged"), "{step}");
    assert!(!better.iter().any(|b| b.starts_with("passes ") && *b != "passes tagged"), "{step}");
    assert_eq!((step["ran"].as_u64(), step["reused"].as_u64()), (Some(6), Some(0)), "{step}");

    ind.wait_for("the new generation", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    // The body may read its own generation's results, as the kernel keeps them.
    let own: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ind.path().join("memory/evals.json"))?)?;
    assert_eq!(own["generation"], v2.as_str(), "{own}");
    let listed: Vec<(&str, &str)> = own["evaluations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["evaluation"].as_str().unwrap_or(""), e["result"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(listed, [("ends", "passed"), ("greets", "passed"), ("tagged", "passed")], "{own}");
    let reply =
        "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}\")}))?;";
    let broken = "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}!\")}))?;";
    let v3 = mutation(&ind, reply, broken)?;
    let verdict = ask(&ind, &v3)?;
    assert_eq!(verdict["type"], "mutation.rejected", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(verdict["check"], "evals", "{verdict}");
    let output = verdict["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("ends (reply_matches \"*hi\": the last reply was \"[tag] hi!\")"),
        "{output}"
    );
    assert!(!output.contains("tagged") && !output.contains("greets"), "{output}");
    let step = ind
        .events("mutation.check")
        .into_iter()
        .find(|e| e["check"] == "evals" && e["candidate"] == v3.as_str())
        .ok_or("no evals step for the second candidate")?;
    // The running generation's three results came from the memo.
    assert_eq!((step["ran"].as_u64(), step["reused"].as_u64()), (Some(3), Some(3)), "{step}");
    let running: Vec<serde_json::Value> = ind
        .events("eval.result")
        .into_iter()
        .filter(|e| e["generation"] == v2.as_str() && e["role"] == "running")
        .collect();
    assert_eq!(running.len(), 3);
    assert!(running.iter().all(|e| e["reused"] == true), "{running:?}");

    // The lineage as the owner sees it.
    let out = std::process::Command::new(teneralctl())
        .args(["evals", "--json", "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let generations = shown["generations"].as_array().ok_or("no generations")?;
    let rows: Vec<(String, u64, Vec<String>, Vec<String>)> = generations
        .iter()
        .map(|g| {
            let names = |k: &str| -> Vec<String> {
                g[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            (
                g["commit"].as_str().unwrap_or_default().to_owned(),
                g["passed"].as_u64().unwrap_or(99),
                names("first_passed"),
                names("regressed"),
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rows,
        vec![
            (base.clone(), 2, s(&["ends", "greets"]), s(&[])),
            (v2.clone(), 3, s(&["tagged"]), s(&[])),
            (v3.clone(), 2, s(&[]), s(&["ends"])),
        ],
        "{shown}"
    );
    assert_eq!(generations[1]["evaluations"]["tagged"]["result"], "passed", "{shown}");
    assert_eq!(generations[2]["promoted"], false, "{shown}");
    assert_eq!(generations[1]["promoted"], true, "{shown}");

    let chart = ind.path().join("evals.svg");
    let out = std::process::Command::new(teneralctl())
        .args(["evals", "--svg"])
        .arg(&chart)
        .arg("--dir")
        .arg(ind.path())
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("regressed: ends") && text.contains("first passed: tagged"), "{text}");
    let svg = std::fs::read_to_string(&chart)?;
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"), "{svg}");
    assert_eq!(svg.matches("<circle ").count(), 3, "one point per generation: {svg}");
    assert!(svg.contains(&format!(">{}</text>", &v3[..7])), "{svg}");

    // Run by hand on the refused candidate, with nothing kept: the same
    // results, run again, and nothing journaled.
    std::fs::remove_dir_all(ind.path().join(".teneral/evals"))?;
    let journaled = ind.events("eval.result").len();
    let out = std::process::Command::new(teneralctl())
        .args(["evals", "run", "--json", "--generation", &v3[..10], "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ran: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(ran["generation"], v3.as_str(), "{ran}");
    assert_eq!(ran["passed"], 2, "{ran}");
    let results = ran["results"].as_array().ok_or("no results")?;
    assert!(results.iter().all(|r| r["reused"] == false), "{ran}");
    let ends = results.iter().find(|r| r["evaluation"] == "ends").ok_or("no ends")?;
    assert_eq!(ends["said"], "the last reply was \"[tag] hi!\"", "{ran}");
    assert_eq!(ind.events("eval.result").len(), journaled);
    Ok(())
}

const SLOW: &str = "line = \"hello\"\n\n[[step]]\ndelay_ms = 30000\nreply = \"hi\"\n\n[[check]]\nreply_contains = \"hi\"\n";

/// A lineage of one mutation under `mode`, with the evaluations given;
/// the verdict on the candidate whose replies end in `!`, and its `evals`
/// step.
fn one_mutation(
    mode: &str,
    evaluations: &[(&str, &str)],
) -> Result<(Individual, serde_json::Value, serde_json::Value), Box<dyn std::error::Error>> {
    let env = [format!("TENERAL_EVALS={mode}"), "TENERAL_SMOKE_SECONDS=8".to_owned()];
    let env: Vec<&str> = env.iter().map(String::as_str).collect();
    let ind = Individual::with_mode("mutate", "", &env)?;
    let evals = ind.path().join("evals");
    std::fs::create_dir_all(&evals)?;
    for (name, text) in evaluations {
        std::fs::write(evals.join(format!("{name}.toml")), text)?;
    }
    let kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let reply =
        "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}\")}))?;";
    let broken = "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}!\")}))?;";
    let candidate = mutation(&ind, reply, broken)?;
    let verdict = ask(&ind, &candidate)?;
    let step = ind
        .events("mutation.check")
        .into_iter()
        .find(|e| e["check"] == "evals" && e["candidate"] == candidate.as_str())
        .ok_or_else(|| format!("no evals step: {verdict}\n{}", ind.kernel_log()))?;
    drop(kernel);
    Ok((ind, verdict, step))
}

/// An evaluation that runs out of time decides nothing: the candidate is
/// not refused for it, the step lists it as undecided, and the owner is
/// told; nothing of it is kept to be reused.
#[test]
fn a_timeout_decides_nothing() -> TestResult {
    let (ind, verdict, step) = one_mutation("gate", &[("slow", SLOW), ("greets", GREETS)])?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(step["result"], "passed", "{step}");
    assert_eq!(step["regressed"], serde_json::json!([]), "{step}");
    let undecided = step["undecided"].as_array().ok_or("no undecided")?;
    assert_eq!(undecided.len(), 1, "{step}");
    assert_eq!(undecided[0]["evaluation"], "slow", "{step}");
    assert!(
        undecided[0]["why"].as_str().unwrap_or_default().contains("did not end within 8 s"),
        "{step}"
    );
    let told = ind.events("kernel.notice");
    assert!(
        told.iter().any(|e| e["text"]
            .as_str()
            .unwrap_or_default()
            .contains("the evaluation slow decided nothing")),
        "{told:?}"
    );
    let results = ind.events("eval.result");
    let slow: Vec<_> = results.iter().filter(|e| e["evaluation"] == "slow").collect();
    assert_eq!(slow.len(), 2, "{results:?}");
    assert!(slow.iter().all(|e| e["result"] == "undecided"), "{slow:?}");
    let kept = std::fs::read_dir(ind.path().join(".teneral/evals"))?.count();
    assert_eq!(kept, 2, "only greets's two decided results are kept");
    Ok(())
}

/// Under `TENERAL_EVALS=report` the evaluations are run and journaled, and
/// a candidate that breaks one is promoted all the same.
#[test]
fn report_refuses_nothing() -> TestResult {
    let (ind, verdict, step) = one_mutation("report", &[("ends", ENDS), ("writes", WRITES)])?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(step["result"], "passed", "{step}");
    assert_eq!(step["regressed"][0]["evaluation"], "ends", "{step}");
    let results = ind.events("eval.result");
    let writes: Vec<_> = results.iter().filter(|e| e["evaluation"] == "writes").collect();
    assert_eq!(writes.len(), 2, "{results:?}");
    for result in writes {
        assert_eq!(result["said"], "it ended with exit status 3", "{result}");
    }
    let failed = results
        .into_iter()
        .find(|e| e["role"] == "candidate" && e["evaluation"] == "ends")
        .ok_or("no candidate result")?;
    assert_eq!(failed["result"], "failed", "{failed}");
    assert_eq!(failed["failed_check"], "reply_matches \"*hi\"", "{failed}");
    Ok(())
}

/// A past exchange drafted as an evaluation, then run by hand on the
/// generation that had it: it passes, since the stand-in answers as the
/// model did then.
#[test]
fn an_exchange_becomes_an_evaluation() -> TestResult {
    let script =
        "{\"reply\": \"Hello.\"}\n{\"expect\": \"ping\", \"reply\": \"pong from the stand-in\"}\n";
    let ind = Individual::new(script, &[])?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    teneral_core::owner::write_line(ind.path(), "ping")?;
    ind.wait_for("the answer", LONG, |e| {
        e["type"] == "reply" && e["text"] == "pong from the stand-in"
    })?;
    let line = ind.events("owner.line").pop().ok_or("no owner line")?;
    let seq = line["seq"].as_u64().ok_or("no seq")?;

    let out = std::process::Command::new(teneralctl())
        .args(["evals", "from-journal", "--last", "1", "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let file = ind.path().join(format!("evals/from-journal-{seq}.toml"));
    let text = std::fs::read_to_string(&file)?;
    assert!(text.contains("line = \"ping\""), "{text}");
    assert!(text.contains("reply_contains = \"pong from the stand-in\""), "{text}");

    let out = std::process::Command::new(teneralctl())
        .args(["evals", "run", "--json", "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ran: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(ran["passed"], 1, "{ran}");
    // Asked again, the draft is kept as the owner may have edited it.
    std::fs::write(&file, format!("{text}# edited\n"))?;
    let again = std::process::Command::new(teneralctl())
        .args(["evals", "from-journal", "--last", "1", "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(again.status.code(), Some(0));
    assert!(std::fs::read_to_string(&file)?.ends_with("# edited\n"));
    Ok(())
}

/// The owner's provider answers these, in this order (evaluations run by
/// name): a reply within the budget, a reply over it, and a 503.
const PROVIDER_SCRIPT: &str = "{\"reply\": \"answered by the provider\"}\n\
    {\"reply\": \"a second answer\"}\n\
    {\"error\": {\"status\": 503, \"message\": \"overloaded\"}}\n";

const WITHIN: &str = "model = \"provider\"\ntokens = 1000000\nline = \"hello\"\n\n\
    [[check]]\nreply_contains = \"answered by the provider\"\n";
const OVER: &str = "model = \"provider\"\ntokens = 5\nline = \"hello\"\n\n\
    [[check]]\nreply_contains = \"second\"\n";
const DOWN: &str = "model = \"provider\"\ntokens = 1000000\nline = \"hello\"\n\n\
    [[check]]\nreply_contains = \"anything\"\n";

/// Evaluations answered by the owner's provider (a stand-in posing as it,
/// taking only the owner's key) through the kernel's proxy: one within its
/// budget passes with the tokens the provider reported; one whose reported
/// usage passes its budget, and one whose provider answers 503, decide
/// nothing, and neither is kept to be reused.
#[test]
fn the_owners_provider_answers_within_a_budget() -> TestResult {
    const OWNER_KEY: &str = "sk-evals-owner-key";
    let ind = Individual::new(SCRIPT, &[])?;
    {
        let _kernel = ind.start()?;
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    }
    let provider =
        teneral_testkit::standin::Standin::start(&teneral(), PROVIDER_SCRIPT, Some(OWNER_KEY))?;
    let home = ind.path();
    let dotenv = std::fs::read_to_string(home.join(".env"))?.replace(
        "TENERAL_PROVIDER=standin\n",
        &format!(
            "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={OWNER_KEY}\n\
             TENERAL_MODEL=some-model\nTENERAL_SMOKE_SECONDS=60\n",
            provider.url
        ),
    );
    assert!(dotenv.contains(OWNER_KEY), "the provider is not named: {dotenv}");
    std::fs::write(home.join(".env"), dotenv)?;
    let evals = home.join("evals");
    std::fs::create_dir_all(&evals)?;
    for (name, text) in [("a-within", WITHIN), ("b-over", OVER), ("c-down", DOWN)] {
        std::fs::write(evals.join(format!("{name}.toml")), text)?;
    }

    let out = std::process::Command::new(teneralctl())
        .args(["evals", "run", "--json", "--dir"])
        .arg(home)
        .output_within(LONG)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ran: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let result = |name: &str| {
        ran["results"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["evaluation"] == name).cloned())
            .unwrap_or_default()
    };
    let within = result("a-within");
    assert_eq!(within["result"], "passed", "{ran}\n{stderr}");
    let tokens = within["tokens"].as_u64().unwrap_or_default();
    assert!(tokens > 5 && tokens < 1_000_000, "the provider's reported usage: {within}");
    assert_eq!(within["budget"], 1_000_000, "{within}");

    let over = result("b-over");
    assert_eq!(over["result"], "undecided", "{ran}");
    let why = over["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("budget overrun"), "{over}");
    assert!(why.contains("over the budget of 5"), "{over}");
    assert!(over["tokens"].as_u64().unwrap_or_default() > 5, "{over}");

    let down = result("c-down");
    assert_eq!(down["result"], "undecided", "{ran}");
    let why = down["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("provider failure") && why.contains("503"), "{down}");

    assert_eq!(ran["passed"], 1, "{ran}");
    let kept = std::fs::read_dir(home.join(".teneral/evals"))?.count();
    assert_eq!(kept, 1, "only the decided result is kept");
    Ok(())
}

/// Under `TENERAL_EVALS=gate`, with the owner's provider answering the
/// kernel and the evaluations alike: a budget overrun and a 503 on both
/// sides decide nothing, the candidate is promoted, and no refusal is
/// counted.
#[test]
fn an_overrun_and_a_provider_failure_refuse_nothing() -> TestResult {
    const OWNER_KEY: &str = "sk-evals-owner-key";
    // The birth, then the running generation's three evaluations, then the
    // candidate's.
    let script = format!("{{\"reply\": \"Hello.\"}}\n{PROVIDER_SCRIPT}{PROVIDER_SCRIPT}");
    let provider = teneral_testkit::standin::Standin::start(&teneral(), &script, Some(OWNER_KEY))?;
    let ind = Individual::with_mode("mutate", "", &["TENERAL_EVALS=gate"])?;
    let home = ind.path();
    let dotenv = std::fs::read_to_string(home.join(".env"))?.replace(
        "TENERAL_PROVIDER=standin\n",
        &format!(
            "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={OWNER_KEY}\n\
             TENERAL_MODEL=some-model\n",
            provider.url
        ),
    );
    std::fs::write(home.join(".env"), dotenv)?;
    let evals = home.join("evals");
    std::fs::create_dir_all(&evals)?;
    for (name, text) in [("a-within", WITHIN), ("b-over", OVER), ("c-down", DOWN)] {
        std::fs::write(evals.join(format!("{name}.toml")), text)?;
    }
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let reply =
        "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}\")}))?;";
    let louder = "kernel.send(json!({\"type\": \"reply\", \"text\": format!(\"{REPLY_PREFIX}{reply}!\")}))?;";
    let candidate = mutation(&ind, reply, louder)?;
    let verdict = ask(&ind, &candidate)?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    let step = ind
        .events("mutation.check")
        .into_iter()
        .find(|e| e["check"] == "evals" && e["candidate"] == candidate.as_str())
        .ok_or("no evals step")?;
    assert_eq!(step["result"], "passed", "{step}");
    assert_eq!(step["regressed"], serde_json::json!([]), "{step}");
    let undecided: Vec<_> = step["undecided"]
        .as_array()
        .ok_or("no undecided")?
        .iter()
        .map(|u| (u["evaluation"].as_str().unwrap_or_default().to_owned(), u["why"].clone()))
        .collect();
    assert_eq!(undecided.len(), 2, "{step}");
    assert_eq!(undecided[0].0, "b-over", "{step}");
    assert!(undecided[0].1.as_str().unwrap_or_default().contains("budget overrun"), "{step}");
    assert_eq!(undecided[1].0, "c-down", "{step}");
    assert!(undecided[1].1.as_str().unwrap_or_default().contains("provider failure"), "{step}");
    let results = ind.events("eval.result");
    let passed = results.iter().filter(|e| e["evaluation"] == "a-within");
    assert!(passed.clone().count() == 2 && passed.clone().all(|e| e["result"] == "passed"));
    assert!(ind.events("mutation.rejected").is_empty(), "a refusal was counted");
    Ok(())
}
