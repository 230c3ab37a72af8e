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

/// The owner's client: at `TENERAL_CTL`, or built beside the kernel
/// (`cargo build` at the repository's root makes both). `None` when neither
/// is there: the gate places only the kernel for the body's tests, so a
/// mutation's check leaves this test out (it says so), as it leaves out
/// the system tests.
fn ctl_bin() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("TENERAL_CTL") {
        let path = std::path::PathBuf::from(path);
        assert!(path.is_file(), "TENERAL_CTL names no file: {}", path.display());
        return Some(path);
    }
    let beside = kernel_bin().with_file_name("teneralctl");
    if beside.is_file() {
        return Some(beside);
    }
    eprintln!("skipped: no teneralctl beside {} (set TENERAL_CTL)", kernel_bin().display());
    None
}

/// `teneralctl talk` (`ctl`) with `lines` piped in; its exit status and stderr.
fn talk(ctl: &std::path::Path, rig: &Rig, lines: &str) -> (Option<i32>, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(ctl)
        .args(["talk", "--wait", "20", "-d"])
        .arg(&rig.home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("teneralctl starts");
    child.stdin.take().expect("its stdin").write_all(lines.as_bytes()).expect("lines piped");
    let out = child.wait_with_output().expect("teneralctl ends");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn images_the_client_attaches_reach_the_stand_in_in_both_protocols() {
    let Some(ctl) = ctl_bin() else { return };
    for wire in [Wire::Chat, Wire::Responses] {
        let mut rig = Rig::new(wire, &[r#"{"reply":"two pictures"}"#]);
        rig.start_ready();
        let shot = rig.home.join("../my shot.png");
        fs::write(&shot, PNG).expect("a png");
        let anim = rig.home.join("../anim.gif");
        fs::write(&anim, GIF).expect("a gif");
        let lines = format!(
            "/image '{}'\n/image file://{}\nwhat are these?\n",
            shot.display(),
            anim.display()
        );
        let (status, err) = talk(&ctl, &rig, &lines);
        assert_eq!(status, Some(0), "{err}\n{}", rig.report());
        let parts = last_user_content(&rig);
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(
            image_urls(&rig.wire, &parts),
            [
                format!("data:image/png;base64,{}", b64(PNG)),
                format!("data:image/gif;base64,{}", b64(GIF))
            ],
            "{}",
            rig.report()
        );
        let journal = rig.journal();
        let line = &of(&journal, "owner.line")[0]["text"];
        assert!(line
            .as_str()
            .expect("text")
            .starts_with("what are these?\n[image: memory/images/"));

        // Refused before anything is sent: a file that is no image, and a fifth image.
        let requests = rig.requests().len();
        let notes = rig.home.join("../notes.png");
        fs::write(&notes, "not a picture").expect("a text file");
        let (status, err) = talk(&ctl, &rig, &format!("/image {}\nlook\n", notes.display()));
        assert_eq!(status, Some(1), "{err}");
        assert!(err.contains("is not an image"), "{err}");
        let five = format!("/image {}\n", shot.display()).repeat(5) + "look\n";
        let (status, err) = talk(&ctl, &rig, &five);
        assert_eq!(status, Some(1), "{err}");
        assert!(err.contains("at most 4 images"), "{err}");
        assert_eq!(rig.requests().len(), requests, "nothing more was sent");
        assert_eq!(of(&rig.journal(), "owner.line").len(), 1);
    }
}
