//! What the stand-in refuses, as the providers do: a request without the
//! key, malformed requests of both protocols with the provider's message,
//! and a bad script or a non-loopback address at start.

use std::net::SocketAddr;

use serde_json::{json, Value};
use teneral::standin::{Config, Standin};

use super::{error_message, Server, CHAT, RESPONSES};

#[test]
fn the_key_is_checked() {
    let server = Server::start(Some("k"), None);
    let body = json!({"model": "m", "input": "hi"}).to_string();
    for auth in [Some("Bearer wrong"), None, Some("k")] {
        let (status, answer) = server.request("POST", RESPONSES, auth, &body);
        assert_eq!(status, 401, "{auth:?}");
        assert_eq!(answer["error"]["code"], "invalid_api_key", "{auth:?}");
    }
    let (status, _) = server.request("POST", RESPONSES, Some("Bearer k"), &body);
    assert_eq!(status, 200);

    let open = Server::start(None, None);
    let (status, _) = open.request("POST", RESPONSES, Some("Bearer anything"), &body);
    assert_eq!(status, 200);
    let (status, _) = open.request("POST", RESPONSES, None, &body);
    assert_eq!(status, 401);
}

#[test]
fn malformed_requests_are_refused_as_the_provider_refuses_them() {
    // One step: it must survive every refusal below.
    let server = Server::start(None, Some("{\"reply\":\"still here\"}\n"));
    let user = json!({"role": "user", "content": "hi"});
    let table: Vec<(&str, Value, u16, &str)> = vec![
        (
            CHAT,
            json!({"model": "m", "messages": [user], "foo": 1}),
            400,
            "Unrecognized request argument supplied: foo",
        ),
        (
            CHAT,
            json!({"model": "m", "messages": [user, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]}),
            400,
            "must be a response to a preceding message with 'tool_calls'",
        ),
        (
            CHAT,
            json!({"model": "m", "messages": [user], "stream_options": {"include_usage": true}}),
            400,
            "only allowed when 'stream' is enabled",
        ),
        (CHAT, json!({"model": "m", "messages": []}), 400, "empty array"),
        (
            RESPONSES,
            json!({"model": "m", "input": "hi", "foo": 1}),
            400,
            "Unknown parameter: 'foo'.",
        ),
        (
            RESPONSES,
            json!({"model": "m", "input": "hi",
            "tools": [{"type": "function", "function": {"name": "bash"}}]}),
            400,
            "Missing required parameter: 'tools[0].name'.",
        ),
        (
            RESPONSES,
            json!({"model": "m", "input": [user,
            {"type": "function_call_output", "call_id": "call_1", "output": "x"}]}),
            400,
            "No tool call found for function call output with call_id call_1.",
        ),
        (
            RESPONSES,
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}),
            400,
            "Invalid value: 'text'.",
        ),
    ];
    for (path, body, status, message) in table {
        let (got, answer) = server.post(path, &body);
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
        assert!(error_message(&answer).contains(message), "{body}: {answer}");
    }
    let (status, answer) = server.request("POST", CHAT, Some("Bearer k"), "{\"model\":");
    assert_eq!(status, 400);
    assert!(error_message(&answer).contains("not valid JSON"), "{answer}");
    let (status, answer) = server.request("GET", "/v1/embeddings", Some("Bearer k"), "");
    assert_eq!(status, 404);
    assert_eq!(error_message(&answer), "Invalid URL (GET /v1/embeddings)");

    let (status, answer) = server.post(CHAT, &json!({"model": "m", "messages": [user]}));
    assert_eq!(status, 200);
    assert_eq!(answer["choices"][0]["message"]["content"], "still here");

    let log = server.log_lines();
    assert_eq!(log.len(), 11);
    assert_eq!(log[8]["body"], "{\"model\":", "a body that is not JSON is logged as text");
    assert_eq!(
        (log[9]["path"].as_str(), log[9]["status"].as_u64()),
        (Some("/v1/embeddings"), Some(404))
    );
}

#[test]
fn a_bad_script_or_address_is_refused_at_start() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    let dir = tempfile::tempdir().expect("a temporary directory can be made");
    let script = dir.path().join("script.jsonl");
    std::fs::write(&script, "{\"reply\":\"ok\"}\n{\"reply\":\"x\",\"tool_call\":[]}\n")
        .expect("the script file is written");
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let config = Config { script: Some(script), ..Config::default() };
    let message = match runtime.block_on(Standin::bind(loopback, config)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a bad script was accepted"),
    };
    assert!(message.contains("line 2") && message.contains("\"tool_call\""), "{message}");

    let anywhere = SocketAddr::from(([0, 0, 0, 0], 0));
    match runtime.block_on(Standin::bind(anywhere, Config::default())) {
        Err(e) => assert!(e.to_string().contains("only on loopback"), "{e}"),
        Ok(_) => panic!("bound beyond loopback"),
    }
}
