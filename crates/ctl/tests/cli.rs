//! The owner's client as a program. Its own test target also makes
//! `cargo test --workspace` build the `teneralctl` binary, which the
//! kernel's integration tests drive.
#![allow(clippy::expect_used)]
use std::process::Command;
use teneral_testkit::{Within, QUICK, SLOW};

#[test]
fn status_of_a_directory_that_is_no_individual_says_it_does_not_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .arg("status")
        .arg("--dir")
        .arg(dir.path())
        .output_within(QUICK)
        .expect("teneralctl runs");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn the_commands_are_the_owners() {
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .arg("--help")
        .output_within(SLOW)
        .expect("teneralctl runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for command in ["talk", "back", "status"] {
        assert!(help.contains(command), "{help}");
    }
}

#[test]
fn talk_status_and_back_refuse_a_directory_that_is_no_individual() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cases: &[(&[&str], i32)] = &[(&["talk"], 1), (&["status"], 3), (&["back", "--list"], 1)];
    for (args, code) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
            .args(*args)
            .arg("-d")
            .arg(dir.path())
            .stdin(std::process::Stdio::null())
            .output_within(SLOW)
            .expect("teneralctl runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {out:?}");
        assert!(err.contains("is not a teneral individual"), "{args:?}: {err}");
        assert_eq!(err.matches(&*dir.path().display().to_string()).count(), 1, "named once: {err}");
    }
    assert!(!dir.path().join(".teneral").exists(), "nothing was created there");
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(["talk", "--help"])
        .output_within(SLOW)
        .expect("teneralctl runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("-d, --dir <DIR>") && help.contains("individual's directory"), "{help}");
}

fn teneralctl(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(args)
        .arg("-d")
        .arg(dir)
        .output_within(SLOW)
        .expect("teneralctl runs")
}

#[test]
fn status_and_back_list_speak_json_with_timestamps() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir_all(dir.path().join(".teneral")).expect("an individual's directory");
    std::fs::create_dir_all(dir.path().join("memory")).expect("memory");
    let status =
        r#"{"pid":7,"generation":null,"status":"resting","since":"2026-11-30T10:00:00.000Z"}"#;
    std::fs::write(dir.path().join(".teneral/status"), status).expect("a status");
    let out = teneralctl(&["status", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(value["running"], false);
    assert_eq!(value["since"], "2026-11-30T10:00:00.000Z");
    let out = teneralctl(&["status"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("last said: resting (") && text.contains(" ago)"), "{text}");

    let commit = "0123456789abcdef0123456789abcdef01234567";
    let ready = format!(
        r#"{{"type":"generation.ready","ts":"2026-11-30T10:00:00.000Z","seq":1,"commit":"{commit}"}}"#
    );
    std::fs::write(dir.path().join("memory/journal.jsonl"), ready + "\n").expect("a journal");
    let out = teneralctl(&["back", "--list", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    assert_eq!(value[0]["commit"], commit);
    assert_eq!(value[0]["ready_at"], "2026-11-30T10:00:00.000Z");
    assert_eq!(value[0]["current"], true);
    let out = teneralctl(&["back", "--list"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("0123456  ready 2026-11-30 10:00:00 UTC  ") && text.contains(" ago"),
        "{text}"
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_definitions() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
            .args(args)
            .output_within(SLOW)
            .expect("teneralctl runs");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bash = run(&["completions", "bash"]);
    assert!(bash.contains("_teneralctl()") && bash.contains("--plain"), "{bash}");
    assert!(run(&["completions", "zsh"]).contains("#compdef teneralctl"));
    assert!(run(&["completions", "fish"]).contains("complete -c teneralctl"));
    let man = run(&["man"]);
    assert!(man.contains(".TH teneralctl 1") && man.contains("talk"), "{man}");
}
