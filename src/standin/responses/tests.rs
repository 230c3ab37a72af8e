//! Table tests of the Responses checks and answer.
use serde_json::{json, Value};

use super::*;
use crate::standin::turn::Call;

fn none(_: &str) -> Option<Vec<String>> {
    None
}

fn with(extra: Value) -> Value {
    let mut body = json!({"model": "m", "input": "hi"});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    body
}

fn input(items: Value) -> Value {
    json!({"model": "m", "input": items})
}

fn call(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "bash", "arguments": "{}"})
}

fn output(id: &str, text: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": text})
}

#[test]
fn refusals() {
    let user = json!({"role": "user", "content": "hi"});
    let table: Vec<(Value, &str, Option<&str>)> = vec![
        (json!("x"), "must be a JSON object", None),
        (with(json!({"messages": []})), "Unknown parameter: 'messages'.", Some("messages")),
        (json!({"input": "x"}), "Missing required parameter: 'model'.", Some("model")),
        (json!({"model": "m"}), "Missing required parameter: 'input'.", Some("input")),
        (input(json!(5)), "Invalid type for 'input'", Some("input")),
        (
            input(json!([{"content": "x"}])),
            "Missing required parameter: 'input[0].type'.",
            Some("input[0].type"),
        ),
        (
            input(json!([{"role": "tool", "content": "x"}])),
            "Invalid value: 'tool'.",
            Some("input[0].role"),
        ),
        (
            input(json!([{"role": "user", "content": [{"type": "text", "text": "x"}]}])),
            "Invalid value: 'text'.",
            Some("input[0].content[0].type"),
        ),
        (
            input(json!([{"role": "user", "content": [{"type": "output_text", "text": "x"}]}])),
            "Invalid value: 'output_text'.",
            Some("input[0].content[0].type"),
        ),
        (
            input(
                json!([user, {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]),
            ),
            "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
            Some("input[1].content[0].type"),
        ),
        (
            input(json!([{"role": "user", "content": "x", "name": "n"}])),
            "Unknown parameter: 'input[0].name'.",
            Some("input[0].name"),
        ),
        (
            input(json!([{"type": "web_search_call"}])),
            "Invalid value: 'web_search_call'.",
            Some("input[0].type"),
        ),
        (
            input(json!([user, output("call_1", "x")])),
            "No tool call found for function call output with call_id call_1.",
            Some("input"),
        ),
        (
            input(json!([user, output("call_1", "x"), call("call_1")])),
            "No tool call found",
            Some("input"),
        ),
        (
            input(json!([user, call("call_1")])),
            "No tool output found for function call call_1.",
            Some("input"),
        ),
        (
            input(json!([user, call("call_1"), call("call_2"), output("call_1", "x")])),
            "No tool output found for function call call_2.",
            Some("input"),
        ),
        (
            input(
                json!([user, {"type": "function_call", "call_id": "c", "name": "bash", "arguments": {}}]),
            ),
            "Invalid type for 'input[1].arguments': expected a string, but got an object instead.",
            Some("input[1].arguments"),
        ),
        (
            input(
                json!([user, {"type": "function_call", "id": "call_1", "call_id": "call_1", "name": "bash", "arguments": "{}"}]),
            ),
            "Expected an ID that begins with 'fc'.",
            Some("input[1].id"),
        ),
        (
            input(json!([user, {"type": "function_call", "name": "bash", "arguments": "{}"}])),
            "Missing required parameter: 'input[1].call_id'.",
            Some("input[1].call_id"),
        ),
        (
            input(json!([{"type": "reasoning", "id": "rs_1"}])),
            "Missing required parameter: 'input[0].summary'.",
            Some("input[0].summary"),
        ),
        (
            with(json!({"tools": [{"type": "function", "function": {"name": "bash"}}]})),
            "Missing required parameter: 'tools[0].name'.",
            Some("tools[0].name"),
        ),
        (
            with(json!({"tools": [{"type": "function", "name": "bash", "function": {}}]})),
            "Unknown parameter: 'tools[0].function'.",
            Some("tools[0].function"),
        ),
        (
            with(json!({"tools": [{"type": "web_search"}]})),
            "only tools of type 'function'",
            Some("tools[0].type"),
        ),
        (
            with(json!({"tools": [{"type": "function", "name": "a b"}]})),
            "does not match pattern",
            Some("tools[0].name"),
        ),
        (with(json!({"stream": 1})), "Invalid type for 'stream'", Some("stream")),
        (
            with(json!({"stream": true, "stream_options": {"include_usage": true}})),
            "Unknown parameter: 'stream_options.include_usage'.",
            Some("stream_options.include_usage"),
        ),
        (with(json!({"background": true})), "cannot imitate 'background'", Some("background")),
        (
            with(json!({"reasoning": {"effort": "max"}})),
            "Invalid value: 'max'.",
            Some("reasoning.effort"),
        ),
        (
            with(json!({"reasoning": {"summary": "short"}})),
            "Invalid value: 'short'.",
            Some("reasoning.summary"),
        ),
        (
            with(json!({"reasoning": {"budget": 1}})),
            "Unknown parameter: 'reasoning.budget'.",
            Some("reasoning.budget"),
        ),
        (
            with(json!({"max_output_tokens": 10})),
            "Expected a value >= 16",
            Some("max_output_tokens"),
        ),
        (with(json!({"include": [3]})), "Invalid type for 'include[0]'", Some("include[0]")),
        (with(json!({"tool_choice": "any"})), "Invalid value: 'any'.", Some("tool_choice")),
        (with(json!({"truncation": "yes"})), "Invalid value: 'yes'.", Some("truncation")),
        (with(json!({"metadata": {"a": 1}})), "Invalid type for 'metadata.a'", Some("metadata.a")),
        (
            with(
                json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:image/gif;base64,aGVsbG8="}]}]}),
            ),
            "unsupported image",
            Some("input[0].content[0].image_url"),
        ),
        (
            with(json!({"previous_response_id": "resp_9"})),
            "Previous response with id 'resp_9' not found.",
            Some("previous_response_id"),
        ),
    ];
    crate::standin::wire::assert_refusals(table.to_vec(), |body| validate(body, &none));
}

#[test]
fn accepts_a_full_tool_round_and_finds_the_newest_input() {
    let body = json!({
        "model": "gpt-test",
        "instructions": "be brief",
        "input": [
            {"role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}]},
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash", "arguments": "{}", "status": "completed"},
            output("call_1", "a.txt"),
        ],
        "tools": [{"type": "function", "name": "bash", "description": "run", "parameters": {"type": "object"}, "strict": false}],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "max_output_tokens": 1000,
        "temperature": null,
        "truncation": "auto",
        "metadata": {"k": "v"},
        "user": "u",
    });
    let checked = validate(&body, &none).unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(
        checked,
        Checked {
            model: "gpt-test".into(),
            newest: Newest::Tool("a.txt".into()),
            store: false,
            encrypted: true,
            previous: None,
            stream: false,
        }
    );
}

#[test]
fn previous_response_supplies_the_calls_to_answer() {
    let stored = |id: &str| (id == "resp_1").then(|| vec!["call_4".to_owned()]);
    let answered = json!({"model": "m", "previous_response_id": "resp_1", "input": [output("call_4", "done")]});
    let checked = validate(&answered, &stored).unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(checked.newest, Newest::Tool("done".into()));
    assert_eq!(checked.previous.as_deref(), Some("resp_1"));
    let unanswered = json!({"model": "m", "previous_response_id": "resp_1", "input": "hi"});
    match validate(&unanswered, &stored) {
        Err(e) => assert_eq!(e.message, "No tool output found for function call call_4."),
        Ok(c) => unreachable!("{c:?}"),
    }
}

#[test]
fn renders_reasoning_message_then_calls() {
    let checked = Checked {
        model: "m".into(),
        newest: Newest::Nothing,
        store: true,
        encrypted: true,
        previous: None,
        stream: false,
    };
    let turn = Turn {
        text: Some("hi".into()),
        reasoning: Some("hmm".into()),
        calls: vec![Call { n: 7, name: "bash".into(), arguments: "{}".into() }],
    };
    let usage = Usage { input: 10, output: 3, reasoning: 1 };
    let answer = render(2, 99, &checked, &turn, usage);
    assert_eq!(
        answer["output"],
        json!([
            {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "hmm"}],
             "encrypted_content": "standin-reasoning-2"},
            {"type": "message", "id": "msg_2", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
            {"type": "function_call", "id": "fc_7", "call_id": "call_7", "name": "bash",
             "arguments": "{}", "status": "completed"},
        ])
    );
    assert_eq!(answer["id"], "resp_2");
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["created_at"], 99);
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 3,
               "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 13})
    );
}
