//! The sensors other than the owner: the inbox and the clock.

use std::fs;

use serde_json::{json, Value};

use crate::common::*;

const GOOD: &str = r#"{"v":1,"id":"note-1","from":"script","to":"anyone","replyTo":null,"ts":"2026-11-11T12:00:00Z","hops":0,"text":"hello from a script"}"#;

#[test]
fn a_valid_envelope_wakes_the_agent_and_an_invalid_one_is_set_aside() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"expect":"hello from a script","reply":"noted"}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.envelope(
        "bad.json",
        r#"{"v":1,"id":"x","from":"s","to":"a","replyTo":null,"ts":"t","hops":"many","text":"hi"}"#,
    );
    rig.envelope("good.json", GOOD);
    rig.envelope("ignored.txt", "not an envelope name");
    let journal = rig.wait_turns(1);
    let stimuli = of(&journal, "stimulus");
    assert_eq!(stimuli.len(), 1, "{}", rig.report());
    assert_eq!(stimuli[0]["source"], "inbox");
    assert_eq!(stimuli[0]["text"], "hello from a script");
    assert_eq!(stimuli[0]["from"], "script");
    assert_eq!(stimuli[0]["envelope"], serde_json::from_str::<Value>(GOOD).unwrap());
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "noted");

    let inbox = rig.home.join("inbox");
    assert!(inbox.join("seen/good.json").exists() && !inbox.join("good.json").exists());
    assert!(inbox.join("rejected/bad.json").exists() && !inbox.join("bad.json").exists());
    let reason = fs::read_to_string(inbox.join("rejected/bad.json.reason")).unwrap();
    assert!(reason.contains("\"hops\" must be a whole number"), "{reason}");
    assert!(inbox.join("ignored.txt").exists(), "only .json names are read");

    let request = body_of(&rig.requests()[0]);
    let shown = request["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(shown["role"], "user");
    let text = shown["content"].as_str().unwrap();
    assert!(text.contains("It is not from your owner") && text.contains("untrusted"), "{text}");
    assert!(text.contains("from: script") && text.ends_with("hello from a script"), "{text}");
}

#[test]
fn envelopes_waiting_at_start_are_taken_in() {
    let mut rig = Rig::new(Wire::Responses, &[r#"{"reply":"seen"}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.envelope("waiting.json", GOOD);
    rig.start();
    let journal = rig.wait_turns(1);
    assert_eq!(of(&journal, "stimulus")[0]["source"], "inbox", "{}", rig.report());
    assert!(rig.home.join("inbox/seen/waiting.json").exists());
}

#[test]
fn the_clock_is_silent_until_the_soul_is_written_then_ticks() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"reply":"tick noted"}"#]);
    rig.set_env("TENERAL_HEARTBEAT_MINUTES", "0.001"); // 60 ms
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.wait_rest();
    // At rest, the main thread sleeps again after each tick of the clock.
    rig.wait_main_sleeps(5);
    assert!(!has(&rig.journal(), "stimulus"), "the clock spoke before the soul existed");
    fs::create_dir_all(rig.home.join("soul")).unwrap();
    fs::write(rig.home.join("soul/SOUL.md"), "I am.").unwrap();
    let journal = rig.wait_turns(1);
    let stimulus = of(&journal, "stimulus")[0];
    assert_eq!(stimulus["source"], "clock");
    assert!(stimulus["text"].as_str().unwrap().starts_with("The clock woke you at "));
    let request = body_of(&rig.requests()[0]);
    let last = request["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].as_str().unwrap().starts_with("[clock] The clock woke you"));
}

#[test]
fn the_clock_is_off_when_told() {
    for (minutes, clock) in [("0.005", "off"), ("0", "on")] {
        let mut rig = Rig::new(Wire::Chat, &[]);
        rig.set_env("TENERAL_HEARTBEAT_MINUTES", minutes);
        rig.set_env("TENERAL_CLOCK", clock);
        rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
        fs::create_dir_all(rig.home.join("soul")).unwrap();
        fs::write(rig.home.join("soul/SOUL.md"), "I am.").unwrap();
        rig.start_ready();
        // A clock would show as a deadline on the main loop's wait.
        let main = rig.wait_rest().into_iter().next().expect("the body is still running");
        assert!(!main.has_deadline(), "{minutes} {clock}: a clock is set: {main:?}");
        assert!(!has(&rig.journal(), "stimulus"), "{minutes} {clock}: {}", rig.report());
    }
}
