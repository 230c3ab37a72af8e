//! Fuzzes one event line as the kernel reads it from a body's socket:
//! UTF-8 first, then `check_body_event`, then the owner file name of an
//! `owner.line`. An accepted event never carries a kernel field, and once
//! the kernel adds its fields and journals it, it reads back as that type.
#![no_main]

use serde_json::Value;
use teneral::journal::rules::{canonical_type, check_body_event, check_owner_file_name, Accepted};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((mut event, accepted)) = check_body_event(text) else { return };
    for field in ["seq", "ts", "commit"] {
        assert!(!event.contains_key(field), "an accepted event carries {field}");
    }
    if let Accepted::OwnerLine { file, .. } = &accepted {
        let _ = check_owner_file_name(file);
    }
    let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    event.insert("seq".into(), 7.into());
    event.insert("ts".into(), "2026-01-01T00:00:00Z".into());
    event.insert("commit".into(), "abc".into());
    let line = serde_json::to_vec(&Value::Object(event)).unwrap_or_default();
    let back = teneral::journal::parse_line(&line);
    assert_eq!(back.map(|e| e.kind), Some(canonical_type(&kind).to_owned()));
});
