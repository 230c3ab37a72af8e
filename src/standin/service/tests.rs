//! Tests of the key check, routing and numbering, without a socket.
use serde_json::json;

use super::*;

const BEARER: Option<&str> = Some("Bearer k");

fn post(service: &Service, path: &str, body: &serde_json::Value) -> Prepared {
    service.handle("POST", path, BEARER, body.to_string().as_bytes(), 7)
}

fn script(text: &str) -> Script {
    Script::parse(text).unwrap_or_else(|e| unreachable!("{e}"))
}

#[test]
fn keys() {
    let table: &[(Option<&str>, Option<&str>, bool)] = &[
        (None, Some("Bearer anything"), true),
        (None, Some("bearer anything"), true),
        (None, Some("Bearer "), false),
        (None, None, false),
        (None, Some("Basic abc"), false),
        (Some("k"), Some("Bearer k"), true),
        (Some("k"), Some("Bearer other"), false),
        (Some("k"), None, false),
    ];
    for (expected, header, ok) in table {
        let result = authorize(*expected, *header);
        assert_eq!(result.is_ok(), *ok, "{expected:?} {header:?}");
        if let Err(e) = result {
            assert_eq!((e.status, e.code.as_deref()), (401, Some("invalid_api_key")));
        }
    }
}

#[test]
fn refusals_before_the_script_do_not_consume_it() {
    let service = Service::new(Some("k".into()), script(r#"{"reply":"scripted"}"#));
    let body = json!({"model": "m", "input": "hi"});
    let wrong_key = service.handle("POST", RESPONSES_PATH, Some("Bearer x"), b"{}", 7);
    assert_eq!(wrong_key.status, 401);
    let not_found = service.handle("GET", RESPONSES_PATH, BEARER, b"", 7);
    assert_eq!(not_found.status, 404);
    assert_eq!(not_found.body["error"]["message"], "Invalid URL (GET /v1/responses)");
    let bad_json = service.handle("POST", CHAT_PATH, BEARER, b"{nope", 7);
    assert_eq!(bad_json.status, 400);
    let invalid = post(&service, CHAT_PATH, &body);
    assert_eq!(invalid.status, 400);
    let answer = post(&service, RESPONSES_PATH, &body);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["output"][0]["content"][0]["text"], "scripted");
}

#[test]
fn calls_are_numbered_across_both_endpoints() {
    let service = Service::new(
        None,
        script(
            r#"{"tool_calls":[{"name":"a"},{"name":"b"}]}
               {"tool_calls":[{"name":"c","arguments":{"x":1}}],"delay_ms":5}"#,
        ),
    );
    let chat = post(
        &service,
        CHAT_PATH,
        &json!({"model": "m", "messages": [{"role": "user", "content": "go"}]}),
    );
    let ids: Vec<_> =
        (0..2).map(|i| chat.body["choices"][0]["message"]["tool_calls"][i]["id"].clone()).collect();
    assert_eq!(ids, vec![json!("call_1"), json!("call_2")]);
    assert_eq!(chat.body["id"], "chatcmpl-1");
    let resp = post(&service, RESPONSES_PATH, &json!({"model": "m", "input": "go"}));
    assert_eq!(resp.delay, Duration::from_millis(5));
    assert_eq!(resp.body["id"], "resp_2");
    assert_eq!(resp.body["output"][0]["call_id"], "call_3");
    assert_eq!(resp.body["output"][0]["arguments"], r#"{"x":1}"#);
    assert_eq!(resp.body["created_at"], 7);
}

#[test]
fn stored_responses_can_be_continued() {
    let service = Service::new(None, script(r#"{"tool_calls":[{"name":"a"}]}"#));
    let first = post(&service, RESPONSES_PATH, &json!({"model": "m", "input": "go"}));
    assert_eq!(first.body["id"], "resp_1");
    let next = json!({"model": "m", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]});
    let second = post(&service, RESPONSES_PATH, &next);
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(
        second.body["output"][0]["content"][0]["text"],
        "Stand-in model here. The tool said: ok"
    );

    let unstored =
        post(&service, RESPONSES_PATH, &json!({"model": "m", "input": "x", "store": false}));
    let id = unstored.body["id"].as_str().unwrap_or_default().to_owned();
    let refused = post(
        &service,
        RESPONSES_PATH,
        &json!({"model": "m", "input": "y", "previous_response_id": id}),
    );
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["code"], "previous_response_not_found");
}

#[test]
fn scripted_errors_and_mismatches() {
    let service = Service::new(
        None,
        script(
            r#"{"error":{"status":503,"message":"down"},"delay_ms":9}
               {"expect":"magic","reply":"yes"}"#,
        ),
    );
    let body = json!({"model": "m", "input": "plain"});
    let failed = post(&service, RESPONSES_PATH, &body);
    assert_eq!((failed.status, failed.delay), (503, Duration::from_millis(9)));
    assert_eq!(failed.body["error"]["type"], "server_error");
    assert_eq!(failed.body["error"]["message"], "down");
    let off = post(&service, RESPONSES_PATH, &body);
    assert_eq!(off.status, 409);
    let message = off.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("step 2 (script line 2)") && message.contains("\"magic\""),
        "{message}"
    );
    let on = post(&service, RESPONSES_PATH, &json!({"model": "m", "input": "the magic word"}));
    assert_eq!(on.body["output"][0]["content"][0]["text"], "yes");
}

#[test]
fn models_are_listed_behind_the_key_like_every_endpoint() {
    let service = Service::new(Some("k".into()), Script::default());
    let list = service.handle("GET", "/v1/models", BEARER, b"", 7);
    assert_eq!(list.status, 200);
    assert_eq!(list.body["data"][0]["id"], "standin");
    let one = service.handle("GET", "/v1/models/standin", BEARER, b"", 7);
    assert_eq!((one.status, &one.body["id"]), (200, &json!("standin")));
    let unknown = service.handle("GET", "/v1/models/nope", BEARER, b"", 7);
    assert_eq!((unknown.status, &unknown.body["error"]["code"]), (404, &json!("model_not_found")));
    let wrong_key = service.handle("GET", "/v1/models", Some("Bearer x"), b"", 7);
    assert_eq!(
        (wrong_key.status, &wrong_key.body["error"]["code"]),
        (401, &json!("invalid_api_key"))
    );
    let no_key = service.handle("GET", "/v1/models", None, b"", 7);
    assert_eq!(no_key.status, 401);
    let posted = service.handle("POST", "/v1/models", BEARER, b"{}", 7);
    assert_eq!(posted.status, 404);
}

#[test]
fn only_an_unscripted_standin_acts_on_the_owner_lines() {
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "change yourself"}],
        "tools": [{"type": "function", "function": {"name": "read_file"}}]});
    let responses = json!({"model": "m", "input": "change yourself"});
    let unscripted = Service::new(None, Script::default());
    let answer = post(&unscripted, CHAT_PATH, &chat);
    let call = &answer.body["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "read_file", "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["finish_reason"], "tool_calls");
    let answer = post(&unscripted, RESPONSES_PATH, &responses);
    assert_eq!(answer.body["output"][0]["type"], "function_call", "{}", answer.body);
    assert_eq!(answer.body["output"][0]["name"], "read_file");
    let hello = json!({"model": "m", "input": "hello"});
    let answer = post(&unscripted, RESPONSES_PATH, &hello);
    assert_eq!(
        answer.body["output"][0]["content"][0]["text"],
        "Stand-in model here. You said: hello"
    );

    // A script's steps, and the default reply after them, never act.
    let scripted = Service::new(None, script(r#"{"reply":"scripted"}"#));
    for expected in ["scripted", "Stand-in model here. You said: change yourself"] {
        let answer = post(&scripted, RESPONSES_PATH, &responses);
        assert_eq!(answer.body["output"][0]["content"][0]["text"], expected, "{}", answer.body);
    }
}

#[test]
fn a_standin_told_to_answer_from_its_script_alone_never_acts_even_with_an_empty_one() {
    let responses = json!({"model": "m", "input": "change yourself"});
    let acting = Service::new(None, script(""));
    let answer = post(&acting, RESPONSES_PATH, &responses);
    assert_eq!(answer.body["output"][0]["type"], "function_call", "{}", answer.body);
    let alone = Service::new(None, script("")).from_script_alone();
    let answer = post(&alone, RESPONSES_PATH, &responses);
    assert_eq!(
        answer.body["output"][0]["content"][0]["text"],
        "Stand-in model here. You said: change yourself",
        "{}",
        answer.body
    );
}

#[test]
fn a_request_that_asks_for_a_stream_gets_frames_and_the_whole_answer_beside_them() {
    let service = Service::new(None, script(r#"{"reply":"one two","chunk_ms":30}"#));
    let messages = json!([{"role": "user", "content": "hi"}]);
    let asked =
        post(&service, CHAT_PATH, &json!({"model": "m", "messages": messages, "stream": true}));
    let Some(stream) = &asked.stream else { unreachable!("no stream: {asked:?}") };
    assert_eq!(stream.gap, Duration::from_millis(30));
    assert_eq!(stream.frames.last().map(String::as_str), Some("data: [DONE]\n\n"));
    assert_eq!(asked.body["choices"][0]["message"]["content"], "one two");
    let whole = post(&service, RESPONSES_PATH, &json!({"model": "m", "input": "hi"}));
    assert_eq!(whole.stream, None, "no stream unless asked");
    let unscripted = Service::new(None, Script::default());
    let act = post(
        &unscripted,
        RESPONSES_PATH,
        &json!({"model": "m", "input": "show me your code", "stream": true}),
    );
    assert_eq!(act.stream.map(|s| s.gap), Some(SHOWCASE_GAP), "its own acts stream at a pace");
    let echo =
        post(&unscripted, RESPONSES_PATH, &json!({"model": "m", "input": "hi", "stream": true}));
    assert_eq!(echo.stream.map(|s| s.gap), Some(Duration::ZERO), "the echo comes at once");
}
