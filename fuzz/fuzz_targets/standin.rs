//! Fuzzes the stand-in model's request handling: any body POSTed to the
//! Chat Completions and the Responses path (JSON parsing, validation,
//! rendering), and any text as a script. Every answer is a JSON object with
//! a status of 200 or an error body.
#![no_main]

use teneral::standin::service::{Service, CHAT_PATH, RESPONSES_PATH};
use teneral::standin::Script;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let service = Service::new(None, Script::default());
    for path in [CHAT_PATH, RESPONSES_PATH] {
        let answer = service.handle("POST", path, None, data, 1_700_000_000);
        assert!(answer.body.is_object(), "{path}: the answer is not a JSON object");
        assert!(
            answer.status == 200 || answer.body.get("error").is_some(),
            "{path}: status {} without an error body",
            answer.status
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Script::parse(text);
    }
});
