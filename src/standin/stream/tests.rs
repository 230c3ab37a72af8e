//! The frames of both protocols, read back as a client reads them.
use serde_json::{json, Value};

use super::*;
use crate::standin::responses::{render, Checked};
use crate::standin::turn::{Call, Newest};

fn turn() -> Turn {
    Turn {
        text: Some("Hello there,\nowner.".into()),
        reasoning: None,
        calls: vec![
            Call {
                n: 4,
                name: "read_file".into(),
                arguments: r#"{"path":"body/src/prompt.rs"}"#.into(),
            },
            Call { n: 5, name: "list_files".into(), arguments: "{}".into() },
        ],
    }
}

const USAGE: Usage = Usage { input: 10, output: 7, reasoning: 0 };

/// The JSON of each `data:` line, and the event names.
fn read(frames: &[String]) -> (Vec<Option<String>>, Vec<String>) {
    let mut names = Vec::new();
    let mut datas = Vec::new();
    for frame in frames {
        assert!(frame.ends_with("\n\n"), "{frame:?}");
        let mut name = None;
        for line in frame.trim_end().lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_owned());
            } else if let Some(d) = line.strip_prefix("data: ") {
                datas.push(d.to_owned());
            } else {
                unreachable!("a line that is neither event nor data: {line:?}");
            }
        }
        names.push(name);
    }
    (names, datas)
}

fn json_of(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| unreachable!("{e}: {data}"))
}

#[test]
fn words_keep_the_space_before_them_and_join_to_the_text() {
    let table: &[(&str, &[&str])] = &[
        ("", &[]),
        ("one", &["one"]),
        ("Hello there", &["Hello", " there"]),
        ("  lead", &["  lead"]),
        ("a\n\nb  c ", &["a", "\n\nb", "  c", " "]),
        ("é ü", &["é", " ü"]),
    ];
    for (text, pieces) in table {
        assert_eq!(words(text), pieces.to_vec(), "{text:?}");
        assert_eq!(words(text).concat(), *text);
    }
    let long = "x".repeat(ARGUMENT_PIECE * 2 + 3);
    assert_eq!(slices(&long).len(), 3);
    assert_eq!(slices(&long).concat(), long);
    assert!(slices("").is_empty());
    assert_eq!(slices(&"é".repeat(20)), vec!["é".repeat(16), "é".repeat(4)]);
}

#[test]
fn chat_chunks_rebuild_the_text_and_each_call_by_index() {
    for include_usage in [false, true] {
        let asked = Asked { stream: true, include_usage };
        let frames = chat("m", 3, 9, &turn(), USAGE, asked);
        let (names, datas) = read(&frames);
        assert!(names.iter().all(Option::is_none), "chat frames have no event names");
        assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
        let chunks: Vec<Value> = datas[..datas.len() - 1].iter().map(|d| json_of(d)).collect();
        let mut text = String::new();
        let mut calls: Vec<(String, String, String)> = Vec::new();
        let mut finish = Vec::new();
        let mut usage = Vec::new();
        for chunk in &chunks {
            assert_eq!(chunk["id"], "chatcmpl-3");
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert_eq!(chunk.get("usage").is_some(), include_usage, "{chunk}");
            if !chunk["usage"].is_null() {
                usage.push(chunk["usage"].clone());
                assert_eq!(chunk["choices"], json!([]));
                continue;
            }
            let choice = &chunk["choices"][0];
            let delta = &choice["delta"];
            text.push_str(delta["content"].as_str().unwrap_or_default());
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let at = call["index"].as_u64().unwrap_or(99) as usize;
                if at == calls.len() {
                    let id = call["id"].as_str().unwrap_or_default().to_owned();
                    let name = call["function"]["name"].as_str().unwrap_or_default().to_owned();
                    calls.push((id, name, String::new()));
                } else {
                    assert!(call.get("id").is_none(), "only a call's first delta names it");
                }
                calls[at].2.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
            }
            if !choice["finish_reason"].is_null() {
                finish.push(choice["finish_reason"].clone());
            }
        }
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(text, "Hello there,\nowner.");
        assert_eq!(
            calls,
            vec![
                ("call_4".into(), "read_file".into(), r#"{"path":"body/src/prompt.rs"}"#.into()),
                ("call_5".into(), "list_files".into(), "{}".into()),
            ]
        );
        assert_eq!(finish, vec![json!("tool_calls")]);
        let expected = if include_usage {
            vec![json!({"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17,
                        "prompt_tokens_details": {"cached_tokens": 0},
                        "completion_tokens_details": {"reasoning_tokens": 0}})]
        } else {
            Vec::new()
        };
        assert_eq!(usage, expected);
    }
}

#[test]
fn chat_words_only_finish_with_stop() {
    let words_only = Turn { text: Some("just words".into()), ..Turn::default() };
    let frames = chat("m", 1, 0, &words_only, USAGE, Asked { stream: true, include_usage: false });
    let (_, datas) = read(&frames);
    let finish: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|d| json_of(d)["choices"][0]["finish_reason"].clone())
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, vec![json!("stop")]);
    assert_eq!(frames.len(), 1 + 2 + 1 + 1, "role, two words, finish, done");
}

#[test]
fn responses_events_are_numbered_typed_and_rebuild_the_response() {
    let checked = Checked {
        model: "m".into(),
        newest: Newest::User("hi".into()),
        store: false,
        encrypted: false,
        previous: None,
        stream: true,
    };
    let turn = Turn { reasoning: Some("think first".into()), ..turn() };
    let whole = render(2, 9, &checked, &turn, USAGE);
    let frames = responses(&whole);
    let (names, datas) = read(&frames);
    let events: Vec<Value> = datas.iter().map(|d| json_of(d)).collect();
    for (i, (name, event)) in names.iter().zip(&events).enumerate() {
        assert_eq!(name.as_deref(), event["type"].as_str(), "event: names the data's type");
        assert_eq!(event["sequence_number"], json!(i));
    }
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert_eq!(events[0]["response"]["status"], "in_progress");
    assert_eq!(events[0]["response"]["output"], json!([]));
    assert_eq!(events.last().map(|e| &e["response"]), Some(&whole));
    assert_eq!(whole["usage"]["total_tokens"], 17);
    let join = |kind: &str, at: usize| -> String {
        events
            .iter()
            .filter(|e| e["type"] == kind && e["output_index"] == json!(at))
            .filter_map(|e| e["delta"].as_str())
            .collect()
    };
    assert_eq!(join("response.reasoning_summary_text.delta", 0), "think first");
    assert_eq!(join("response.output_text.delta", 1), "Hello there,\nowner.");
    assert_eq!(
        join("response.function_call_arguments.delta", 2),
        r#"{"path":"body/src/prompt.rs"}"#
    );
    assert_eq!(join("response.function_call_arguments.delta", 3), "{}");
    for (at, item) in whole["output"].as_array().into_iter().flatten().enumerate() {
        let added = events
            .iter()
            .find(|e| e["type"] == "response.output_item.added" && e["output_index"] == json!(at));
        assert_eq!(added.map(|e| &e["item"]["id"]), Some(&item["id"]));
        let done = events
            .iter()
            .find(|e| e["type"] == "response.output_item.done" && e["output_index"] == json!(at));
        assert_eq!(done.map(|e| &e["item"]), Some(item), "each item is done whole");
    }
    let text_delta = events.iter().find(|e| e["type"] == "response.output_text.delta");
    assert_eq!(text_delta.map(|e| &e["item_id"]), Some(&json!("msg_2")));
    assert_eq!(text_delta.map(|e| &e["content_index"]), Some(&json!(0)));
}
