//! The wire shapes of both protocols, field by field, against fixtures
//! written from the providers' published documentation; and the small
//! pure rules around them (failures, retry waits, HTTP framing, settings).

use std::time::Duration;

use serde_json::json;
use teneral_body::config::{Config, Protocol};
use teneral_body::http;
use teneral_body::model::{self, Answer, Failure, Item, ToolCall, ToolSpec};

fn items() -> Vec<Item> {
    vec![
        Item::User("list the files".into()),
        Item::Assistant("Looking.".into()),
        Item::Call(ToolCall {
            id: "call_1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        }),
        Item::Call(ToolCall {
            id: "call_2".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        }),
        Item::Output { id: "call_1".into(), text: "a\nb\n".into() },
        Item::Output { id: "call_2".into(), text: "A".into() },
        Item::Call(ToolCall { id: "call_3".into(), name: "bash".into(), arguments: "{}".into() }),
        Item::Output { id: "call_3".into(), text: "".into() },
    ]
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "bash",
        description: "Run a command.",
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    }]
}

#[test]
fn a_chat_completions_request_has_the_documented_shape() {
    let body = model::request(Protocol::Chat, "gpt-x", Some("low"), "SYSTEM", &items(), &tools());
    let expected = json!({
        "model": "gpt-x",
        "reasoning_effort": "low",
        "messages": [
            {"role": "system", "content": "SYSTEM"},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a\nb\n"},
            {"role": "tool", "tool_call_id": "call_2", "content": "A"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_3", "content": ""}
        ],
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
    });
    assert_eq!(body, expected);
    let plain = model::request(Protocol::Chat, "gpt-x", None, "S", &[], &[]);
    assert!(plain.get("reasoning_effort").is_none());
}

#[test]
fn a_responses_request_has_the_documented_shape() {
    let body =
        model::request(Protocol::Responses, "gpt-x", Some("high"), "SYSTEM", &items(), &tools());
    let expected = json!({
        "model": "gpt-x",
        "instructions": "SYSTEM",
        "store": false,
        "reasoning": {"effort": "high", "summary": "auto"},
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
            {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{\"command\":\"ls\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a\nb\n"},
            {"type": "function_call_output", "call_id": "call_2", "output": "A"},
            {"type": "function_call", "call_id": "call_3", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_3", "output": ""}
        ],
        "tools": [{"type": "function", "name": "bash", "description": "Run a command.", "strict": false,
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
    });
    assert_eq!(body, expected);
    let plain = model::request(Protocol::Responses, "gpt-x", None, "S", &[], &[]);
    assert!(plain.get("reasoning").is_none());
}

#[test]
fn a_chat_completions_answer_is_read() {
    // As the chat completions reference shows a tool-calling completion.
    let fixture = json!({
        "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1741570283, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null, "message": {
            "role": "assistant", "content": "Checking.", "refusal": null,
            "tool_calls": [{"id": "call_abc", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]}}],
        "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}
    });
    let answer = model::parse_answer(Protocol::Chat, fixture.to_string().as_bytes()).unwrap();
    assert_eq!(
        answer,
        Answer {
            text: "Checking.".into(),
            calls: vec![ToolCall {
                id: "call_abc".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }],
            reasoning: vec![],
            usage: Some((82, 17)),
        }
    );
    let text_only = json!({"choices": [{"message": {"role": "assistant", "content": "Hi"}}]});
    let answer = model::parse_answer(Protocol::Chat, text_only.to_string().as_bytes()).unwrap();
    assert_eq!((answer.text.as_str(), answer.calls.len(), answer.usage), ("Hi", 0, None));
    assert!(model::parse_answer(Protocol::Chat, b"{\"nope\":1}")
        .unwrap_err()
        .contains("unexpected shape"));
    assert!(model::parse_answer(Protocol::Chat, b"<html>").unwrap_err().contains("not JSON"));
}

#[test]
fn a_responses_answer_is_read() {
    // As the Responses API reference shows a response with reasoning, a
    // message and a function call.
    let fixture = json!({
        "id": "resp_67cc", "object": "response", "created_at": 1741476542, "status": "completed",
        "model": "o4-mini",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Checking the files"}]},
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "Here you are.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
             "arguments": "{\"path\":\"a\"}", "status": "completed"}
        ],
        "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 87,
                  "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 123}
    });
    let answer = model::parse_answer(Protocol::Responses, fixture.to_string().as_bytes()).unwrap();
    assert_eq!(
        answer,
        Answer {
            text: "Here you are.".into(),
            calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into()
            }],
            reasoning: vec!["Checking the files".into()],
            usage: Some((36, 87)),
        }
    );
}

#[test]
fn failures_are_sorted_into_retry_and_fatal() {
    let error = |m: &str| json!({"error": {"message": m, "type": "x"}}).to_string();
    assert_eq!(model::classify(200, b"{}"), None);
    assert_eq!(
        model::classify(429, error("limit").as_bytes()),
        Some(Failure::Retry("HTTP 429: limit".into()))
    );
    assert_eq!(model::classify(503, b"down"), Some(Failure::Retry("HTTP 503: down".into())));
    assert_eq!(
        model::classify(400, error("bad").as_bytes()),
        Some(Failure::Fatal("HTTP 400: bad".into()))
    );
    assert_eq!(model::classify(401, b""), Some(Failure::Fatal("HTTP 401: ".into())));
}

#[test]
fn retry_waits_are_10s_1min_5min_then_15min() {
    let waits: Vec<u64> = (0..6).map(|n| model::retry_delay(n, 1.0).as_secs()).collect();
    assert_eq!(waits, [10, 60, 300, 900, 900, 900]);
    assert_eq!(model::retry_delay(0, 0.001), Duration::from_millis(10));
}

#[test]
fn http_responses_are_framed_by_length_by_chunks_or_by_the_end() {
    let by_length = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
    let r = http::read_response(&by_length[..]).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    let chunked = b"HTTP/1.1 429 Too Many\r\ntransfer-encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
    let r = http::read_response(&chunked[..]).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (429, &b"Wikipedia"[..]));
    let to_end = b"HTTP/1.0 500 Oops\r\n\r\nall of it";
    assert_eq!(http::read_response(&to_end[..]).unwrap().body, b"all of it");
    assert!(http::read_response(&b"nonsense\r\n\r\n"[..]).is_err());
    assert_eq!(
        http::split_url("http://127.0.0.1:8080/v1/chat/completions").unwrap(),
        ("127.0.0.1:8080".to_owned(), "/v1/chat/completions".to_owned())
    );
}

fn settings(changes: &[(&str, Option<&str>)]) -> Result<Config, String> {
    let mut env: Vec<(&str, Option<&str>)> = vec![
        ("TENERAL_CONTRACT", Some("1")),
        ("TENERAL_HOME", Some("/h")),
        ("TENERAL_COMMIT", Some("abc")),
        ("TENERAL_EVENTS", Some("/s")),
        ("TENERAL_PROVIDER", Some("standin")),
        ("TENERAL_PROTOCOL", Some("chat")),
        ("TENERAL_MODEL_URL", Some("http://127.0.0.1:1/v1")),
        ("TENERAL_MODEL", Some("m")),
        ("TENERAL_API_KEY", Some("k")),
        ("TENERAL_HEARTBEAT_MINUTES", Some("30")),
        ("TENERAL_CONTEXT_CHARS", Some("250000")),
        ("TENERAL_CLOCK", Some("on")),
    ];
    for (name, value) in changes {
        env.retain(|(k, _)| k != name);
        env.push((name, *value));
    }
    Config::from_lookup(|name| {
        env.iter().find(|(k, _)| *k == name).and_then(|(_, v)| v.map(str::to_owned))
    })
}

#[test]
fn settings_come_from_the_contract_environment() {
    let c = settings(&[]).unwrap();
    assert_eq!(c.endpoint(), "http://127.0.0.1:1/v1/chat/completions");
    assert_eq!(c.heartbeat, Some(Duration::from_secs(1800)));
    assert_eq!((c.context_chars, c.retry_scale, c.reasoning_effort), (250_000, 1.0, None));
    let r = settings(&[
        ("TENERAL_PROTOCOL", Some("responses")),
        ("TENERAL_REASONING_EFFORT", Some("low")),
    ])
    .unwrap();
    assert_eq!(r.endpoint(), "http://127.0.0.1:1/v1/responses");
    assert_eq!(r.reasoning_effort.as_deref(), Some("low"));
    assert_eq!(settings(&[("TENERAL_CLOCK", Some("off"))]).unwrap().heartbeat, None);
    assert_eq!(settings(&[("TENERAL_HEARTBEAT_MINUTES", Some("0"))]).unwrap().heartbeat, None);
    let cases = [
        ("TENERAL_MODEL", None, "TENERAL_MODEL is not set"),
        ("TENERAL_CONTRACT", Some("2"), "speaks contract 1"),
        ("TENERAL_PROTOCOL", Some("grpc"), "expected chat or responses"),
        ("TENERAL_MODEL_URL", Some("https://api.example.com/v1"), "http://127.0.0.1"),
        ("TENERAL_CONTEXT_CHARS", Some("lots"), "TENERAL_CONTEXT_CHARS=\"lots\""),
        ("TENERAL_HEARTBEAT_MINUTES", Some("-1"), "TENERAL_HEARTBEAT_MINUTES"),
        ("TENERAL_CLOCK", Some("maybe"), "expected on or off"),
    ];
    for (name, value, want) in cases {
        let why = settings(&[(name, value)]).unwrap_err();
        assert!(why.contains(want), "{name}={value:?}: {why}");
    }
}

#[test]
fn the_clock_writes_rfc3339() {
    assert_eq!(teneral_body::clock::rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(teneral_body::clock::rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
    assert_eq!(teneral_body::clock::rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
}

#[test]
fn an_owner_line_with_images_has_each_protocols_documented_shape() {
    let image = model::Image { media_type: "image/png", data: "iVBORw0KGgo=".into() };
    let items = [Item::UserImages { text: "what is this?".into(), images: vec![image] }];
    let chat = model::request(Protocol::Chat, "m", None, "S", &items, &[]);
    assert_eq!(
        chat["messages"][1],
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        ]})
    );
    let responses = model::request(Protocol::Responses, "m", None, "S", &items, &[]);
    assert_eq!(
        responses["input"][0],
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}
        ]})
    );
}
