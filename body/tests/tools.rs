//! The tools: through the whole body (journal and request shapes), and one
//! by one through the library where only the tool's own rule is at stake.

use std::fs;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use teneral_body::cancel::Cancel;
use teneral_body::events::Events;
use teneral_body::inbox;
use teneral_body::tools::{self, Outcome, ToolEnv};

use crate::common::*;

const TWO_CALLS: &str = r#"{"reply":"Let me look.","tool_calls":[
    {"name":"bash","arguments":{"command":"echo out; echo err >&2"}},
    {"name":"write_file","arguments":{"path":"notes/a.txt","content":"written"}}]}"#;

/// Runs two calls and returns the journal and the second request's body.
fn two_calls(wire: Wire) -> (Rig, Vec<Value>, Value) {
    let script = [TWO_CALLS.replace('\n', ""), r#"{"expect":"wrote","reply":"Done."}"#.to_owned()];
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    let mut rig = Rig::new(wire, &script);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "please work");
    let journal = rig.wait_turns(1);
    let requests = rig.requests();
    assert_eq!(requests.len(), 2, "{}", rig.report());
    let second = body_of(&requests[1]);
    (rig, journal, second)
}

/// The journal of two calls, the same for both protocols.
fn check_journal(rig: &Rig, journal: &[Value]) -> Vec<(String, String)> {
    let turn: Vec<&Value> = journal.iter().skip_while(|e| e["type"] != "owner.line").collect();
    let kinds: Vec<&str> = turn.iter().map(|e| e["type"].as_str().unwrap_or("?")).collect();
    assert_eq!(
        kinds,
        [
            "owner.line",
            "usage",
            "reply",
            "tool.call",
            "tool.result",
            "tool.call",
            "tool.result",
            "usage",
            "reply",
            "turn.ended"
        ],
        "{}",
        rig.report()
    );
    assert_eq!(turn[3]["name"], "bash");
    assert_eq!(turn[3]["input"], json!({"command": "echo out; echo err >&2"}));
    assert_eq!(turn[3]["index"], 0);
    assert_eq!(turn[4]["id"], turn[3]["id"]);
    assert_eq!(turn[4]["output"], "out\nerr\n");
    assert_eq!(turn[4]["error"], false);
    assert_eq!(turn[5]["name"], "write_file");
    assert_eq!(turn[5]["index"], 1);
    assert_eq!(turn[6]["id"], turn[5]["id"]);
    assert!(turn[6]["output"].as_str().is_some_and(|o| o.starts_with("wrote 7 bytes")));
    assert_eq!(fs::read_to_string(rig.home.join("notes/a.txt")).ok().as_deref(), Some("written"));
    [(3, 4), (5, 6)]
        .iter()
        .map(|&(c, r)| {
            (
                turn[c]["id"].as_str().unwrap_or_default().to_owned(),
                turn[r]["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn two_calls_and_their_results_go_back_in_the_chat_shape() {
    let (rig, journal, second) = two_calls(Wire::Chat);
    let results = check_journal(&rig, &journal);
    let messages = second["messages"].as_array().unwrap();
    let n = messages.len();
    // ... user, assistant with words and both calls, one tool message per call.
    assert_eq!(messages[n - 4], json!({"role": "user", "content": "please work"}));
    let assistant = &messages[n - 3];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "Let me look.");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (id, _)) in calls.iter().zip(&results) {
        assert_eq!(call["id"], id.as_str());
        assert_eq!(call["type"], "function");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert!(arguments.is_object());
    }
    assert_eq!(calls[0]["function"]["name"], "bash");
    assert_eq!(calls[1]["function"]["name"], "write_file");
    for (message, (id, output)) in messages[n - 2..].iter().zip(&results) {
        assert_eq!(message, &json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
}

#[test]
fn two_calls_and_their_results_go_back_in_the_responses_shape() {
    let (rig, journal, second) = two_calls(Wire::Responses);
    let results = check_journal(&rig, &journal);
    let input = second["input"].as_array().unwrap();
    let n = input.len();
    assert_eq!(
        input[n - 6],
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "please work"}]})
    );
    assert_eq!(
        input[n - 5],
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Let me look."}]})
    );
    for (item, (id, _)) in input[n - 4..n - 2].iter().zip(&results) {
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["call_id"], id.as_str());
        assert!(serde_json::from_str::<Value>(item["arguments"].as_str().unwrap())
            .unwrap()
            .is_object());
    }
    assert_eq!(input[n - 4]["name"], "bash");
    assert_eq!(input[n - 3]["name"], "write_file");
    for (item, (id, output)) in input[n - 2..].iter().zip(&results) {
        assert_eq!(item, &json!({"type": "function_call_output", "call_id": id, "output": output}));
    }
}

#[test]
fn a_note_is_journaled_and_a_refusal_comes_back_as_the_tools_error() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[
            r#"{"tool_calls":[{"name":"note","arguments":{"kind":"memory.v1","data":{"n":1}}},
                {"name":"note","arguments":{"kind":"Not Allowed!","data":null}}]}"#
                .replace('\n', "")
                .as_str(),
            r#"{"reply":"ok"}"#,
        ],
    );
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "take notes");
    let journal = rig.wait_turns(1);
    let notes = of(&journal, "note");
    assert_eq!(notes.len(), 1, "{}", rig.report());
    assert_eq!((&notes[0]["kind"], &notes[0]["data"]), (&json!("memory.v1"), &json!({"n": 1})));
    let results = of(&journal, "tool.result");
    assert_eq!(results[0]["error"], false);
    assert!(results[0]["output"].as_str().unwrap().starts_with("noted (seq "));
    assert_eq!(results[1]["error"], true);
    let refusal = results[1]["output"].as_str().unwrap();
    assert!(
        refusal.starts_with("the note was refused: ") && refusal.contains("Not Allowed!"),
        "{refusal}"
    );
    let second = body_of(&rig.requests()[1]);
    let tool_messages: Vec<&Value> =
        second["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
}

/// A tool environment over a socket nobody answers (the file tools never use it).
fn env(home: &Path) -> (ToolEnv, UnixStream) {
    let (ours, theirs) = UnixStream::pair().expect("a socket pair can be made");
    let env = ToolEnv {
        home: home.to_owned(),
        events: Arc::new(Events::over(ours).expect("the events take a fresh socket")),
        cancel: Arc::new(Cancel::new()),
        mutation: Arc::default(),
    };
    (env, theirs)
}

fn run(env: &ToolEnv, name: &str, args: Value) -> Outcome {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    tools::run(env, name, &args)
}

#[test]
fn edit_file_replaces_one_exact_passage_and_refuses_otherwise() {
    let dir = TempDir::new();
    let (env, _peer) = env(&dir.0);
    fs::write(dir.0.join("f.txt"), "alpha beta\nbeta gamma\n").unwrap();
    let absent = run(&env, "edit_file", json!({"path": "f.txt", "old": "delta", "new": "x"}));
    assert!(absent.error && absent.output.contains("is not in"), "{absent:?}");
    let twice = run(&env, "edit_file", json!({"path": "f.txt", "old": "beta", "new": "x"}));
    assert!(twice.error && twice.output.contains("occurs 2 times"), "{twice:?}");
    assert_eq!(fs::read_to_string(dir.0.join("f.txt")).unwrap(), "alpha beta\nbeta gamma\n");
    let once =
        run(&env, "edit_file", json!({"path": "f.txt", "old": "beta gamma", "new": "delta"}));
    assert!(!once.error, "{once:?}");
    assert_eq!(fs::read_to_string(dir.0.join("f.txt")).unwrap(), "alpha beta\ndelta\n");
    let missing = run(&env, "edit_file", json!({"path": "f.txt", "old": "alpha"}));
    assert_eq!(missing, Outcome { output: "\"new\" is missing".into(), error: true });
}

#[test]
fn read_write_and_list_files() {
    let dir = TempDir::new();
    let (env, _peer) = env(&dir.0);
    let wrote = run(&env, "write_file", json!({"path": "a/b/c.txt", "content": "hi"}));
    assert!(!wrote.error, "{wrote:?}");
    assert_eq!(run(&env, "read_file", json!({"path": "a/b/c.txt"})).output, "hi");
    let big = "x".repeat(tools::READ_MAX + 10);
    fs::write(dir.0.join("big.txt"), &big).unwrap();
    let read = run(&env, "read_file", json!({"path": "big.txt"}));
    assert!(read.output.contains("[cut: the file has"), "the cut is stated");
    assert!(read.output.len() < tools::READ_MAX + 300);
    fs::create_dir_all(dir.0.join(".git/objects")).unwrap();
    let list = run(&env, "list_files", json!({"depth": 3}));
    assert_eq!(list.output, ".git/\na/\na/b/\na/b/c.txt\nbig.txt");
    let nothing = run(&env, "read_file", json!({"path": "nope.txt"}));
    assert!(nothing.error && nothing.output.contains("nope.txt"));
}

#[test]
fn bash_runs_in_home_bounds_its_output_and_marks_failure() {
    let dir = TempDir::new();
    let (env, _peer) = env(&dir.0);
    let here = run(&env, "bash", json!({"command": "pwd"}));
    assert_eq!(here.output.trim(), dir.0.to_str().unwrap());
    let failed = run(&env, "bash", json!({"command": "echo no; exit 3"}));
    assert_eq!(failed, Outcome { output: "no\n[exit status 3]".into(), error: true });
    let flood =
        run(&env, "bash", json!({"command": "head -c 200000 /dev/zero | tr '\\0' a; echo END"}));
    assert!(!flood.error);
    assert!(flood.output.contains("bytes of output cut here; 200004 in all"), "the cut is stated");
    assert!(flood.output.starts_with("aaaa") && flood.output.ends_with("aaaaEND\n"));
    assert!(flood.output.len() < 31_000, "{} bytes", flood.output.len());
}

#[test]
fn send_delivers_an_envelope_and_an_exchange_ends_after_four_replies() {
    let dir = TempDir::new();
    let home = dir.0.join("ada");
    let peer_inbox = dir.0.join("bob-inbox");
    fs::create_dir_all(home.join("soul")).unwrap();
    fs::create_dir_all(home.join("inbox/seen")).unwrap();
    fs::create_dir_all(&peer_inbox).unwrap();
    fs::write(home.join("soul/peers.json"), json!({"bob": peer_inbox}).to_string()).unwrap();
    let (env, _peer) = env(&home);

    let sent = run(&env, "send", json!({"to": "bob", "text": "hello bob"}));
    assert!(!sent.error, "{sent:?}");
    let files: Vec<_> =
        fs::read_dir(&peer_inbox).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let name = files[0].to_str().unwrap();
    assert!(inbox::is_envelope_name(name), "{name}");
    let envelope = inbox::check(&fs::read(peer_inbox.join(name)).unwrap()).unwrap();
    assert_eq!(envelope["from"], "ada");
    assert_eq!(envelope["to"], "bob");
    assert_eq!(envelope["text"], "hello bob");
    assert_eq!(envelope["hops"], 0);
    assert_eq!(envelope["replyTo"], Value::Null);

    let seen = |id: &str, hops: u64| {
        let envelope = json!({"v": 1, "id": id, "from": "bob", "to": "ada", "replyTo": null,
            "ts": "2026-11-11T12:00:00Z", "hops": hops, "text": "hi"});
        fs::write(home.join(format!("inbox/seen/{id}.json")), envelope.to_string()).unwrap();
    };
    seen("m3", 3);
    seen("m4", 4);
    let fourth = run(&env, "send", json!({"to": "bob", "text": "r", "reply_to": "m3"}));
    assert!(!fourth.error, "{fourth:?}");
    let fifth = run(&env, "send", json!({"to": "bob", "text": "r", "reply_to": "m4"}));
    assert!(fifth.error && fifth.output.contains("ends here"), "{fifth:?}");
    assert_eq!(fs::read_dir(&peer_inbox).unwrap().count(), 2);
    let reply = fs::read_dir(&peer_inbox)
        .unwrap()
        .flatten()
        .map(|e| inbox::check(&fs::read(e.path()).unwrap()).unwrap())
        .find(|e| e["replyTo"] == "m3")
        .unwrap();
    assert_eq!(reply["hops"], 4);

    let stranger = run(&env, "send", json!({"to": "eve", "text": "x"}));
    assert!(stranger.error && stranger.output.contains("not in soul/peers.json"));
    let unknown = run(&env, "send", json!({"to": "bob", "text": "x", "reply_to": "nope"}));
    assert!(unknown.error && unknown.output.contains("\"nope\""));
}

#[test]
fn an_envelope_is_checked_field_by_field() {
    let good = json!({"v": 1, "id": "a", "from": "x", "to": "y", "replyTo": null,
        "ts": "2026-11-11T12:00:00Z", "hops": 0, "text": "t"});
    assert!(inbox::check(good.to_string().as_bytes()).is_ok());
    let cases: &[(&str, Value, &str)] = &[
        ("v", json!(2), "\"v\" must be 1"),
        ("id", json!(""), "\"id\" must not be empty"),
        ("from", json!(3), "\"from\" must be a string"),
        ("replyTo", json!(5), "\"replyTo\" must be a string or null"),
        ("hops", json!(-1), "\"hops\" must be a whole number"),
        ("text", Value::Null, "\"text\" must be a string"),
    ];
    for (field, value, want) in cases {
        let mut bad: Map<String, Value> = good.as_object().unwrap().clone();
        bad.insert((*field).into(), value.clone());
        let why = inbox::check(Value::Object(bad).to_string().as_bytes()).unwrap_err();
        assert!(why.contains(want), "{field}: {why}");
    }
    assert_eq!(inbox::check(b"[1]").unwrap_err(), "not a JSON object");
}
