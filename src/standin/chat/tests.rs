//! Table tests of the chat completions checks and answer.
use serde_json::{json, Value};

use super::*;
use crate::standin::turn::Call;

fn base(messages: Value) -> Value {
    json!({"model": "m", "messages": messages})
}

fn with(extra: Value) -> Value {
    let mut body = base(json!([{"role": "user", "content": "hi"}]));
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    body
}

fn tool_round(calls: &[&str]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}))
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn tool(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

#[test]
fn refusals() {
    let user = json!({"role": "user", "content": "hi"});
    let table: Vec<(Value, &str, Option<&str>)> = vec![
        (json!([]), "must be a JSON object", None),
        (with(json!({"foo": 1})), "Unrecognized request argument supplied: foo", None),
        (json!({"messages": [user]}), "you must provide a model parameter", None),
        (json!({"model": 3, "messages": [user]}), "Invalid type for 'model'", Some("model")),
        (json!({"model": "m"}), "Missing required parameter: 'messages'.", Some("messages")),
        (base(json!([])), "empty array", Some("messages")),
        (base(json!([{"content": "x"}])), "Missing required parameter: 'messages[0].role'.", Some("messages[0].role")),
        (base(json!([{"role": "function", "content": "x"}])), "Invalid value: 'function'.", Some("messages[0].role")),
        (base(json!([{"role": "user"}])), "Missing required parameter: 'messages[0].content'.", Some("messages[0].content")),
        (base(json!([{"role": "user", "content": 5}])), "Invalid type for 'messages[0].content'", Some("messages[0].content")),
        (base(json!([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}])), "Invalid value: 'input_text'.", Some("messages[0].content[0].type")),
        (base(json!([{"role": "user", "content": "x", "tool_calls": []}])), "Unknown parameter: 'messages[0].tool_calls'.", Some("messages[0].tool_calls")),
        (base(json!([user, {"role": "assistant"}])), "needs 'content' or 'tool_calls'", Some("messages[1]")),
        (base(json!([user, {"role": "assistant", "content": "x", "reasoning_content": "r"}])), "Unknown parameter: 'messages[1].reasoning_content'.", Some("messages[1].reasoning_content")),
        (base(json!([user, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{}"}}]}])), "Missing required parameter: 'messages[1].tool_calls[0].id'.", Some("messages[1].tool_calls[0].id")),
        (base(json!([user, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "a", "arguments": {}}}]}])), "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead.", Some("messages[1].tool_calls[0].function.arguments")),
        (base(json!([user, tool("c1", "x")])), "must be a response to a preceding message with 'tool_calls'", Some("messages[1].role")),
        (base(json!([user, tool_round(&["c1"]), tool("c2", "x")])), "'tool_call_id' of 'c2' not found", Some("messages[2].tool_call_id")),
        (base(json!([user, tool_round(&["c1"]), {"role": "tool", "content": "x"}])), "Missing required parameter: 'messages[2].tool_call_id'.", Some("messages[2].tool_call_id")),
        (base(json!([user, tool_round(&["c1", "c2"]), tool("c1", "x"), user])), "did not have response messages: c2", Some("messages[3].role")),
        (base(json!([user, tool_round(&["c1"])])), "did not have response messages: c1", Some("messages")),
        (base(json!([user, tool_round(&["c1"]), tool("c1", "x"), tool("c1", "y")])), "already answered", Some("messages[3].tool_call_id")),
        (with(json!({"stream": "yes"})), "Invalid type for 'stream'", Some("stream")),
        (with(json!({"stream_options": {"include_usage": true}})), "only allowed when 'stream' is enabled", Some("stream_options")),
        (with(json!({"stream": true, "stream_options": {"usage": true}})), "Unknown parameter: 'stream_options.usage'.", Some("stream_options.usage")),
        (with(json!({"n": 2})), "Invalid value: '2'.", Some("n")),
        (with(json!({"temperature": 3})), "above maximum value", Some("temperature")),
        (with(json!({"max_tokens": 0})), "below minimum value", Some("max_tokens")),
        (with(json!({"reasoning_effort": "huge"})), "Invalid value: 'huge'.", Some("reasoning_effort")),
        (with(json!({"tool_choice": "auto"})), "'tool_choice' is only allowed when 'tools' are specified", Some("tool_choice")),
        (with(json!({"parallel_tool_calls": false})), "'parallel_tool_calls' is only allowed when 'tools' are specified", Some("parallel_tool_calls")),
        (with(json!({"tools": []})), "empty array", Some("tools")),
        (with(json!({"tools": [{"type": "function", "name": "bash"}]})), "Unknown parameter: 'tools[0].name'.", Some("tools[0].name")),
        (with(json!({"tools": [{"type": "function", "function": {"name": "has space"}}]})), "does not match pattern", Some("tools[0].function.name")),
        (with(json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": "x"}}]})), "Invalid type for 'tools[0].function.parameters'", Some("tools[0].function.parameters")),
        (with(json!({"tools": [{"type": "web_search"}]})), "Invalid value: 'web_search'.", Some("tools[0].type")),
        (base(json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}]}])), "unsupported image", Some("messages[0].content[0].image_url.url")),
        (base(json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGVsbG8="}}]}])), "Invalid value: 'text/plain'.", Some("messages[0].content[0].image_url.url")),
    ];
    crate::standin::wire::assert_refusals(table.to_vec(), validate);
}

#[test]
fn accepts_a_full_tool_round_and_finds_the_newest_input() {
    let body = json!({
        "model": "gpt-test",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": [{"type": "text", "text": "list"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
            tool_round(&["call_1", "call_2"]),
            tool("call_2", "b.txt"),
            tool("call_1", "a.txt"),
        ],
        "tools": [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "temperature": null,
        "max_completion_tokens": 100,
        "reasoning_effort": "low",
        "user": "u",
        "n": 1,
    });
    let checked = validate(&body).unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(
        checked,
        Checked {
            model: "gpt-test".into(),
            newest: Newest::Tool("a.txt".into()),
            asked: Asked::default()
        }
    );

    let user_last =
        base(json!([{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]));
    let checked = validate(&user_last).unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(checked.newest, Newest::User("hello".into()));
}

#[test]
fn renders_text_and_tool_calls() {
    let usage = Usage { input: 10, output: 3, reasoning: 1 };
    let text = Turn { text: Some("hi".into()), reasoning: Some("hmm".into()), calls: vec![] };
    assert_eq!(
        render("m", 4, 99, &text, usage),
        json!({
            "id": "chatcmpl-4", "object": "chat.completion", "created": 99, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "refusal": null,
                "annotations": [], "reasoning_content": "hmm"}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 1}},
        })
    );
    let calls = Turn {
        text: None,
        reasoning: None,
        calls: vec![Call { n: 7, name: "bash".into(), arguments: "{\"cmd\":\"ls\"}".into() }],
    };
    let answer = render("m", 5, 99, &calls, usage);
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(answer["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"],
        json!([{"id": "call_7", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}])
    );
}
