//! The gate, promotion and rollback, end to end: a fixture body in `mutate`
//! mode asks for the commit its owner names; the test makes that commit in
//! the agent's workspace, as an agent would.

use std::path::Path;
use std::time::Duration;

use git2::{IndexAddOption, Repository, Signature};
use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(300);
const SHORT: Duration = Duration::from_secs(30);

/// Commits what `edit` does to the agent's workspace; returns the commit.
fn candidate(
    ind: &Individual,
    edit: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<String, Box<dyn std::error::Error>> {
    let workspace = ind.path().join(".teneral/candidate");
    edit(&workspace)?;
    let repo = Repository::open(&workspace)?;
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("agent", "agent@localhost")?;
    let parent = repo.head()?.peel_to_commit()?;
    Ok(repo.commit(Some("HEAD"), &sig, &sig, "a mutation", &tree, &[&parent])?.to_string())
}

/// The first line of the fixture body's one test, after which a test's
/// edits put what makes it fail or hang.
const MODE_TEST: &str = "    fn the_mode_is_one_of_the_known() {\n";
const SLEEP: &str = "        std::thread::sleep(std::time::Duration::from_secs(600));\n";

/// Replaces `from` with `to` in the workspace's fixture body.
fn body_edit(workspace: &Path, from: &str, to: &str) -> std::io::Result<()> {
    let main = workspace.join("body/src/main.rs");
    let text = std::fs::read_to_string(&main)?;
    if !text.contains(from) {
        return Err(std::io::Error::other(format!("{from:?} is not in the fixture body")));
    }
    std::fs::write(main, text.replace(from, to))
}

fn mode(workspace: &Path, mode: &str) -> std::io::Result<()> {
    body_edit(
        workspace,
        "const MODE: &str = \"mutate\";",
        &format!("const MODE: &str = \"{mode}\";"),
    )
}

/// A kernel on a fixture body in `mutate` mode, at rest after its birth.
fn started(env: &[&str]) -> Result<(Individual, Kernel, String), Box<dyn std::error::Error>> {
    let ind = Individual::with_mode("mutate", "", env)?;
    let base = ind.head()?;
    let kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    Ok((ind, kernel, base))
}

/// Asks for `commit` and waits for the answer about it.
fn ask(ind: &Individual, commit: &str) -> Result<Value, Box<dyn std::error::Error>> {
    teneral::owner::write_line(ind.path(), commit)?;
    Ok(ind.wait_for("the verdict", LONG, |e| {
        (e["type"] == "mutation.rejected" || e["type"] == "mutation.accepted")
            && (e["candidate"] == commit || e["to"] == commit)
    })?)
}

fn rejected_at(verdict: &Value, check: &str, output: &str) {
    assert_eq!(verdict["type"], "mutation.rejected", "{verdict}");
    assert_eq!(verdict["check"], check, "{verdict}");
    let out = verdict["output"].as_str().unwrap_or_default();
    assert!(out.contains(output), "output of {check} should hold {output:?}:\n{out}");
}

#[test]
fn a_mutation_is_checked_promoted_answers_and_can_be_sent_back() -> TestResult {
    let (ind, _kernel, base) = started(&[])?;
    let v2 = candidate(&ind, |w| {
        mode(w, "normal")?;
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"v2: \";")
    })?;
    let verdict = ask(&ind, &v2)?;
    assert_eq!(verdict["type"], "mutation.accepted", "{verdict}\n{}", ind.kernel_log());
    assert_eq!(verdict["from"], base.as_str());
    let steps: Vec<(String, String)> = ind
        .events("mutation.check")
        .iter()
        .filter(|e| e["candidate"] == v2.as_str())
        .map(|e| {
            (
                e["check"].as_str().unwrap_or("").to_owned(),
                e["result"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
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
    assert!(steps.iter().all(|(_, r)| r == "passed" || r == "reused"), "{steps:?}");

    teneral::owner::write_line(ind.path(), "who are you now?")?;
    let reply = ind.wait_for("the new generation's reply", LONG, |e| {
        e["type"] == "reply" && e["commit"] == v2.as_str()
    })?;
    assert!(reply["text"].as_str().unwrap_or_default().starts_with("v2: "), "{reply}");
    let state: Value =
        serde_json::from_slice(&std::fs::read(ind.path().join(".teneral/state.json"))?)?;
    assert_eq!(state["generation"], v2.as_str());
    assert_eq!(state["previous"], base.as_str());
    let repo = Repository::open(ind.path())?;
    assert_eq!(
        repo.find_branch("lineage/local", git2::BranchType::Local)?
            .get()
            .target()
            .map(|o| o.to_string()),
        Some(v2.clone())
    );

    let list = std::process::Command::new(teneralctl())
        .args(["back", "--list", "--dir"])
        .arg(ind.path())
        .output()?;
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains(&base[..7]) && listed.contains(&v2[..7]), "{listed}");
    assert!(listed.lines().last().unwrap_or_default().contains("current"), "{listed}");

    // The owner sends it back while it runs.
    let back = std::process::Command::new(teneralctl())
        .args(["back", "--dir"])
        .arg(ind.path())
        .output()?;
    assert_eq!(back.status.code(), Some(0), "{}", String::from_utf8_lossy(&back.stderr));
    let sent = ind.wait_for("the send-back", SHORT, |e| e["type"] == "generation.sentback")?;
    assert_eq!(
        (sent["from"].as_str(), sent["to"].as_str()),
        (Some(v2.as_str()), Some(base.as_str()))
    );
    ind.wait_for("the old generation again", SHORT, |e| {
        e["type"] == "generation.ready"
            && e["commit"] == base.as_str()
            && e["seq"].as_u64() > sent["seq"].as_u64()
    })?;
    Ok(())
}

#[test]
fn a_body_only_mutation_reuses_the_kernels_verdicts() -> TestResult {
    let (ind, _kernel, _) = started(&[])?;
    let first = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"a\";")
    })?;
    assert_eq!(ask(&ind, &first)?["type"], "mutation.accepted");
    ind.wait_for("the new generation", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == first.as_str()
    })?;
    let second = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"a\";", "const REPLY_PREFIX: &str = \"b\";")
    })?;
    assert_eq!(ask(&ind, &second)?["type"], "mutation.accepted");
    let result = |check: &str| {
        ind.events("mutation.check")
            .iter()
            .find(|e| e["candidate"] == second.as_str() && e["check"] == check)
            .map(|e| e["result"].as_str().unwrap_or("").to_owned())
    };
    assert_eq!(result("typecheck-kernel").as_deref(), Some("reused"));
    assert_eq!(result("kernel-tests").as_deref(), Some("reused"));
    assert_eq!(
        result("body-tests").as_deref(),
        Some("passed"),
        "the body changed, so its tests ran"
    );
    Ok(())
}

#[test]
fn the_gate_warms_up_after_a_start_so_the_first_mutation_reuses_the_kernels_checks() -> TestResult {
    let (ind, _kernel, _) = started(&["TENERAL_WARM_GATE=on"])?;
    let end = std::time::Instant::now() + LONG;
    while !ind.kernel_log().contains("gate: warmed, 2 of the kernel's checks passed") {
        if std::time::Instant::now() > end {
            return Err(format!("no warm-up after {LONG:?}:\n{}", ind.kernel_log()).into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let first = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"w\";")
    })?;
    assert_eq!(ask(&ind, &first)?["type"], "mutation.accepted");
    let result = |check: &str| {
        ind.events("mutation.check")
            .iter()
            .find(|e| e["candidate"] == first.as_str() && e["check"] == check)
            .map(|e| e["result"].as_str().unwrap_or("").to_owned())
    };
    assert_eq!(result("typecheck-kernel").as_deref(), Some("reused"));
    assert_eq!(result("kernel-tests").as_deref(), Some("reused"));
    assert_eq!(result("body-tests").as_deref(), Some("passed"));
    Ok(())
}

#[test]
fn refusals_at_paths_name_every_path() -> TestResult {
    let (ind, _kernel, base) = started(&[])?;
    let protected = candidate(&ind, |w| std::fs::write(w.join("BIRTH.md"), "a new letter\n"))?;
    rejected_at(&ask(&ind, &protected)?, "paths", "protected paths changed: BIRTH.md.");
    ind.wait_for("the same generation again", LONG, |e| {
        e["type"] == "generation.ready"
            && e["commit"] == base.as_str()
            && e["seq"].as_u64() > Some(8)
    })?;
    let link = candidate(&ind, |w| {
        std::fs::remove_file(w.join("BIRTH.md")).ok();
        std::fs::write(w.join("BIRTH.md"), "You were just born. Say hello.\n")?;
        std::os::unix::fs::symlink("/etc/passwd", w.join("body/link"))
    })?;
    rejected_at(
        &ask(&ind, &link)?,
        "paths",
        "body/ may hold only regular files: body/link (a symbolic link)",
    );
    Ok(())
}

#[test]
fn a_failing_type_check_is_refused() -> TestResult {
    let (ind, _kernel, _) = started(&[])?;
    let broken = candidate(&ind, |w| {
        body_edit(w, "fn main() {\n", "fn main() {\n    let _x: u32 = \"not a number\";\n")
    })?;
    rejected_at(&ask(&ind, &broken)?, "lint-body", "mismatched types");
    Ok(())
}

#[test]
fn a_failing_body_test_and_a_run_of_no_tests_are_refused() -> TestResult {
    let (ind, _kernel, _) = started(&[])?;
    let failing = candidate(&ind, |w| {
        body_edit(
            w,
            MODE_TEST,
            &format!(
                "{MODE_TEST}        assert_eq!(super::MODE, \"never\", \"failing on purpose\");\n"
            ),
        )
    })?;
    rejected_at(&ask(&ind, &failing)?, "body-tests", "failing on purpose");
    let none = candidate(&ind, |w| {
        body_edit(w, "        assert_eq!(super::MODE, \"never\", \"failing on purpose\");\n", "")?;
        body_edit(
            w,
            "    #[test]\n    fn the_mode_is_one_of_the_known",
            "    #[allow(dead_code)]\n    fn the_mode_is_one_of_the_known",
        )
    })?;
    rejected_at(&ask(&ind, &none)?, "body-tests", "no test ran");
    Ok(())
}

#[test]
fn a_check_past_its_limit_is_stopped_and_refused() -> TestResult {
    let (ind, _kernel, _) = started(&["TENERAL_TEST_CHECK_SECONDS=5"])?;
    let slow = candidate(&ind, |w| body_edit(w, MODE_TEST, &format!("{MODE_TEST}{SLEEP}")))?;
    let verdict = ask(&ind, &slow)?;
    rejected_at(&verdict, "body-tests", "stopped after 5 s, the limit of one check");
    let check = ind.wait_for("the timed step", SHORT, |e| {
        e["type"] == "mutation.check" && e["check"] == "body-tests"
    })?;
    assert!(check["seconds"].as_f64().is_some_and(|s| s < 60.0), "stopped at the limit: {check}");
    Ok(())
}

#[test]
fn a_body_that_never_becomes_ready_fails_the_smoke_run() -> TestResult {
    let (ind, _kernel, _) = started(&["TENERAL_SMOKE_SECONDS=5"])?;
    let never = candidate(&ind, |w| mode(w, "never-ready"))?;
    rejected_at(&ask(&ind, &never)?, "smoke", "did not report ready within 5 s");
    Ok(())
}

#[test]
fn the_same_commit_refused_three_times_stops_the_supervisor() -> TestResult {
    let (ind, mut kernel, _) = started(&[])?;
    let protected = candidate(&ind, |w| std::fs::write(w.join("BIRTH.md"), "changed\n"))?;
    for round in 1..=3u64 {
        teneral::owner::write_line(ind.path(), &protected)?;
        ind.wait_for("a refusal", LONG, |e| {
            e["type"] == "mutation.rejected"
                && ind.events("mutation.rejected").len() as u64 >= round
        })?;
    }
    assert_eq!(kernel.wait(SHORT)?, Some(3));
    let stopped = ind.events("kernel.stopped");
    let reason = stopped.last().and_then(|e| e["reason"].as_str()).unwrap_or_default().to_owned();
    assert!(reason.contains("was refused three times in a row"), "{reason}");
    Ok(())
}

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
    teneral::owner::write_line(ind.path(), "say something")?;
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

#[test]
fn a_kernel_stopped_during_a_check_says_nothing_was_decided_and_leaves_no_check() -> TestResult {
    let (ind, mut kernel, _) = started(&[])?;
    let slow = candidate(&ind, |w| body_edit(w, MODE_TEST, &format!("{MODE_TEST}{SLEEP}")))?;
    teneral::owner::write_line(ind.path(), &slow)?;
    ind.wait_for("the body's tests under way", LONG, |e| {
        e["type"] == "mutation.check" && e["check"] == "lint-body" && e["result"] != "failed"
    })?;
    std::thread::sleep(Duration::from_secs(2));
    kernel.signal(15);
    assert_eq!(kernel.wait(Duration::from_secs(10))?, Some(0));
    let leftover = std::process::Command::new("pgrep")
        .arg("-f")
        .arg(ind.path().join(".teneral/gate"))
        .output()?;
    assert!(
        leftover.stdout.is_empty(),
        "no check outlives the kernel: {}",
        String::from_utf8_lossy(&leftover.stdout)
    );
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
    let git = |args: &[&str]| {
        std::process::Command::new("git").args(args).current_dir(ind.path()).status()
    };
    assert!(git(&["remote", "add", "origin", "http://127.0.0.1:9/species.git"])?.success());
    let kernel_edit = candidate(&ind, |w| std::fs::write(w.join("BIRTH.md"), "a new letter\n"))?;
    let mut after = 0;
    for round in 1..=3 {
        teneral::owner::write_line(ind.path(), &kernel_edit)?;
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
    teneral::owner::write_line(ind.path(), &v2)?;
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
