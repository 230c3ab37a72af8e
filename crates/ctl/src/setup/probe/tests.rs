//! The judging of answers and errors, without a socket.
use serde_json::json;

use super::*;

#[test]
fn answers_are_judged() {
    use Judged::*;
    let words = |s: &str| Words(s.to_owned());
    let table: Vec<(Protocol, Value, Option<Judged>)> = vec![
        (
            Protocol::Chat,
            json!({"choices": [{"message": {"role": "assistant", "content": " Hello. "}}]}),
            Some(words("Hello.")),
        ),
        (
            Protocol::Chat,
            json!({"choices": [{"message": {"content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "record_word", "arguments": "{}"}}]}}]}),
            Some(ToolCall("record_word".into())),
        ),
        (Protocol::Chat, json!({"choices": [{"message": {"content": ""}}]}), Some(Nothing)),
        (Protocol::Chat, json!({"object": "list"}), None),
        (
            Protocol::Responses,
            json!({"output": [{"type": "reasoning", "summary": []}, {"type": "message", "content": [
                {"type": "output_text", "text": "Hi"}, {"type": "output_text", "text": " there"}]}]}),
            Some(words("Hi there")),
        ),
        (
            Protocol::Responses,
            json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "calling"}]},
                {"type": "function_call", "name": "record_word", "arguments": "{}", "call_id": "c"}]}),
            Some(ToolCall("record_word".into())),
        ),
        (Protocol::Responses, json!({"output": []}), Some(Nothing)),
        (Protocol::Responses, json!({"choices": []}), None),
    ];
    for (protocol, answer, expected) in table {
        assert_eq!(judge(protocol, &answer), expected, "{answer}");
    }
}

#[test]
fn the_providers_message_is_taken() {
    let table: &[(u16, &str, &str)] = &[
        (
            401,
            r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            "Incorrect API key provided.",
        ),
        (500, r#"{"error":"upstream down"}"#, "upstream down"),
        (502, "<html>Bad Gateway</html>\n", "<html>Bad Gateway</html>"),
        (503, "", "no message (HTTP 503)"),
    ];
    for (status, body, message) in table {
        assert_eq!(provider_message(*status, body), *message, "{body}");
    }
    assert!(hint(401).contains("key"));
    assert!(hint(429).contains("quota"));
    assert_eq!(hint(400), "");
}

#[test]
fn requests_offer_the_tool_only_in_the_tool_test() {
    for protocol in [Protocol::Chat, Protocol::Responses] {
        let (_, text) = text_request(protocol, "m");
        assert!(text.get("tools").is_none());
        let (_, tool) = tool_request(protocol, "m");
        assert_eq!(tool["tool_choice"], "auto");
        let tool_json = tool["tools"].to_string();
        assert!(tool_json.contains(TOOL), "{tool_json}");
    }
    assert_eq!(text_request(Protocol::Chat, "m").0, "/chat/completions");
    assert_eq!(tool_request(Protocol::Responses, "m").0, "/responses");
}

#[test]
fn model_lists() {
    let list = json!({"object": "list", "data": [{"id": "b"}, {"id": "a"}, {"id": "b"}, {"x": 1}]});
    assert_eq!(model_ids(&list), ["a", "b"]);
    assert!(model_ids(&json!({"error": {}})).is_empty());
}
