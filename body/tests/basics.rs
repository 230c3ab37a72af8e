//! Stage one: start, birth, owner lines, replies, stopping.

use std::fs;
use std::os::unix::net::UnixListener;
use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

const LETTER: &str = "Dear newborn: read your code, then ask who you should be.\n";

#[test]
fn birth_letter_starts_the_first_turn() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[r#"{"reply":"Hello. I have read my code.","reasoning":"look first"}"#],
    );
    fs::write(rig.home.join("BIRTH.md"), LETTER).unwrap();
    fs::create_dir_all(rig.home.join("soul")).unwrap();
    fs::write(rig.home.join("soul/SOUL.md"), "My name is Wren.").unwrap();
    rig.start();
    let journal = rig.wait_turns(1);
    assert_eq!(
        types(&journal),
        ["generation.ready", "birth", "reasoning", "usage", "reply", "turn.ended"],
        "{}",
        rig.report()
    );
    assert_eq!(journal[1]["text"], LETTER);
    assert_eq!(journal[2]["text"], "look first");
    assert_eq!(journal[4]["text"], "Hello. I have read my code.");
    assert!(journal[3]["input_tokens"].is_u64() && journal[3]["output_tokens"].is_u64());
    for event in &journal {
        assert_eq!(event["commit"], COMMIT, "every event is stamped by the kernel");
    }

    let requests = rig.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["path"], "/v1/chat/completions");
    let body = body_of(&requests[0]);
    assert_eq!(body["model"], "standin-model");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("===== soul/SOUL.md =====\nMy name is Wren."), "{system}");
    assert_eq!(messages[1]["role"], "user");
    assert!(messages[1]["content"].as_str().unwrap().ends_with(LETTER));
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bash",
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "note",
            "send",
            "mutate",
            "offer"
        ]
    );
}

#[test]
fn waiting_lines_are_taken_in_oldest_first_and_answered() {
    let mut rig = Rig::new(Wire::Responses, &[r#"{"reply":"Both read."}"#]);
    rig.seed_journal(&[json!({"type": "reply", "text": "I was here before."})]);
    rig.say(2, "second");
    rig.say(1, "first");
    rig.owner_file(".hidden.txt", "not a line");
    rig.owner_file("notes.md", "not a line either");
    rig.start();
    let journal = rig.wait_turns(1);
    let lines = of(&journal, "owner.line");
    assert_eq!(lines.len(), 2, "{}", rig.report());
    assert_eq!((&lines[0]["file"], &lines[0]["text"]), (&json!("0001.txt"), &json!("first")));
    assert_eq!((&lines[1]["file"], &lines[1]["text"]), (&json!("0002.txt"), &json!("second")));
    assert!(!has(&journal, "birth"), "a journal with a message is not born again");
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], "Both read.");

    let owner = rig.home.join(".teneral/owner");
    assert!(!owner.join("0001.txt").exists() && !owner.join("0002.txt").exists());
    assert!(owner.join(".hidden.txt").exists() && owner.join("notes.md").exists());

    let requests = rig.requests();
    assert_eq!(requests.len(), 1, "both lines go into one turn");
    assert_eq!(requests[0]["path"], "/v1/responses");
    let input = body_of(&requests[0])["input"].clone();
    let texts: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["I was here before.", "first", "second"]);
}

#[test]
fn a_line_written_during_a_turn_waits_for_the_next() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[r#"{"delay_ms":800,"reply":"one"}"#, r#"{"expect":"during","reply":"two"}"#],
    );
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "before");
    rig.wait_for("the first line", |j| count(j, "owner.line") == 1);
    // The stand-in holds its answer 800 ms; a loaded machine may see only the end.
    wait_until(WAIT, "the request to the model, or its answer", || {
        (rig.asking_model() || has(&rig.journal(), "turn.ended")).then_some(())
    });
    rig.say(2, "during");
    let journal = rig.wait_turns(2);
    let replies: Vec<&Value> = of(&journal, "reply").into_iter().skip(1).collect();
    assert_eq!(
        replies.iter().map(|r| &r["text"]).collect::<Vec<_>>(),
        [&json!("one"), &json!("two")]
    );
    let kinds = types(&journal);
    let first_end = kinds.iter().position(|k| *k == "turn.ended").unwrap();
    let second_line = kinds.iter().rposition(|k| *k == "owner.line").unwrap();
    assert!(second_line > first_end, "the second line joined the first turn: {kinds:?}");
}

#[test]
fn sigterm_stops_an_idle_body_at_once_with_status_zero() {
    let mut rig = Rig::new(Wire::Chat, &[]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    let rest = rig.wait_rest();
    assert!(!rest.is_empty(), "the body ended by itself: {}", rig.report());
    let (status, took) = rig.terminate();
    assert_eq!(status.code(), Some(0), "{}", rig.report());
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn an_idle_body_is_not_woken() {
    let mut rig = Rig::new(Wire::Chat, &[]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    let rest = rig.wait_rest();
    // Only an event can wake a body at rest: no thread sleeps with a timer.
    let timed: Vec<&Thread> = rest.iter().filter(|t| t.has_deadline()).collect();
    assert!(timed.is_empty(), "threads that wake by themselves: {timed:?}\n{}", rig.report());
    let switches = |pid: u32| -> u64 {
        let mut total = 0;
        for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
            let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
            for line in status.lines().filter(|l| l.contains("ctxt_switches")) {
                total += line.split_whitespace().last().unwrap().parse::<u64>().unwrap();
            }
        }
        total
    };
    let before = switches(rig.body_pid());
    thread::sleep(Duration::from_millis(1500));
    let after = switches(rig.body_pid());
    assert_eq!(before, after, "the body woke up {} times while idle", after - before);
}

#[test]
fn a_missing_variable_is_named_and_exits_2() {
    let rig = Rig::new(Wire::Chat, &[]);
    let output = Command::new(env!("CARGO_BIN_EXE_teneral-body"))
        .env_clear()
        .envs(rig.env.iter().filter(|(k, _)| k != "TENERAL_EVENTS").map(|(k, v)| (k, v)))
        .current_dir(&rig.home)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("TENERAL_EVENTS is not set"), "{stderr}");
    assert!(rig.journal().is_empty(), "nothing may be journaled");
}

#[test]
fn a_line_that_is_not_utf8_is_logged_and_left() {
    let mut rig = Rig::new(Wire::Chat, &[]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    fs::write(rig.home.join(".teneral/owner/0001.txt"), b"\xff\xfe bad").unwrap();
    rig.start_ready();
    rig.say(2, "fine");
    let journal = rig.wait_turns(1);
    assert_eq!(count(&journal, "owner.line"), 1);
    assert!(rig.home.join(".teneral/owner/0001.txt").exists());
    wait_until(WAIT, "the log line", || {
        rig.kernel_log().contains("0001.txt is not UTF-8").then_some(())
    });
}

/// A kernel that refuses every owner line, to see what the body does then.
#[test]
fn a_refused_line_is_logged_and_the_file_left() {
    let rig = Rig::new(Wire::Chat, &[]);
    let socket = rig.dir.0.join("fake.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    rig.say(1, "hello");
    let mut env = rig.env.clone();
    env.retain(|(k, _)| k != "TENERAL_EVENTS");
    env.push(("TENERAL_EVENTS".into(), socket.to_str().unwrap().into()));
    let mut body = Command::new(env!("CARGO_BIN_EXE_teneral-body"))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&rig.home)
        .spawn()
        .unwrap();
    let (stream, _) = listener.accept().unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut seen = Vec::new();
    let mut logged = None;
    for seq in 1..20 {
        use std::io::{BufRead, Write};
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let event: Value = serde_json::from_str(&line).unwrap();
        let answer = match event["type"].as_str().unwrap() {
            "owner.line" => json!({"ok": false, "error": "not what the owner wrote"}),
            "log" => json!({"ok": true}),
            _ => json!({"ok": true, "seq": seq}),
        };
        writer.write_all(format!("{answer}\n").as_bytes()).unwrap();
        seen.push(event["type"].as_str().unwrap().to_owned());
        let text = event["text"].as_str().unwrap_or_default();
        if event["type"] == "log" && text.contains("0001.txt") {
            logged = Some(text.to_owned());
            break;
        }
    }
    kill(body.id(), libc::SIGKILL);
    let _ = body.wait();
    let logged = logged.unwrap_or_else(|| panic!("no log event; saw {seen:?}"));
    assert!(logged.contains("0001.txt") && logged.contains("not what the owner wrote"), "{logged}");
    assert!(rig.home.join(".teneral/owner/0001.txt").exists(), "the body never removes a line");
    assert!(!seen.contains(&"turn.ended".to_owned()), "a refused line wakes nothing: {seen:?}");
}
