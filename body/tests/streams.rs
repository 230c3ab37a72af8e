//! Replies read as the model writes them: the words reach the kernel as
//! `reply.delta` before the reply is whole, the journal gets the reply once
//! with its usage, an interrupt keeps what had arrived, and a provider that
//! will not stream is asked without a stream from then on.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use teneral_body::config::Protocol;
use teneral_body::stream::{refuses, Events, Reading, Step};

const LIVE: &str = ".teneral/live-reply.jsonl";

fn live_text(rig: &Rig) -> String {
    let bytes = fs::read(rig.home.join(LIVE)).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|d| d["text"].as_str().map(str::to_owned))
        .collect()
}

const WORDS: &str = "one two three four five six seven eight nine ten eleven twelve";

#[test]
fn the_words_arrive_before_the_reply_which_is_journaled_once_whole() {
    for wire in [Wire::Chat, Wire::Responses] {
        let step = json!({"reply": WORDS, "chunk_ms": 60}).to_string();
        let mut rig = Rig::new(wire, &[&step]);
        rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
        rig.start_ready();
        rig.say(1, "count");
        // Part of the reply is in the clients' file while the journal has none.
        let seen = wait_until(WAIT, "words of the reply in progress", || {
            let text = live_text(&rig);
            (!text.is_empty() && text.len() < WORDS.len()).then_some(text)
        });
        assert!(WORDS.starts_with(&seen), "{seen:?}");
        assert_eq!(count(&rig.journal(), "reply"), 1, "only the seeded reply so far");
        let journal = rig.wait_turns(1);
        let replies = of(&journal, "reply");
        assert_eq!(replies.len(), 2, "{}", rig.report());
        assert_eq!(replies[1]["text"], WORDS);
        assert!(replies[1].get("interrupted").is_none());
        assert!(has(&journal, "usage"), "the usage from the stream's end is journaled");
        assert!(!types(&journal).contains(&"reply.delta"), "deltas are never journaled");
        assert_eq!(live_text(&rig), "", "the reply in progress is emptied once journaled");
        let asked = &rig.requests()[0]["body"];
        assert_eq!(asked["stream"], true, "{asked}");
    }
}

#[test]
fn an_interrupt_mid_stream_stops_it_and_journals_what_had_arrived() {
    for wire in [Wire::Chat, Wire::Responses] {
        let long = (1..=60).map(|n| format!("w{n}")).collect::<Vec<_>>().join(" ");
        let step = json!({"reply": long, "chunk_ms": 100}).to_string();
        let mut rig = Rig::new(wire, &[&step, r#"{"reply":"after"}"#]);
        rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
        rig.start_ready();
        rig.say(1, "go on and on");
        wait_until(WAIT, "a few words", || (live_text(&rig).len() > 8).then_some(()));
        let asked = Instant::now();
        rig.interrupt(2);
        let journal = rig.wait_for("turn.interrupted", |j| has(j, "turn.interrupted"));
        let took = asked.elapsed();
        assert!(took < Duration::from_secs(1), "took {took:?}");
        let turn: Vec<&str> =
            types(&journal).into_iter().skip_while(|k| *k != "owner.line").collect();
        assert_eq!(turn, ["owner.line", "reply", "turn.interrupted"], "{}", rig.report());
        let cut = of(&journal, "reply").last().cloned().unwrap_or_default();
        assert_eq!(cut["interrupted"], true, "{cut}");
        let text = cut["text"].as_str().unwrap_or_default();
        assert!(text.len() > 8 && text.len() < long.len() && long.starts_with(text), "{text:?}");
        rig.say(3, "and now?");
        let journal = rig.wait_turns(2);
        assert_eq!(of(&journal, "reply").last().unwrap()["text"], "after");
    }
}

#[test]
fn a_provider_that_refuses_to_stream_is_asked_without_from_then_on() {
    let mut rig = Rig::new(
        Wire::Chat,
        &[
            r#"{"error":{"status":400,"message":"Streaming is not supported for this model."}}"#,
            r#"{"reply":"whole, then"}"#,
            r#"{"reply":"still whole"}"#,
        ],
    );
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "hi");
    rig.wait_turns(1);
    rig.say(2, "again");
    let journal = rig.wait_turns(2);
    let texts: Vec<&Value> = of(&journal, "reply").iter().map(|r| &r["text"]).collect();
    assert_eq!(texts, [&json!("earlier"), &json!("whole, then"), &json!("still whole")]);
    assert!(!has(&journal, "model.retry"), "not a failure of the turn: {}", rig.report());
    let streamed: Vec<bool> = rig.requests().iter().map(|r| r["body"]["stream"] == true).collect();
    assert_eq!(streamed, [true, false, false], "asked once, then never again");
    assert!(rig.kernel_log().contains("does not stream"), "{}", rig.kernel_log());
}

fn read_all(protocol: Protocol, text: &str) -> (Vec<Step>, Reading) {
    let mut events = Events::default();
    let mut reading = Reading::new(protocol);
    let mut steps = Vec::new();
    for line in text.lines() {
        if let Some(data) = events.line(line) {
            steps.push(reading.take(&data).unwrap_or_else(|e| panic!("{e}")));
        }
    }
    (steps, reading)
}

#[test]
fn chat_chunks_make_the_answer_with_calls_by_index_and_usage() {
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]}),
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "ls", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"cmd\":"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
    ];
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    text.push_str(": a comment\n\ndata: [DONE]\n\n");
    let (steps, reading) = read_all(Protocol::Chat, &text);
    let words: Vec<&Step> = steps.iter().filter(|s| matches!(s, Step::Text(_))).collect();
    assert_eq!(words, [&Step::Text("Hel".into()), &Step::Text("lo".into())]);
    assert_eq!(steps.last(), Some(&Step::Done));
    let answer = reading.finish().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer.text, "Hello");
    assert_eq!(answer.reasoning, ["hmm"]);
    assert_eq!(answer.usage, Some((9, 4)));
    let calls: Vec<(&str, &str, &str)> = answer
        .calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, [("c1", "bash", r#"{"cmd":"ls"}"#), ("c2", "ls", "{}")]);
}

#[test]
fn a_stream_that_stops_short_or_fails_is_no_answer() {
    let cut = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let (_, reading) = read_all(Protocol::Chat, cut);
    assert_eq!(reading.text(), "Hi", "what arrived is kept");
    assert!(reading.finish().is_err_and(|e| e.contains("before its choice finished")));
    let cut = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n";
    let (_, reading) = read_all(Protocol::Responses, cut);
    assert!(reading.finish().is_err_and(|e| e.contains("response.completed")));
    let failed = r#"{"type":"response.failed","response":{"error":{"message":"overloaded"}}}"#;
    assert_eq!(Reading::new(Protocol::Responses).take(failed), Err("overloaded".to_owned()));
    let error = r#"{"error":{"message":"bad key"}}"#;
    assert_eq!(Reading::new(Protocol::Chat).take(error), Err("bad key".to_owned()));
}

#[test]
fn what_says_a_stream_was_refused() {
    let table: &[(u16, &str, bool)] = &[
        (400, r#"{"error":{"message":"Streaming is not supported"}}"#, true),
        (
            400,
            r#"{"error":{"message":"Unrecognized request argument supplied: stream_options"}}"#,
            true,
        ),
        (422, r#"{"detail":"stream: extra fields not permitted"}"#, true),
        (400, r#"{"error":{"message":"messages is empty"}}"#, false),
        (500, r#"{"error":{"message":"stream broke"}}"#, false),
        (429, "slow down", false),
    ];
    for (status, body, refused) in table {
        assert_eq!(refuses(*status, body.as_bytes()), *refused, "{status} {body}");
    }
}

/// A model server that answers every request whole, as JSON, whatever it
/// asked: a provider that ignores `stream`. Returns its URL and the bodies
/// of the requests it took.
fn whole_only_server(answers: usize) -> (String, std::sync::mpsc::Receiver<Value>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}/v1", listener.local_addr().expect("its address"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for n in 0..answers {
            let Ok((stream, _)) = listener.accept() else { return };
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = tx.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
            let answer = json!({"choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": format!("whole answer {n}")}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
            .to_string();
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, rx)
}

#[test]
fn a_provider_that_answers_a_stream_request_whole_is_read_and_asked_whole_since() {
    let mut rig = Rig::new(Wire::Chat, &[]);
    let (url, asked) = whole_only_server(2);
    rig.set_env("TENERAL_MODEL_URL", &url);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "hi");
    rig.wait_turns(1);
    rig.say(2, "again");
    let journal = rig.wait_turns(2);
    let texts: Vec<&Value> = of(&journal, "reply").iter().map(|r| &r["text"]).collect();
    assert_eq!(texts, [&json!("earlier"), &json!("whole answer 0"), &json!("whole answer 1")]);
    assert_eq!(count(&journal, "usage"), 2, "{}", rig.report());
    let streamed: Vec<bool> = asked.try_iter().map(|b| b["stream"] == true).collect();
    assert_eq!(streamed, [true, false], "asked for a stream once, then never again");
}

#[test]
fn a_long_reply_streamed_at_once_goes_in_bounded_deltas_and_whole_to_the_journal() {
    // Words far longer than a delta may be, coming faster than deltas go.
    let long: String = (0..12).map(|n| format!("{}{n} ", "x".repeat(20_000))).collect();
    let step = json!({"reply": long, "chunk_ms": 10}).to_string();
    let mut rig = Rig::new(Wire::Chat, &[&step]);
    rig.seed_journal(&[json!({"type": "reply", "text": "earlier"})]);
    rig.start_ready();
    rig.say(1, "all at once");
    let journal = rig.wait_turns(1);
    assert_eq!(of(&journal, "reply").last().unwrap()["text"], long.as_str());
    let refused = format!("{}{}", rig.kernel_log(), rig.body_stderr());
    assert!(!refused.contains("refused"), "a delta was refused: {refused}");
}
