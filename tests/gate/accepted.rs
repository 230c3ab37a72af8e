//! Mutations the gate accepts: promotion, the send-back, the memo of the
//! kernel's verdicts and its warm-up.

use super::*;

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

    teneral_core::owner::write_line(ind.path(), "who are you now?")?;
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
        .output_within(QUICK)?;
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains(&base[..7]) && listed.contains(&v2[..7]), "{listed}");
    assert!(listed.lines().last().unwrap_or_default().contains("current"), "{listed}");

    // The owner sends it back while it runs.
    let back = std::process::Command::new(teneralctl())
        .args(["back", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
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
