//! Mutations the gate accepts: promotion, the send-back, the running
//! kernel that needs no kernel checks, the times the status names, and the
//! warm-up, which a mutation never waits for.

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

/// The texts of the kernel's status, as `teneralctl status` and talk read
/// them, collected until the returned guard is dropped.
struct StatusWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl StatusWatch {
    fn new(home: &Path) -> StatusWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (home, until, into) = (home.to_owned(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !until.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(file) = teneral_core::status::read(&home) {
                    let mut seen = into.lock().unwrap_or_else(|p| p.into_inner());
                    if seen.last() != Some(&file.status) {
                        seen.push(file.status);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        StatusWatch { stop, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A check's result in the journal, and why it did not run, if it did not.
fn check_of(ind: &Individual, candidate: &str, check: &str) -> Option<(String, String)> {
    ind.events("mutation.check")
        .iter()
        .find(|e| e["candidate"] == candidate && e["check"] == check)
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or("").to_owned();
            (field("result"), field("why"))
        })
}

#[test]
fn a_body_only_mutation_runs_no_kernel_check_and_the_next_says_how_long_the_body_checks_take(
) -> TestResult {
    let (ind, _kernel, _) = started(&[])?;
    let first = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"a\";")
    })?;
    assert_eq!(ask(&ind, &first)?["type"], "mutation.accepted", "{}", ind.kernel_log());
    // Nothing was kept (no warm-up, no earlier verdict): the running
    // generation's kernel is why its checks did not run.
    let running = Some(("reused".to_owned(), "the running generation's kernel".to_owned()));
    assert_eq!(check_of(&ind, &first, "typecheck-kernel"), running);
    assert_eq!(check_of(&ind, &first, "kernel-tests"), running);
    assert_eq!(check_of(&ind, &first, "body-tests").map(|(r, _)| r).as_deref(), Some("passed"));
    ind.wait_for("the new generation", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == first.as_str()
    })?;
    let second = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"a\";", "const REPLY_PREFIX: &str = \"b\";")
    })?;
    let watch = StatusWatch::new(ind.path());
    assert_eq!(ask(&ind, &second)?["type"], "mutation.accepted");
    let seen = watch.seen();
    assert_eq!(check_of(&ind, &second, "kernel-tests"), running);
    assert_eq!(
        check_of(&ind, &second, "body-tests").map(|(r, _)| r).as_deref(),
        Some("passed"),
        "the body changed, so its tests ran"
    );
    // The second judgement's status says how long its checks took the first time.
    let named =
        format!("checking mutation {}: format-body, lint-body, body-tests (about ", &second[..7]);
    assert!(
        seen.iter().any(|s| s.starts_with(&named) && s.contains(", from the last run)")),
        "no status with the first judgement's time: {seen:#?}"
    );
    Ok(())
}

#[test]
fn the_gate_warms_up_once_the_body_runs_the_bodys_checks_first() -> TestResult {
    let (ind, _kernel, _) = started(&["TENERAL_WARM_GATE=on"])?;
    let end = std::time::Instant::now() + LONG;
    while !ind.kernel_log().contains("gate: warmed, 5 checks of the running tree passed") {
        if std::time::Instant::now() > end {
            return Err(format!("no warm-up after {LONG:?}:\n{}", ind.kernel_log()).into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = ind.kernel_log();
    let at = |text: &str| log.find(text).ok_or(format!("{text:?} not in the log:\n{log}"));
    assert!(
        at("gate: format-body, lint-body, body-tests of")?
            < at("gate: typecheck-kernel, kernel-tests of")?,
        "the body's checks warm first:\n{log}"
    );
    let first = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"w\";")
    })?;
    let watch = StatusWatch::new(ind.path());
    assert_eq!(ask(&ind, &first)?["type"], "mutation.accepted");
    let seen = watch.seen();
    let running = Some(("reused".to_owned(), "the running generation's kernel".to_owned()));
    assert_eq!(check_of(&ind, &first, "typecheck-kernel"), running);
    assert_eq!(check_of(&ind, &first, "kernel-tests"), running);
    assert_eq!(check_of(&ind, &first, "body-tests").map(|(r, _)| r).as_deref(), Some("passed"));
    // The first mutation's wait is named, with the warm-up's times.
    assert!(
        seen.iter().any(|s| s.contains("body-tests (about ") && s.contains(", from the last run)")),
        "no status with the warm-up's time: {seen:#?}"
    );
    Ok(())
}

/// A stand-in kernel whose one test runs ten minutes, beating every tenth
/// of a second into a file of the gate's target directory (which outlives
/// the check's checkout), named by the check's temp dir and by when the
/// test began, so that one run's beats are told from a later run's.
const SLOW_KERNEL: &str = r#"//! A kernel whose tests take long.

#[cfg(test)]
mod tests {
    #[test]
    fn it_takes_long() {
        let began = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let target = std::env::var_os("CARGO_TARGET_DIR").unwrap_or_default();
        let dir = std::path::PathBuf::from(target).join("heartbeats");
        let _ = std::fs::create_dir_all(&dir);
        let tag = std::env::temp_dir().to_string_lossy().replace('/', "_");
        let beat = dir.join(format!("{tag}-{began}"));
        for i in 0..6000u32 {
            let _ = std::fs::write(&beat, i.to_string());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
"#;

#[test]
fn a_mutation_asked_during_the_warm_up_is_judged_at_once_and_the_warm_up_stopped() -> TestResult {
    let ind = Individual::with_mode("mutate", "", &["TENERAL_WARM_GATE=on"])?;
    std::fs::write(ind.path().join("src/lib.rs"), SLOW_KERNEL)?;
    commit_all(ind.path(), "a kernel whose tests take ten minutes")?;
    // A gate target of its own: the other tests' individuals share one, and
    // this kernel's ten-minute build would hold its lock while it runs.
    let target = ind.path().join(".teneral/gate/target");
    std::fs::remove_file(&target)?;
    std::fs::create_dir_all(&target)?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let tag = ind.path().join(".teneral/gate/checkout/.tmp").to_string_lossy().replace('/', "_");
    let beats = ind.path().join(".teneral/gate/target/heartbeats");
    let end = std::time::Instant::now() + LONG;
    let beat = loop {
        let found = std::fs::read_dir(&beats)
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&format!("{tag}-")));
        if let Some(found) = found {
            break found.path();
        }
        if std::time::Instant::now() > end {
            let log = ind.kernel_log();
            return Err(format!("the warm-up's kernel tests never began:\n{log}").into());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let asked = std::time::Instant::now();
    let first = candidate(&ind, |w| {
        body_edit(w, "const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"s\";")
    })?;
    assert_eq!(ask(&ind, &first)?["type"], "mutation.accepted", "{}", ind.kernel_log());
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(240), "the verdict took {took:?}, as long as the warm-up");
    let log = ind.kernel_log();
    assert!(log.contains("gate: stopped the warm-up of the running tree"), "{log}");
    let running = Some(("reused".to_owned(), "the running generation's kernel".to_owned()));
    assert_eq!(check_of(&ind, &first, "kernel-tests"), running);
    // Nothing of the stopped warm-up runs on: its test beats no more (the
    // next generation warms up anew, with a test of another name).
    let before = std::fs::read_to_string(&beat)?;
    std::thread::sleep(Duration::from_millis(1500));
    let after = std::fs::read_to_string(&beat)?;
    assert_eq!(before, after, "the stopped warm-up's test still runs");
    Ok(())
}
