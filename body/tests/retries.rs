//! Retries of a model request: the schedule, the reasons in the kernel's
//! log, giving up on an interrupt, and failures not worth retrying.
//! `TENERAL_TEST_RETRY_SCALE` shortens the waits (0.0001: 10 s is 1 ms).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

fn retry_lines(rig: &Rig) -> Vec<String> {
    rig.kernel_log().lines().filter(|l| l.contains("trying again in")).map(str::to_owned).collect()
}

#[test]
fn retries_follow_the_schedule_and_then_answer() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[
            r#"{"error":{"status":429,"message":"slow down"}}"#,
            r#"{"error":{"status":503,"message":"busy"}}"#,
            r#"{"error":{"status":500,"message":"oops"}}"#,
            r#"{"error":{"status":502,"message":"gateway"}}"#,
            r#"{"reply":"at last"}"#,
        ],
    );
    rig.set_env("TENERAL_TEST_RETRY_SCALE", "0.0001");
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "hello");
    let journal = rig.wait_turns(1);
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "at last", "{}", rig.report());
    assert_eq!(rig.requests().len(), 5);
    let lines = retry_lines(&rig);
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (line, (wait, reason)) in lines.iter().zip([
        ("in 0.001 s", "HTTP 429: slow down"),
        ("in 0.006 s", "HTTP 503: busy"),
        ("in 0.030 s", "HTTP 500: oops"),
        ("in 0.090 s", "HTTP 502: gateway"),
    ]) {
        assert!(line.contains(wait) && line.contains(reason), "{line}");
    }
    let retries = of(&journal, "model.retry");
    let seen: Vec<_> = retries
        .iter()
        .map(|e| (e["retry"].clone(), e["status"].clone(), e["seconds"].clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (json!(1), json!(429), json!(0.001)),
            (json!(2), json!(503), json!(0.006)),
            (json!(3), json!(500), json!(0.03)),
            (json!(4), json!(502), json!(0.09)),
        ],
        "{}",
        rig.report()
    );
    assert_eq!(retries[0]["message"], "HTTP 429: slow down");
    let last = body_of(&rig.requests()[4]).to_string();
    assert!(!last.contains("slow down"), "a retry is the owner's to see, not the model's: {last}");
}

#[test]
fn an_interrupt_gives_up_a_turn_waiting_to_retry() {
    let mut rig = Rig::new(Wire::Responses, &[r#"{"error":{"status":503,"message":"busy"}}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "hello");
    wait_until(WAIT, "the retry to be logged", || {
        retry_lines(&rig).iter().any(|l| l.contains("in 10.000 s")).then_some(())
    });
    let asked = Instant::now();
    rig.interrupt(2);
    let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
    assert!(asked.elapsed() < Duration::from_secs(3), "took {:?}", asked.elapsed());
    assert_eq!(count(&journal, "reply"), 1, "only the seeded reply: {}", rig.report());
    assert_eq!(rig.requests().len(), 1, "no request after the interrupt");
}

#[test]
fn an_unreachable_model_is_tried_again() {
    let mut rig = Rig::new(Wire::Chat, &[]);
    rig.set_env("TENERAL_TEST_RETRY_SCALE", "0.001");
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.stop_model();
    rig.start_ready();
    rig.say(1, "anyone there?");
    wait_until(WAIT, "three retries", || {
        let lines = retry_lines(&rig);
        (lines.len() >= 3 && lines.iter().all(|l| l.contains("could not be reached"))).then_some(())
    });
    let journal = rig.journal();
    let first = of(&journal, "model.retry")[0];
    assert!(first["message"].as_str().unwrap().contains("could not be reached"), "{first}");
    assert_eq!(first.get("status"), None, "no answer, no status: {first}");
    rig.interrupt(2);
    let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
    assert_eq!(count(&journal, "reply"), 1, "only the seeded reply: {}", rig.report());
}

#[test]
fn a_refused_request_is_told_to_the_owner_in_the_bodys_words() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[
            r#"{"error":{"status":400,"message":"that model does not exist"}}"#,
            r#"{"reply":"fine"}"#,
        ],
    );
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "hello");
    let journal = rig.wait_turns(1);
    let reply = (*of(&journal, "reply").last().unwrap()).clone();
    assert_eq!(reply["from"], "body", "{}", rig.report());
    let text = reply["text"].as_str().unwrap();
    assert!(text.contains("HTTP 400: that model does not exist"), "{text}");
    assert_eq!(rig.requests().len(), 1, "a refusal is not retried");
    assert!(retry_lines(&rig).is_empty());
    // The model later sees it as the body's words, not its own.
    rig.say(2, "again");
    rig.wait_turns(2);
    let request = body_of(&rig.requests()[1]);
    let messages = request["messages"].as_array().unwrap();
    let told =
        messages.iter().find(|m| m["content"].as_str().is_some_and(|c| c.contains("HTTP 400")));
    assert_eq!(told.unwrap()["role"], "user");
}
