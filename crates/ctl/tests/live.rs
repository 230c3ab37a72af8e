//! The live conversation in a real terminal (see `common`): a failing
//! model and the gate shown as they happen, two clients at once, a resize,
//! `/history`, a vanished terminal, and the colour depths.
#![allow(clippy::expect_used, clippy::panic)]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_failing_model_is_shown_at_once_in_both_clients() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let plain = talk_terminal_with(home, &[], &["--plain"]);
    plain.wait_for("/help lists the commands");
    plain.type_text("are you there?");
    plain.keys(&["Enter"]);
    plain.wait_for("[teneral is not running: your line waits");
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let full = talk_terminal(home, &[]);
    full.wait_for("◆ resting");
    append(
        home,
        &[
            r#"{"type":"owner.line","file":"b.txt","text":"hello?"}"#,
            r#"{"type":"model.retry","message":"HTTP 503: the \u001b[2Jprovider is busy","status":503,"retry":1,"seconds":10}"#,
        ],
    );
    full.wait_for_all(&[
        "│ the model failed: HTTP 503: the provider is busy",
        "│   retry 1 in 10s (at 10:00:10 UTC); Esc gives up the turn",
        "the model failed; retry 1 in",
        "esc to interrupt",
    ]);
    plain.wait_for("[model failed; retry 1 in 10s] HTTP 503: the provider is busy");
}

#[test]
fn the_gate_shows_each_step_and_the_mutation_exit_is_no_crash() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let tmux = talk_terminal(home, &[]);
    tmux.wait_for("◆ resting");
    append(home, &[r#"{"type":"mutation.requested","candidate":"fedcba9876543210"}"#]);
    tmux.wait_for("asked for a mutation to fedcba9");
    let status = r#"{"pid":1,"generation":null,"status":"checking mutation fedcba9: kernel tests, body tests","since":"2026-11-30T10:00:00.000Z"}"#;
    std::fs::write(home.join(".teneral/status"), status).expect("the kernel's status");
    tmux.wait_for_all(&["  gate kernel tests, body tests …", "◆ mutating: gate kernel tests"]);
    append(
        home,
        &[
            r#"{"type":"generation.exited","status":"exit status 75","result":"exited"}"#,
            r#"{"type":"mutation.check","candidate":"fedcba9876543210","check":"kernel tests","result":"passed","seconds":12.5}"#,
        ],
    );
    let screen = tmux.wait_for_all(&[
        "  the body stepped aside for the gate",
        "  gate kernel tests ✓ passed 12s",
    ]);
    assert!(!screen.contains("the body ended"), "not a crash:\n{screen}");
    tmux.type_text("still there?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("no body runs now: your line is answered when the next generation is up");
}

#[test]
fn two_clients_see_each_others_lines() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let (a, b) = (talk_terminal(home, &[]), talk_terminal(home, &[]));
    a.wait_for("◆ resting");
    b.wait_for("◆ resting");
    for (from, n) in [(&a, 1), (&b, 2)] {
        from.type_text(&format!("line {n}"));
        from.keys(&["Enter"]);
    }
    // The body takes each line in, as it would: journaled with its file's name.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut files = owner_files(home, "txt");
    while files.len() < 2 {
        assert!(Instant::now() < deadline, "two lines were not sent: {files:?}");
        std::thread::sleep(Duration::from_millis(50));
        files = owner_files(home, "txt");
    }
    let mut events = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a line");
        let name = f.file_name().and_then(|n| n.to_str()).expect("a name").to_owned();
        events.push(format!(r#"{{"type":"owner.line","file":"{name}","text":"{text}"}}"#));
    }
    events.sort_by_key(|e| e.contains("line 2"));
    append(home, &events.iter().map(String::as_str).collect::<Vec<_>>());
    for (me, mine, theirs) in [(&a, "› line 1", "› line 2"), (&b, "› line 2", "› line 1")] {
        let screen = me.wait_for_all(&[mine, theirs]);
        let lines: Vec<&str> = screen.lines().collect();
        let at = |t: &str| lines.iter().position(|l| l.starts_with(t)).expect("shown");
        assert_ne!(lines.get(at(mine) + 1), Some(&"  (typed in another terminal)"), "{screen}");
        assert_eq!(lines.get(at(theirs) + 1), Some(&"  (typed in another terminal)"), "{screen}");
    }
}

#[test]
fn a_resize_redraws_the_live_region_and_history_prints_again() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    assert!(tmux.run(&["resize-window", "-t", "0", "-x", "50", "-y", "20"]).status.success());
    tmux.type_text("narrow");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = tmux.run(&["capture-pane", "-p", "-t", "0"]);
        let screen = String::from_utf8_lossy(&out.stdout).into_owned();
        let rule = screen.lines().rev().find(|l| l.starts_with("──")).unwrap_or_default();
        if screen.contains("› narrow") && rule.chars().count() == 50 {
            break;
        }
        assert!(Instant::now() < deadline, "the box was not drawn 50 wide:\n{screen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.keys(&["C-u"]);
    tmux.type_text("/history");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["earlier conversation: 5 events", "end of the earlier conversation"]);
}

#[test]
fn a_vanished_terminal_is_noticed_within_half_a_minute() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    let pid = client_pid(&tmux);
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let gone = Instant::now();
    assert!(tmux.run(&["kill-server"]).status.success());
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break; // ended, not yet reaped
        }
        assert!(gone.elapsed() < Duration::from_secs(30), "teneralctl {pid} still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn true_colour_with_256_and_16_colour_fallbacks() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    // The owner's colour: 24-bit, index 31 of the palette, or basic cyan
    // (which tmux writes as index 6).
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (&[("COLORTERM", "truecolor"), ("TERM", "xterm-256color")], "38;2;0;135;175m", &["38;5;"]),
        (&[("TERM", "xterm-256color")], "38;5;31m", &["38;2;"]),
        (&[("TERM", "xterm")], "38;5;6m", &["38;2;", "38;5;31m"]),
    ];
    for (env, want, not) in cases {
        let tmux = talk_terminal(dir.path(), env);
        tmux.wait_for("See the docs");
        let screen = tmux.screen(true);
        assert!(screen.contains(want) && has_colour(&screen), "{env:?}: {screen}");
        for n in *not {
            assert!(!screen.contains(n), "{env:?} has {n}: {screen}");
        }
    }
}

#[test]
fn the_plain_client_prints_the_history_again() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal_with(dir.path(), &[], &["--plain"]);
    tmux.wait_for("/help lists the commands");
    tmux.type_text("/history");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("[end of the earlier conversation]");
    assert_eq!(screen.matches("› What are you working on?").count(), 2, "{screen}");
}
