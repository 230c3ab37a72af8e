//! Fuzzes `.env` parsing (`Settings::parse`): any text is read or refused
//! with a message that says what is wrong, never a panic.
#![no_main]

use teneral::settings::Settings;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Settings::parse(text) {
        Ok(settings) => {
            let _ = format!("{settings:?}");
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.is_empty());
        }
    }
});
