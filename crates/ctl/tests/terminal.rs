//! The full client in a real terminal: tmux runs `teneralctl talk` against a
//! journal the test writes, `send-keys` types and `capture-pane` reads the
//! screen. Each test has a tmux server of its own (`tmux -L`), killed when
//! the test ends.
//!
//! They are system tests: they need tmux (`scripts/deps` installs it) and
//! run when `TENERAL_SYSTEM_TESTS` is set, as `scripts/test` sets it. A
//! gate's check of a species commit leaves them out, as it leaves out the
//! kernel's other system tests.
#![allow(clippy::expect_used, clippy::panic)]
mod common;

use common::*;

#[test]
fn the_panel_a_markdown_reply_and_a_tool_line() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[]);
    let wants = [
        "model        gpt-test",
        "› What are you working on?",
        "▪ bash  command: ls -la ✓ 0.4s",
        "● Plan",
        "  I am reading my soul.",
        "  • one",
        "  │ a quote",
        "  See the docs (https://example.com/docs).",
        "◆ not running",
    ];
    let screen = tmux.wait_for_all(&wants);
    let code = screen.lines().find(|l| l.starts_with("  fn main()")).unwrap_or_default();
    assert!(code.ends_with('…') && code.chars().count() == 80, "cut at the edge: {code:?}");
    assert!(!screen.contains("do-not-show"), "the key is never shown:\n{screen}");
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "the code block is cut at the edge: {line:?}");
    }
}

#[test]
fn the_command_list_filters_and_completes() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    tmux.type_text("/");
    // The list is drawn top down: its second row means the first is there.
    let screen = tmux.wait_for("/accept [commit]");
    assert!(screen.contains("▸ /stop"), "{screen}");
    tmux.type_text("he");
    let screen = tmux.wait_for("▸ /help");
    assert!(!screen.contains("/stop"), "fewer with each letter:\n{screen}");
    tmux.keys(&["BSpace", "BSpace", "h"]);
    tmux.wait_for("▸ /history");
    tmux.keys(&["Down", "Tab"]);
    tmux.wait_for("› /help");
    tmux.keys(&["Enter"]);
    // The rows are printed one after the other, keys first: wait for a
    // command row, and the key rows are there.
    let screen = tmux.wait_for("/approve <commit>");
    assert!(screen.contains("Ctrl-L"), "/help prints the keys and the commands:\n{screen}");
    tmux.type_text("/ap");
    tmux.keys(&["Enter"]);
    tmux.wait_for("› /approve");
    assert!(owner_files(dir.path(), "txt").is_empty(), "nothing was sent");
}

#[test]
fn two_slashes_send_a_slash_line_and_an_unknown_command_is_refused() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    tmux.type_text("/hlep");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("not a command");
    assert!(screen.contains("/hlep is not a command and was not sent; the nearest is /help"));
    assert!(screen.contains("› /hlep"), "what was typed stays in the box:\n{screen}");
    assert!(owner_files(dir.path(), "txt").is_empty(), "nothing was sent");
    tmux.keys(&["C-u"]);
    tmux.type_text("//help me");
    tmux.keys(&["Enter"]);
    tmux.wait_for("your line waits");
    let sent = owner_files(dir.path(), "txt");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(std::fs::read_to_string(&sent[0]).expect("the line"), "/help me");
}

#[test]
fn no_color_and_an_ascii_locale() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let coloured = talk_terminal(dir.path(), &[]);
    coloured.wait_for("See the docs");
    assert!(has_colour(&coloured.screen(true)), "the control has colours");
    drop(coloured);

    let tmux = talk_terminal(dir.path(), &[("NO_COLOR", "1"), ("LANG", "C"), ("LC_ALL", "C")]);
    tmux.wait_for_all(&[
        "See the docs",
        "> What are you working on?",
        "* Plan",
        "- bash  command: ls -la ok 0.4s",
        "# not running",
    ]);
    assert!(!has_colour(&tmux.screen(true)), "NO_COLOR: {}", tmux.screen(true));
    tmux.type_text("/");
    tmux.wait_for("> /stop");
}

#[test]
fn hostile_text_is_shown_inert() {
    if !system_tests() {
        return;
    }
    let dir = individual(&[
        r#"{"type":"owner.line","file":"a.txt","text":"hello"}"#,
        r#"{"type":"reply","text":"safe\u001b]0;pwned-title\u0007 \u001b]52;c;cHduZWQ=\u0007clip \u001b[2J\u001b[Hclear \u001b]8;;http://evil.example\u001b\\link\u001b]8;;\u001b\\ \u009b31mc1"}"#,
        r#"{"type":"tool.call","id":"1","name":"ba\u001b[1Ash","input":{"command":"x\u001b]0;pwned-tool\u0007"}}"#,
        r#"{"type":"tool.result","id":"1","output":"boom\u001b]52;c;cHduZWQ=\u0007 \u001b[31mred","error":true}"#,
        r#"{"type":"stimulus","source":"inbox","from":"eve\u001b[2J","text":"hi\u001b]0;pwned-inbox\u0007"}"#,
        r#"{"type":"turn.ended"}"#,
    ]);
    let tmux = talk_terminal(dir.path(), &[]);
    let screen = tmux.wait_for("woken by a message from eve: hi");
    for want in [
        "● safe clip clear link c1",
        "▪ bash  command: x ✗ failed",
        "    boom red",
        "talking with Ada",
    ] {
        assert!(screen.contains(want), "{want:?} is not on the screen:\n{screen}");
    }
    let title = tmux.run(&["display-message", "-p", "-t", "0", "#{pane_title}"]);
    assert!(!String::from_utf8_lossy(&title.stdout).contains("pwned"), "{title:?}");
    let buffers = tmux.run(&["list-buffers"]);
    assert!(String::from_utf8_lossy(&buffers.stdout).trim().is_empty(), "no OSC 52: {buffers:?}");
    assert!(!tmux.screen(true).contains("evil.example"), "no hyperlink reached the terminal");
}

#[test]
fn leaving_leaves_the_conversation_in_the_scrollback() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    for leave in [&["C-d"][..], &["C-c"][..], &["/quit", "Enter"][..]] {
        let tmux = talk_terminal(dir.path(), &[]);
        tmux.wait_for("lists the commands");
        if leave[0].starts_with('/') {
            tmux.type_text(leave[0]);
            tmux.keys(&leave[1..]);
        } else {
            tmux.keys(leave);
        }
        let screen = tmux.wait_for("left; the agent goes on");
        assert!(screen.contains("● Plan"), "{screen}");
        assert!(!screen.contains("lists the commands"), "the live region is gone:\n{screen}");
    }
}

#[test]
fn new_events_are_printed_and_esc_interrupts_a_turn() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let tmux = talk_terminal(home, &[]);
    tmux.wait_for("◆ resting");
    tmux.keys(&["Escape"]);
    tmux.wait_for("there is no turn to stop now; nothing was sent");
    assert!(owner_files(home, "interrupt").is_empty());
    append(
        home,
        &[
            r#"{"type":"owner.line","file":"b.txt","text":"and now?"}"#,
            r#"{"type":"tool.call","id":"9","name":"sleep","input":{"seconds":60}}"#,
        ],
    );
    tmux.wait_for("› and now?");
    tmux.wait_for("running sleep");
    let screen = tmux.wait_for("esc to interrupt");
    assert!(screen.contains("(typed in another terminal)"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("interrupt sent");
    assert_eq!(owner_files(home, "interrupt").len(), 1, "one interrupt, through the owner channel");
    append(
        home,
        &[
            r#"{"type":"tool.result","id":"9","output":"[interrupted]"}"#,
            r#"{"type":"turn.interrupted"}"#,
        ],
    );
    tmux.wait_for("interrupted by you");
    tmux.wait_for("◆ resting");
}

/// An individual on the built-in stand-in: the panel names it as such, and
/// `/generations` shows on an 80-column terminal the mutation counts its
/// last row explains.
#[test]
fn the_stand_in_is_named_and_generations_show_their_mutations() {
    if !system_tests() {
        return;
    }
    let dir = individual(&[
        r#"{"type":"generation.started","pid":8}"#,
        r#"{"type":"generation.ready"}"#,
        r#"{"type":"owner.line","file":"a.txt","text":"change yourself"}"#,
        r#"{"type":"mutation.requested","candidate":"fedcba9876543210fedcba9876543210fedcba98"}"#,
        r#"{"type":"reply","text":"asked"}"#,
        r#"{"type":"turn.ended"}"#,
        r#"{"type":"mutation.rejected","candidate":"fedcba9876543210fedcba9876543210fedcba98","check":"tests","output":"1 failed"}"#,
    ]);
    std::fs::write(dir.path().join(".env"), "TENERAL_PROVIDER=standin\n").expect("settings");
    let tmux = talk_terminal(dir.path(), &[]);
    tmux.wait_for_all(&["model        standin (built in)", "lists the commands"]);
    tmux.enter("/generations");
    let screen = tmux.wait_for_all(&["mutations 1/0/1", "mutations: asked/accepted/rejected"]);
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "a row runs off the edge: {line:?}");
    }
}
