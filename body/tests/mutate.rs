//! The `mutate` tool through the whole body: the workspace is committed, the
//! kernel is asked for that commit, and the body exits with status 75 once
//! the turn has ended. A workspace with nothing new is refused and the body
//! goes on living.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

/// Runs git in `dir` with a fixed identity; its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=test", "-c", "user.email=test@localhost", "-C"])
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Gives the rig's individual a workspace as the kernel makes one: a clone
/// of a repository holding a body, on `lineage/local`.
fn workspace(rig: &Rig) -> std::path::PathBuf {
    let origin = rig.dir.0.join("origin");
    let made = "the origin repository can be made";
    std::fs::create_dir_all(origin.join("body/src")).expect(made);
    std::fs::write(origin.join("body/src/main.rs"), "fn main() {}\n").expect(made);
    git(&origin, &["init", "--quiet", "-b", "lineage/local"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "--quiet", "-m", "birth"]);
    let candidate = rig.home.join(".teneral/candidate");
    let out = Command::new("git")
        .args(["clone", "--quiet", "-b", "lineage/local"])
        .arg(&origin)
        .arg(&candidate)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git clone: {}", String::from_utf8_lossy(&out.stderr));
    candidate
}

#[test]
fn mutate_commits_the_workspace_asks_the_kernel_and_exits_75_after_the_turn() {
    let script = [
        r#"{"tool_calls":[{"name":"write_file","arguments":{"path":".teneral/candidate/body/src/greet.rs","content":"// hello\n"}}]}"#,
        r#"{"expect":"wrote","tool_calls":[{"name":"mutate","arguments":{"message":"Greet more warmly"}}]}"#,
        r#"{"expect":"asked the kernel","reply":"Asked; see you in the next generation."}"#,
    ];
    let mut rig = Rig::new(Wire::Chat, &script);
    let candidate = workspace(&rig);
    let birth = git(&candidate, &["rev-parse", "HEAD"]);
    rig.seed_journal(&[serde_json::json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "improve yourself");

    let status = wait_child(rig.body.as_mut().unwrap(), WAIT);
    let report = rig.report();
    assert_eq!(status.and_then(|s| s.code()), Some(75), "{report}");

    let head = git(&candidate, &["rev-parse", "HEAD"]);
    assert_ne!(head, birth, "a new commit is made");
    assert_eq!(git(&candidate, &["rev-parse", "HEAD~1"]), birth, "on top of the last one");
    assert_eq!(git(&candidate, &["rev-parse", "--abbrev-ref", "HEAD"]), "lineage/local");
    assert_eq!(git(&candidate, &["log", "-1", "--format=%s"]), "Greet more warmly");
    assert_eq!(git(&candidate, &["show", "HEAD:body/src/greet.rs"]), "// hello");
    assert_eq!(git(&candidate, &["status", "--porcelain"]), "", "nothing is left out");

    let journal = rig.journal();
    let asked = of(&journal, "mutation.requested");
    assert_eq!(asked.len(), 1, "{report}");
    assert_eq!(asked[0]["candidate"], Value::String(head.clone()));
    let result = of(&journal, "tool.result").last().copied().cloned().unwrap();
    assert_eq!(result["error"], false, "{report}");
    assert!(result["output"].as_str().unwrap().contains(&head), "{result}");
    let kinds = types(&journal);
    let at = kinds.iter().position(|k| *k == "mutation.requested").unwrap();
    assert_eq!(kinds[at + 1..], ["tool.result", "usage", "reply", "turn.ended"], "{report}");
}

#[test]
fn mutate_with_nothing_to_commit_is_an_error_and_the_body_lives_on() {
    let script = [
        r#"{"tool_calls":[{"name":"mutate","arguments":{"message":"Nothing really"}}]}"#,
        r#"{"expect":"nothing to commit","reply":"Nothing changed yet."}"#,
    ];
    let mut rig = Rig::new(Wire::Responses, &script);
    let candidate = workspace(&rig);
    let birth = git(&candidate, &["rev-parse", "HEAD"]);
    rig.seed_journal(&[serde_json::json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "mutate now");
    let journal = rig.wait_turns(1);
    let result = of(&journal, "tool.result")[0].clone();
    assert_eq!(result["error"], true, "{}", rig.report());
    assert!(result["output"].as_str().unwrap().contains(".teneral/candidate/body"), "{result}");
    assert!(!has(&journal, "mutation.requested"), "{}", rig.report());
    assert_eq!(git(&candidate, &["rev-parse", "HEAD"]), birth, "no commit is made");

    rig.wait_rest(); // or the body's end
    assert!(alive(rig.body_pid() as i32), "the body goes on: {}", rig.report());
    let (status, _) = rig.terminate();
    assert_eq!(status.code(), Some(0));
}
