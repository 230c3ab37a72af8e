//! The owner's interrupt: what it stops, what the journal says, and what
//! the model is shown next.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

const LONG_BASH: &str = r#"{"tool_calls":[
    {"name":"bash","arguments":{"command":"echo $$ > sh.pid; sleep 300 & echo $! > bg.pid; sleep 301"}},
    {"name":"read_file","arguments":{"path":"sh.pid"}}]}"#;

fn pid_in(rig: &Rig, file: &str) -> Option<i32> {
    fs::read_to_string(rig.home.join(file)).ok()?.trim().parse().ok()
}

#[test]
fn an_interrupt_kills_the_command_group_and_ends_the_turn() {
    for wire in [Wire::Chat, Wire::Responses] {
        let script = [LONG_BASH.replace('\n', ""), r#"{"expect":"next","reply":"ok"}"#.to_owned()];
        let script: Vec<&str> = script.iter().map(String::as_str).collect();
        let mut rig = Rig::new(wire, &script);
        rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
        rig.start_ready();
        rig.say(1, "go");
        let (shell, background) = wait_until(WAIT, "the command to start", || {
            Some((pid_in(&rig, "sh.pid")?, pid_in(&rig, "bg.pid")?))
        });
        assert!(alive(shell) && alive(background));
        let asked = Instant::now();
        rig.interrupt(2);
        let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
        assert!(asked.elapsed() < Duration::from_secs(3), "took {:?}", asked.elapsed());
        wait_until(Duration::from_secs(5), "the group to be gone", || {
            (!alive(shell) && !alive(background)).then_some(())
        });
        assert!(!rig.home.join(".teneral/owner/0002.interrupt").exists(), "the body removes it");

        let turn: Vec<&Value> = journal.iter().skip_while(|e| e["type"] != "owner.line").collect();
        let kinds: Vec<&str> = turn.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "owner.line",
                "usage",
                "tool.call",
                "tool.result",
                "tool.call",
                "tool.result",
                "turn.interrupted"
            ],
            "{}",
            rig.report()
        );
        assert_eq!((&turn[2]["name"], &turn[2]["index"]), (&json!("bash"), &json!(0)));
        let cut = turn[3]["output"].as_str().unwrap();
        assert!(cut.starts_with("[interrupted]") && turn[3]["error"] == true, "{cut}");
        assert_eq!((&turn[4]["name"], &turn[4]["index"]), (&json!("read_file"), &json!(1)));
        assert_eq!(turn[5]["id"], turn[4]["id"]);
        assert!(turn[5]["output"].as_str().unwrap().starts_with("[not started]"));

        // The agent waits; the next line shows it that its owner interrupted it.
        rig.say(3, "next");
        rig.wait_turns(2);
        let request = body_of(&rig.requests()[1]);
        let texts = user_texts(wire, &request);
        let n = texts.len();
        assert!(texts[n - 2].contains("Your owner interrupted you here"), "{texts:?}");
        assert_eq!(texts[n - 1], "next");
    }
}

/// The user messages of a request, in order.
fn user_texts(wire: Wire, request: &Value) -> Vec<String> {
    let (list, text) = match wire {
        Wire::Chat => ("messages", "/content"),
        Wire::Responses => ("input", "/content/0/text"),
    };
    request[list]
        .as_array()
        .expect("a request holds a list of messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            m.pointer(text).and_then(Value::as_str).expect("a user message has text").to_owned()
        })
        .collect()
}

#[test]
fn an_interrupt_at_rest_does_nothing_and_is_not_kept() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"reply":"one"}"#, r#"{"reply":"two"}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "first");
    rig.wait_turns(1);
    rig.interrupt(2);
    let file = rig.home.join(".teneral/owner/0002.interrupt");
    wait_until(WAIT, "the interrupt file to be used up", || (!file.exists()).then_some(()));
    rig.say(3, "second");
    let journal = rig.wait_turns(2);
    assert!(!has(&journal, "turn.interrupted"), "{}", rig.report());
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "two");
    assert!(!rig.requests()[1].to_string().contains("interrupted you"));
}

#[test]
fn an_interrupt_cancels_the_request_to_the_model() {
    let mut rig = Rig::new(Wire::Responses, &[r#"{"delay_ms":15000,"reply":"too late"}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "think hard");
    rig.wait_for("the line", |j| has(j, "owner.line"));
    rig.wait_asking_model();
    let asked = Instant::now();
    rig.interrupt(2);
    let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
    assert!(asked.elapsed() < Duration::from_secs(3), "took {:?}", asked.elapsed());
    let turn: Vec<&str> = types(&journal).into_iter().skip_while(|k| *k != "owner.line").collect();
    assert_eq!(turn, ["owner.line", "turn.interrupted"], "{}", rig.report());
}

#[test]
fn sigterm_during_a_command_kills_it_and_exits_zero() {
    let mut rig = Rig::new(Wire::Chat, &[&LONG_BASH.replace('\n', "")]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "go");
    let background = wait_until(WAIT, "the command to start", || pid_in(&rig, "bg.pid"));
    let (status, took) = rig.terminate();
    assert_eq!(status.code(), Some(0), "{}", rig.report());
    assert!(took < Duration::from_secs(2), "took {took:?}");
    wait_until(Duration::from_secs(5), "the command to be gone", || {
        (!alive(background)).then_some(())
    });
}

#[test]
fn a_tool_that_does_not_stop_is_left_behind_after_two_seconds() {
    // Opening a FIFO nobody writes to blocks for good: a tool that cannot stop.
    let mut rig = Rig::new(
        Wire::Chat,
        &[
            r#"{"tool_calls":[{"name":"read_file","arguments":{"path":"stuck.fifo"}}]}"#,
            r#"{"reply":"back"}"#,
        ],
    );
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    let made =
        std::process::Command::new("mkfifo").arg(rig.home.join("stuck.fifo")).status().unwrap();
    assert!(made.success(), "mkfifo is needed for this test");
    rig.start_ready();
    rig.say(1, "read it");
    rig.wait_for("the call", |j| has(j, "tool.call"));
    rig.wait_opening();
    let asked = Instant::now();
    rig.interrupt(2);
    let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
    let took = asked.elapsed();
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(4), "took {took:?}");
    let result = of(&journal, "tool.result")[0]["output"].as_str().unwrap().to_owned();
    assert!(result.starts_with("[interrupted]") && result.contains("left behind"), "{result}");
    // The body goes on.
    rig.say(3, "still there?");
    let journal = rig.wait_turns(2);
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "back");
}
