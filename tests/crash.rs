//! Crash consistency: the kernel killed (SIGKILL, by its own fault injection
//! at a named durability point: TENERAL_TEST_CRASH_AT) at the steps where
//! a kill could break an invariant, then started again; the invariants of
//! docs/design.md ("Crashes") must hold after the start.

mod bench;
mod check;
mod counts;
pub(crate) mod handover;
mod leftovers;
mod locks;
mod offer;
mod organs;
mod power;
mod scenario;
mod strace;

use std::path::Path;
use std::time::Duration;

use git2::Repository;
use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(300);
const SHORT: Duration = Duration::from_secs(60);

/// Starts the kernel set to die at `point`, and waits for it to.
fn die_at(ind: &Individual, point: &str, drive: impl FnOnce() -> TestResult) -> TestResult {
    let mut kernel = ind.start_with(&[("TENERAL_TEST_CRASH_AT", point)])?;
    drive()?;
    let status = kernel.wait(LONG)?;
    assert_eq!(status, None, "the kernel died by SIGKILL at {point}:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains(&format!("crash point {point}")), "{}", ind.kernel_log());
    Ok(())
}

/// A journal that already holds the birth, so a `silent` body says nothing.
pub fn born(ind: &Individual, commit: &str) -> std::io::Result<()> {
    let birth = serde_json::json!({"type": "birth", "ts": "2026-01-01T00:00:00.000Z", "seq": 1,
        "commit": commit, "text": "born before"});
    std::fs::create_dir_all(ind.path().join("memory"))?;
    std::fs::write(ind.path().join("memory/journal.jsonl"), format!("{birth}\n"))
}

/// Every file of the kernel's temporary pattern anywhere below `.teneral/`
/// (build targets aside, whose files are cargo's), links not followed.
pub fn temp_leftovers(home: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![home.join(".teneral")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if kind.is_dir() && name != "target" {
                dirs.push(entry.path());
            } else if kind.is_file() && teneral_core::fsutil::is_temp_name(&name) {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
}

pub fn state_of(home: &Path) -> Value {
    let bytes = std::fs::read(home.join(".teneral/state.json")).unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

pub fn lineage_of(home: &Path) -> Option<String> {
    let repo = Repository::open(home).ok()?;
    let branch = repo.find_branch("lineage/local", git2::BranchType::Local).ok()?;
    branch.get().target().map(|o| o.to_string())
}

/// Verdicts (`mutation.accepted` or `mutation.rejected`) naming request `seq`.
pub fn verdicts_of(journal: &[Value], seq: &Value) -> Vec<Value> {
    journal
        .iter()
        .filter(|e| e["type"] == "mutation.accepted" || e["type"] == "mutation.rejected")
        .filter(|e| &e["request"] == seq)
        .cloned()
        .collect()
}

#[test]
fn an_owner_line_is_journaled_once_when_the_kernel_dies_before_its_file_goes() -> TestResult {
    let ind = Individual::new("", &[])?;
    let mut name = String::new();
    die_at(&ind, "owner.journaled", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        name = teneral_core::owner::write_line(ind.path(), "are you there?")?;
        Ok(())
    })?;
    assert!(ind.owner_files().contains(&name), "the kill came before the file went");
    assert_eq!(ind.events("owner.line").len(), 1);
    let _kernel = ind.start()?;
    ind.wait_for("the start's notice", SHORT, |e| {
        e["type"] == "kernel.notice" && e["text"].as_str().unwrap_or("").contains(&name)
    })?;
    ind.wait_for("the second generation.ready", SHORT, |_| {
        ind.events("generation.ready").len() >= 2
    })?;
    // The cut turn is named to the body, which takes it again.
    let seq = ind.events("owner.line")[0]["seq"].clone();
    let told = ind.wait_for("the notice of the cut turn", SHORT, |e| {
        e["type"] == "kernel.notice" && e["cut_turn"] == seq
    })?;
    let reply = ind.wait_for("the reply to the cut line", SHORT, |e| {
        e["type"] == "reply" && e["seq"].as_u64() > told["seq"].as_u64()
    })?;
    assert!(reply["text"].as_str().unwrap_or("").contains("are you there?"), "{reply}");
    std::thread::sleep(Duration::from_millis(500));
    let lines: Vec<Value> =
        ind.events("owner.line").into_iter().filter(|e| e["file"] == name.as_str()).collect();
    assert_eq!(lines.len(), 1, "the line once: {lines:?}");
    assert!(!ind.owner_files().contains(&name), "its file is gone");
    let told: Vec<Value> =
        ind.events("kernel.notice").into_iter().filter(|e| e["cut_turn"] == seq).collect();
    assert_eq!(told.len(), 1, "told once: {told:?}");
    Ok(())
}

#[test]
fn an_owner_line_unanswered_at_a_clean_stop_is_named_before_the_kernel_stops() -> TestResult {
    // A body that takes lines and never answers: the stop cuts the turn.
    let ind = Individual::with_mode("silent", "", &[])?;
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let name = teneral_core::owner::write_line(ind.path(), "will you answer?")?;
    let line = ind.wait_for("the owner line", SHORT, |e| {
        e["type"] == "owner.line" && e["file"] == name.as_str()
    })?;
    kernel.signal(15);
    assert_eq!(kernel.wait(SHORT)?, Some(0), "a clean stop:\n{}", ind.kernel_log());
    let journal = ind.journal();
    let stopped =
        journal.iter().rposition(|e| e["type"] == "kernel.stopped").ok_or("no kernel.stopped")?;
    let told: Vec<&Value> = journal[..stopped]
        .iter()
        .filter(|e| e["type"] == "kernel.notice" && e["cut_turn"] == line["seq"])
        .collect();
    assert_eq!(told.len(), 1, "the owner is told before the stop: {journal:?}");
    assert!(told[0]["seq"].as_u64() > line["seq"].as_u64(), "{}", told[0]);
    // The next start names the line again, for the agent to take the turn.
    let _again = ind.start()?;
    ind.wait_for("the start naming the cut turn", SHORT, |e| {
        e["type"] == "kernel.started" && e["cut_turn"] == line["seq"]
    })?;
    Ok(())
}

#[test]
fn a_mutation_requested_just_before_a_kill_is_answered_once() -> TestResult {
    let ind = Individual::with_mode("mutate", "", &[])?;
    let candidate = "1234567890abcdef1234567890abcdef12345678";
    die_at(&ind, "request.journaled", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        teneral_core::owner::write_line(ind.path(), candidate)?;
        Ok(())
    })?;
    let request = ind.events("mutation.requested").pop().expect("the request was journaled");
    assert!(verdicts_of(&ind.journal(), &request["seq"]).is_empty(), "no answer before the start");
    let _kernel = ind.start()?;
    ind.wait_for("the answer", SHORT, |e| e["request"] == request["seq"])?;
    std::thread::sleep(Duration::from_secs(1));
    let verdicts = verdicts_of(&ind.journal(), &request["seq"]);
    assert_eq!(verdicts.len(), 1, "answered once: {verdicts:?}");
    assert_eq!(verdicts[0]["check"], "undecided", "{}", verdicts[0]);
    assert!(verdicts[0]["output"].as_str().unwrap_or("").contains("ask again"));
    Ok(())
}

#[test]
fn a_trial_keeps_its_due_time_across_a_restart() -> TestResult {
    // Generation `silent` on trial: ready, never replies. The first kernel
    // dies right after it wrote the trial's due time; the second must
    // still roll the silent generation back, by that due time.
    let ind = Individual::new("", &["TENERAL_TEST_REPLY_SECONDS=6"])?;
    let base = ind.head()?;
    set_mode(ind.path(), "silent")?;
    let silent = commit_all(ind.path(), "a silent generation")?;
    let state = serde_json::json!({
        "generation": silent, "previous": base,
        "trial": {"commit": silent, "reply_by": null},
    });
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;
    born(&ind, &base)?;
    die_at(&ind, "trial.saved", || Ok(()))?;
    let due = state_of(ind.path())["trial"]["reply_by"].as_u64().expect("the due time was kept");
    let _kernel = ind.start()?;
    let back = ind.wait_for("the rollback", SHORT, |e| e["type"] == "generation.rolledback")?;
    assert_eq!(back["from"], silent.as_str(), "{back}");
    assert_eq!(back["to"], base.as_str(), "{back}");
    let reason = back["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("reply"), "the trial's rule, not a crash: {reason}");
    let now_ms = teneral_core::state::unix_ms_now();
    assert!(now_ms >= due, "not before the due time");
    ind.wait_for("the base generation running", SHORT, |e| {
        e["type"] == "generation.ready" && e["commit"] == base.as_str()
    })?;
    let state = state_of(ind.path());
    assert_eq!(state["generation"], base.as_str());
    assert!(state["trial"].is_null(), "{state}");
    assert_eq!(lineage_of(ind.path()), Some(base));
    Ok(())
}

#[test]
fn an_accepted_mutation_stays_accepted_when_the_kernel_dies_after_its_verdict() -> TestResult {
    let ind = Individual::with_mode("mutate", "", &[])?;
    let base = ind.head()?;
    let workspace = ind.path().join(".teneral/candidate");
    let mut v2 = String::new();
    die_at(&ind, "verdict.journaled", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        let main = workspace.join("body/src/main.rs");
        let text = std::fs::read_to_string(&main)?
            .replace("const MODE: &str = \"mutate\";", "const MODE: &str = \"normal\";")
            .replace("const REPLY_PREFIX: &str = \"\";", "const REPLY_PREFIX: &str = \"v2: \";");
        std::fs::write(&main, text)?;
        v2 = commit_all(&workspace, "v2")?;
        give_to_individual(ind.path(), &workspace)?;
        teneral_core::owner::write_line(ind.path(), &v2)?;
        Ok(())
    })?;
    let accepted = ind.events("mutation.accepted").pop().expect("the verdict was journaled");
    assert_eq!(accepted["to"], v2.as_str(), "{accepted}");
    assert_eq!(state_of(ind.path())["generation"], base.as_str(), "killed before the state moved");
    let _kernel = ind.start()?;
    ind.wait_for("the new generation ready", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    let state = state_of(ind.path());
    assert_eq!(state["generation"], v2.as_str(), "{state}");
    assert_eq!(state["previous"], base.as_str(), "{state}");
    assert_eq!(lineage_of(ind.path()).as_deref(), Some(v2.as_str()));
    let verdicts = verdicts_of(&ind.journal(), &accepted["request"]);
    assert_eq!(verdicts.len(), 1, "never 'nothing decided' after an accept: {verdicts:?}");
    teneral_core::owner::write_line(ind.path(), "who are you now?")?;
    let reply =
        ind.wait_for("v2's reply", LONG, |e| e["type"] == "reply" && e["commit"] == v2.as_str())?;
    assert!(reply["text"].as_str().unwrap_or("").starts_with("v2: "), "{reply}");
    Ok(())
}

#[test]
fn no_event_socket_is_left_after_twenty_killed_runs() -> TestResult {
    let ind = Individual::new("", &[])?;
    for _ in 0..20 {
        die_at(&ind, "socket.bound", || Ok(()))?;
    }
    let _kernel = ind.start()?;
    ind.wait_for("a generation.started", LONG, |e| e["type"] == "generation.started")?;
    let sockets = event_sockets(ind.path());
    assert_eq!(sockets.len(), 1, "only the running one: {sockets:?}");
    Ok(())
}

#[test]
fn no_compiler_of_a_gate_check_outlives_the_kernel() -> TestResult {
    // A candidate whose build script sleeps: the gate's lint of the body
    // runs it under cargo, a grandchild of the kernel in cargo's group.
    let ind = Individual::with_mode("mutate", "", &[])?;
    let kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let workspace = ind.path().join(".teneral/candidate");
    std::fs::write(
        workspace.join("body/build.rs"),
        "fn main() {\n    std::thread::sleep(std::time::Duration::from_secs(600));\n}\n",
    )?;
    let candidate = commit_all(&workspace, "a slow build script")?;
    give_to_individual(ind.path(), &workspace)?;
    teneral_core::owner::write_line(ind.path(), &candidate)?;
    let end = std::time::Instant::now() + LONG;
    let sleeper = loop {
        let found = processes_under(ind.path());
        if let Some(p) = found.iter().find(|(_, n)| n.starts_with("build-script")) {
            break p.0;
        }
        assert!(std::time::Instant::now() < end, "no build script ran:\n{}", ind.kernel_log());
        std::thread::sleep(Duration::from_millis(100));
    };
    kernel.signal(9);
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while alive(sleeper) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(sleeper), "the build script {sleeper} outlived the kernel");
    // The rest of the check goes as its cage's PID namespace is torn down,
    // which takes a moment after the kernel's death: within the same bound.
    let mut left = processes_under(ind.path());
    while !left.is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_under(ind.path());
    }
    assert!(left.is_empty(), "left running 10 s after the kernel died: {left:?}");
    Ok(())
}

#[test]
fn a_start_killed_as_it_answers_a_left_request_answers_it_once() -> TestResult {
    // The first kernel dies between the request and its verdict; the second
    // answers it at start ("nothing decided") and dies right after; the
    // third must neither answer it again nor leave it unanswered.
    let ind = Individual::with_mode("mutate", "", &[])?;
    let candidate = "fedcba0987654321fedcba0987654321fedcba09";
    die_at(&ind, "request.journaled", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        teneral_core::owner::write_line(ind.path(), candidate)?;
        Ok(())
    })?;
    let request = ind.events("mutation.requested").pop().expect("the request was journaled");
    die_at(&ind, "undecided.journaled", || Ok(()))?;
    let verdicts = verdicts_of(&ind.journal(), &request["seq"]);
    assert_eq!(verdicts.len(), 1, "answered before the kill: {verdicts:?}");
    let readies = ind.events("generation.ready").len();
    let _kernel = ind.start()?;
    ind.wait_for("the third kernel's body ready", SHORT, |_| {
        ind.events("generation.ready").len() > readies
    })?;
    std::thread::sleep(Duration::from_secs(1));
    let verdicts = verdicts_of(&ind.journal(), &request["seq"]);
    assert_eq!(verdicts.len(), 1, "answered exactly once: {verdicts:?}");
    assert_eq!(verdicts[0]["check"], "undecided", "{}", verdicts[0]);
    Ok(())
}

#[test]
fn a_kill_during_the_clean_stop_sweep_leaves_nothing_behind() -> TestResult {
    let ind = Individual::new("", &[])?;
    let mut kernel = ind.start_with(&[("TENERAL_TEST_CRASH_AT", "stop.sweeping")])?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    kernel.signal(15);
    let status = kernel.wait(SHORT)?;
    assert_eq!(status, None, "killed in its stop's sweep:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains("crash point stop.sweeping"), "{}", ind.kernel_log());
    // The keeper kills what the list still named.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let mut left = processes_under(ind.path());
    while !left.is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_under(ind.path());
    }
    assert!(left.is_empty(), "left running after the kill: {left:?}");
    let mut again = ind.start()?;
    ind.wait_for("the restart's body ready", SHORT, |_| ind.events("generation.ready").len() >= 2)?;
    again.signal(15);
    assert_eq!(again.wait(SHORT)?, Some(0), "a clean stop:\n{}", ind.kernel_log());
    assert!(processes_under(ind.path()).is_empty(), "{:?}", processes_under(ind.path()));
    assert!(event_sockets(ind.path()).is_empty(), "{:?}", event_sockets(ind.path()));
    assert!(!ind.path().join(teneral::spawn::CHILDREN_PATH).exists(), "the list is removed");
    let temps = temp_leftovers(ind.path());
    assert!(temps.is_empty(), "{temps:?}");
    Ok(())
}

#[test]
fn a_kill_after_the_old_checkout_went_leaves_the_next_start_a_whole_one() -> TestResult {
    let ind = Individual::new("", &[])?;
    let mut first = ind.start()?;
    ind.wait_for("the first body ready", LONG, |e| e["type"] == "generation.ready")?;
    first.signal(15);
    assert_eq!(first.wait(SHORT)?, Some(0), "a clean stop:\n{}", ind.kernel_log());
    let teneral_dir = ind.path().join(".teneral");
    let gone = || -> Vec<String> {
        std::fs::read_dir(&teneral_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".live.gone-"))
            .collect()
    };
    // The next start remakes `.teneral/live`: it dies with the old tree
    // renamed away and no new one made.
    die_at(&ind, "checkout.discarded", || Ok(()))?;
    assert!(!teneral_dir.join("live").exists(), "no checkout was made after the kill");
    let left = gone();
    assert_eq!(left.len(), 1, "the old tree, renamed, is what the kill left: {left:?}");
    let mut again = ind.start()?;
    ind.wait_for("the restart's body ready", LONG, |_| ind.events("generation.ready").len() >= 2)?;
    assert!(teneral_dir.join("live/body/Cargo.toml").is_file(), "a whole checkout again");
    // The restart's checkout removed the leftover in the background.
    let end = std::time::Instant::now() + SHORT;
    while !gone().is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gone().is_empty(), "the tree the kill left is removed: {:?}", gone());
    again.signal(15);
    assert_eq!(again.wait(SHORT)?, Some(0), "a clean stop:\n{}", ind.kernel_log());
    Ok(())
}
