//! What of the journal goes into a request.

use std::fs;

use serde_json::{json, Map, Value};
use teneral_body::context::{Conversation, TooBig, INTERRUPTED, NO_RESULT};
use teneral_body::journal;
use teneral_body::model::Item;

use crate::common::*;

fn event(value: Value) -> Map<String, Value> {
    value.as_object().expect("an event is a JSON object").clone()
}

/// Checks that no call goes without its result and no result without its call.
fn whole(items: &[Item]) {
    let calls: Vec<&str> = items
        .iter()
        .filter_map(|i| if let Item::Call(c) = i { Some(c.id.as_str()) } else { None })
        .collect();
    let outputs: Vec<&str> = items
        .iter()
        .filter_map(|i| if let Item::Output { id, .. } = i { Some(id.as_str()) } else { None })
        .collect();
    assert_eq!(calls, outputs, "calls and results go together: {items:?}");
}

fn conversation() -> Conversation {
    let mut c = Conversation::new(1_000_000);
    for e in [
        json!({"type": "owner.line", "file": "1.txt", "text": "a".repeat(100)}),
        json!({"type": "reply", "text": "b".repeat(100)}),
        json!({"type": "owner.line", "file": "2.txt", "text": "go"}),
        json!({"type": "usage", "input_tokens": 1, "output_tokens": 2}),
        json!({"type": "reply", "text": "looking"}),
        json!({"type": "tool.call", "id": "c1", "name": "bash", "input": {"command": "ls"}, "index": 0}),
        json!({"type": "tool.result", "id": "c1", "output": "x".repeat(200)}),
        json!({"type": "note", "kind": "k", "data": "secret note"}),
        json!({"type": "tool.call", "id": "c2", "name": "read_file", "input": {"path": "f"}, "index": 1}),
        json!({"type": "tool.result", "id": "c2", "output": "y".repeat(200)}),
        json!({"type": "reply", "text": "done"}),
        json!({"type": "turn.ended"}),
    ] {
        c.add(&event(e));
    }
    c
}

#[test]
fn the_newest_is_kept_and_a_call_never_goes_without_its_result() {
    let mut c = conversation();
    let mark = c.mark();
    c.add(&event(json!({"type": "owner.line", "file": "3.txt", "text": "new"})));

    let all = c.items(1_000_000, mark).unwrap();
    whole(&all);
    assert_eq!(all.len(), 10, "{all:?}");
    assert_eq!(all[0], Item::Owner("a".repeat(100)));
    assert_eq!(all[2], Item::Owner("go".into()));
    assert_eq!(all[3], Item::Assistant("looking".into()));
    assert!(
        matches!(&all[4], Item::Call(call) if call.id == "c1" && call.arguments == r#"{"command":"ls"}"#)
    );
    assert!(matches!(&all[5], Item::Call(call) if call.id == "c2"));
    assert_eq!(all[6], Item::Output { id: "c1".into(), text: "x".repeat(200) });
    assert!(!format!("{all:?}").contains("secret note"), "notes are passed over");

    // Room for the last words and the line, not for the answer with its calls.
    let small = c.items(100, mark).unwrap();
    assert_eq!(small, [Item::Assistant("done".into()), Item::Owner("new".into())]);
    // Room for the calls too: they come whole, with their results.
    let middle = c.items(500, mark).unwrap();
    whole(&middle);
    assert_eq!(middle[..2], [Item::Owner("go".into()), Item::Assistant("looking".into())]);
    assert_eq!(middle.last().unwrap(), &Item::Owner("new".into()));

    assert_eq!(c.items(2, mark), Err(TooBig { needed: 3, room: 2 }));
}

#[test]
fn a_call_the_body_never_finished_gets_a_result_and_an_interrupt_is_shown() {
    let mut c = Conversation::new(1_000_000);
    c.add(&event(json!({"type": "owner.line", "file": "1.txt", "text": "go"})));
    c.add(&event(
        json!({"type": "tool.call", "id": "c1", "name": "bash", "input": {}, "index": 0}),
    ));
    c.add(&event(json!({"type": "turn.interrupted"})));
    let items = c.items(10_000, c.mark()).unwrap();
    whole(&items);
    assert_eq!(items[2], Item::Output { id: "c1".into(), text: NO_RESULT.into() });
    assert_eq!(items[3], Item::User(INTERRUPTED.into()));
}

#[test]
fn old_names_are_read_as_new_and_a_torn_last_line_is_passed_over() {
    let dir = TempDir::new();
    fs::create_dir_all(dir.0.join("memory")).unwrap();
    let lines = [
        r#"{"type":"owner.line","ts":"t","seq":1,"commit":"c","file":"1.txt","text":"hi"}"#,
        r#"{"type":"molt.rejected","ts":"t","seq":2,"commit":"c","text":"tests failed"}"#,
        r#"{"type":"something.new","ts":"t","seq":3,"commit":"c","text":"unknown"}"#,
        r#"{"type":"reply","ts":"t","seq":4,"commit":"c","te"#,
    ];
    fs::write(dir.0.join(journal::PATH), lines.join("\n")).unwrap();
    let mut kinds = Vec::new();
    let mut c = Conversation::new(1_000_000);
    journal::read(&dir.0, |e| {
        kinds.push(e["type"].as_str().unwrap().to_owned());
        c.add(e);
    })
    .unwrap();
    assert_eq!(kinds, ["owner.line", "mutation.rejected", "something.new"]);
    assert!(c.has_message);
    let items = c.items(10_000, c.mark()).unwrap();
    assert_eq!(
        items,
        [Item::Owner("hi".into()), Item::User("[kernel: mutation.rejected] tests failed".into())]
    );
    assert!(!Conversation::new(10).has_message);
}

#[test]
fn a_promotion_and_a_send_back_are_told_as_kernel_messages_to_answer() {
    let (from, to) = ("a".repeat(40), "b".repeat(40));
    let table = [
        ("mutation.accepted", "passed every check: you now run bbbb", "(promoted from aaaa"),
        ("generation.sentback", "Your owner sent you back from aaaa", "to bbbb"),
    ];
    for (kind, says, also) in table {
        let mut c = Conversation::new(1_000_000);
        let done = json!({"type": "turn.ended"});
        c.add(done.as_object().unwrap());
        assert!(!c.unanswered);
        let event = json!({"type": kind, "ts": "t", "seq": 9, "commit": "c", "from": from, "to": to, "by": "owner"});
        c.add(event.as_object().unwrap());
        assert!(c.unanswered, "{kind} waits for an answer");
        let items = c.items(10_000, 0).unwrap();
        let Some(Item::User(text)) = items.last() else { panic!("{items:?}") };
        assert!(text.starts_with(&format!("[kernel: {kind}] ")), "{text}");
        assert!(text.contains(says) && text.contains(also), "{text}");
    }
}

#[test]
fn older_turns_give_way_to_fit_the_budget() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"reply":"ok"}"#]);
    let mut seeded = Vec::new();
    for n in 0..20 {
        seeded.push(json!({"type": "owner.line", "file": "x.txt", "text": format!("line {n:02} {}", "p".repeat(500))}));
        seeded.push(json!({"type": "reply", "text": format!("reply {n:02} {}", "q".repeat(500))}));
        seeded.push(json!({"type": "turn.ended"}));
    }
    rig.seed_journal(&seeded);
    rig.set_env("TENERAL_CONTEXT_CHARS", "8000");
    rig.start_ready();
    rig.say(1, "now");
    rig.wait_turns(21);
    let request = body_of(&rig.requests()[0]);
    let messages = request["messages"].as_array().unwrap();
    let chars: usize =
        messages.iter().map(|m| m["content"].as_str().unwrap().chars().count()).sum();
    assert!(chars <= 8000, "{chars} characters sent");
    let text = request.to_string();
    assert!(text.contains("reply 19") && text.contains("line 19"), "the newest are kept");
    assert!(!text.contains("line 00") && !text.contains("reply 10"), "the oldest give way");
    assert_eq!(messages.last().unwrap()["content"], "now");
}

#[test]
fn a_turn_too_big_for_the_context_is_told_not_sent() {
    let mut rig = Rig::new(Wire::Responses, &[]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.set_env("TENERAL_CONTEXT_CHARS", "3000");
    rig.start_ready();
    rig.say(1, &"z".repeat(5000));
    let journal = rig.wait_turns(1);
    let reply = *of(&journal, "reply").last().unwrap();
    assert_eq!(reply["from"], "body", "{}", rig.report());
    let text = reply["text"].as_str().unwrap();
    assert!(
        text.contains("needs 5000 characters") && text.contains("TENERAL_CONTEXT_CHARS=3000"),
        "{text}"
    );
    assert!(rig.requests().is_empty(), "nothing is sent to the model");
    assert!(
        rig.kernel_log().contains("TENERAL_CONTEXT_CHARS=3000"),
        "and the kernel's log says it"
    );
}

#[test]
fn what_the_kernel_wrote_while_the_body_was_down_is_answered_at_start() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"expect":"mutation.rejected","reply":"I see why."}"#]);
    rig.seed_journal(&[
        json!({"type": "owner.line", "file": "1.txt", "text": "improve yourself"}),
        json!({"type": "reply", "text": "trying"}),
        json!({"type": "turn.ended"}),
        json!({"type": "mutation.rejected", "check": "tests", "output": "2 failed"}),
        json!({"type": "generation.started"}),
    ]);
    rig.start();
    let journal = rig.wait_turns(2);
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "I see why.", "{}", rig.report());
    let request = body_of(&rig.requests()[0]);
    let last = request["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    let text = last["content"].as_str().unwrap();
    assert!(
        text.starts_with("[kernel: mutation.rejected] ") && text.contains("2 failed"),
        "{text}"
    );

    // Once answered, a restart does not answer it again.
    let (status, _) = rig.terminate();
    assert_eq!(status.code(), Some(0));
    rig.start();
    rig.wait_for("the second start", |j| count(j, "generation.ready") == 2);
    assert!(!rig.wait_rest().is_empty(), "the body ended: {}", rig.report());
    assert_eq!(rig.requests().len(), 1, "{}", rig.report());
}

#[test]
fn a_turn_left_unfinished_is_taken_up_at_the_next_start() {
    let mut rig = Rig::new(Wire::Responses, &[r#"{"expect":"no result","reply":"Where was I?"}"#]);
    rig.seed_journal(&[
        json!({"type": "owner.line", "file": "1.txt", "text": "count the files"}),
        json!({"type": "tool.call", "id": "call_9", "name": "bash", "input": {"command": "ls"}, "index": 0}),
        json!({"type": "generation.exited", "status": "killed by signal 9"}),
    ]);
    rig.start();
    let journal = rig.wait_turns(1);
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "Where was I?", "{}", rig.report());
    let request = body_of(&rig.requests()[0]);
    let input = request["input"].as_array().unwrap();
    assert_eq!(
        input.last().unwrap(),
        &json!({"type": "function_call_output", "call_id": "call_9", "output": NO_RESULT})
    );
}
