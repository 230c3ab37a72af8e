//! The owner's images: an owner line's `[image: memory/images/<sha256>.<ext>]`
//! lines reach the model as images in each protocol's own shape, and the
//! stand-in takes them; an image whose bytes do not match its name (a body
//! rewrote it), one that is no image, and a fifth one are not shown.

use std::fs;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::*;

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A GIF header is enough for the magic bytes.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";

/// Stores `bytes` as the client does; returns the owner line's image line.
fn store(rig: &Rig, bytes: &[u8], ext: &str) -> String {
    let hash: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    let path = format!("memory/images/{hash}.{ext}");
    fs::create_dir_all(rig.home.join("memory/images")).expect("the images directory");
    fs::write(rig.home.join(&path), bytes).expect("an image stored");
    format!("[image: {path}]")
}

/// The user message of the last request, whatever the protocol.
fn last_user_content(rig: &Rig) -> Vec<Value> {
    let requests = rig.requests();
    let body = body_of(requests.last().expect("a request"));
    let list = match rig.wire {
        Wire::Chat => &body["messages"],
        Wire::Responses => &body["input"],
    };
    let user = list.as_array().expect("a list").iter().rev().find(|m| m["role"] == "user");
    match &user.expect("a user message")["content"] {
        Value::Array(parts) => parts.clone(),
        text => vec![json!({"type": "text", "text": text})],
    }
}

fn image_urls(wire: &Wire, parts: &[Value]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|p| match wire {
            Wire::Chat if p["type"] == "image_url" => p["image_url"]["url"].as_str(),
            Wire::Responses if p["type"] == "input_image" => p["image_url"].as_str(),
            _ => None,
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_owner_image_reaches_the_model_in_both_protocols() {
    for wire in [Wire::Chat, Wire::Responses] {
        let mut rig = Rig::new(wire, &[r#"{"reply":"a small picture"}"#]);
        rig.start_ready();
        let png = store(&rig, PNG, "png");
        let gif = store(&rig, GIF, "gif");
        rig.say(1, &format!("what is this?\n{png}\n{gif}"));
        let journal = rig.wait_turns(1);
        assert_eq!(of(&journal, "reply")[0]["text"], "a small picture", "{}", rig.report());
        let parts = last_user_content(&rig);
        let text_kind = match rig.wire {
            Wire::Chat => "text",
            Wire::Responses => "input_text",
        };
        assert_eq!(parts[0]["type"], text_kind, "{parts:?}");
        assert!(parts[0]["text"].as_str().expect("text").starts_with("what is this?\n[image: "));
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(
            image_urls(&rig.wire, &parts),
            [
                format!("data:image/png;base64,{}", b64(PNG)),
                format!("data:image/gif;base64,{}", b64(GIF))
            ]
        );
        if matches!(rig.wire, Wire::Responses) {
            assert_eq!(parts[1]["detail"], "auto");
        }
    }
}

#[test]
fn a_changed_a_false_and_a_fifth_image_are_not_shown() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"reply":"ok"}"#]);
    rig.start_ready();
    let images: Vec<String> = (0..4).map(|_| store(&rig, PNG, "png")).collect();
    // A body rewrites an image the owner sent: its bytes no longer hash to its name.
    let changed = store(&rig, b"GIF89a changed", "gif");
    let path = changed.trim_start_matches("[image: ").trim_end_matches(']');
    fs::write(rig.home.join(path), GIF).expect("the image rewritten");
    // Text stored under a name that says PNG.
    let text = store(&rig, b"just text, not a picture", "png");
    rig.say(1, &format!("look\n{changed}\n{text}\n{}", images.join("\n")));
    rig.wait_turns(1);
    let parts = last_user_content(&rig);
    assert_eq!(image_urls(&rig.wire, &parts).len(), 4, "{parts:?}");
    let said = parts[0]["text"].as_str().expect("the line's text");
    assert!(said.contains("(not shown: its bytes no longer match its name"), "{said}");
    assert!(said.contains("(not shown: its bytes are not image/png)"), "{said}");
    // The same line five times over: four shown, the fifth said not to be.
    let mut rig = Rig::new(Wire::Responses, &[r#"{"reply":"ok"}"#]);
    rig.start_ready();
    let png = store(&rig, PNG, "png");
    rig.say(1, &vec![png; 5].join("\n"));
    rig.wait_turns(1);
    let parts = last_user_content(&rig);
    assert_eq!(image_urls(&rig.wire, &parts).len(), 4, "{parts:?}");
    let said = parts[0]["text"].as_str().expect("the line's text");
    assert!(said.ends_with("(not shown: at most 4 images a line)"), "{said}");
}

#[test]
fn image_lines_are_only_the_owners() {
    let mut rig = Rig::new(Wire::Chat, &[r#"{"reply":"ok"}"#]);
    rig.start_ready();
    let png = store(&rig, PNG, "png");
    let envelope = json!({"v": 1, "id": "e1", "from": "ada", "to": "anyone", "replyTo": null,
        "ts": "2026-11-11T12:00:00Z", "hops": 0, "text": format!("see\n{png}")});
    rig.envelope("e1.json", &envelope.to_string());
    rig.wait_turns(1);
    let parts = last_user_content(&rig);
    assert!(image_urls(&rig.wire, &parts).is_empty(), "{parts:?}");
}
