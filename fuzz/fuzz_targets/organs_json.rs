//! Fuzzes `body/organs.json` as the kernel reads it (`pins::parse`). A pin
//! that is accepted has a well-formed name, a 64-hex-digit hash, an https
//! URL, and a dir and check that stay inside the organ.
#![no_main]

use teneral::organs::pins::{parse, relative_ok};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(pins) = parse(text) else { return };
    for pin in pins {
        assert!(!pin.name.is_empty(), "an empty organ name was accepted");
        assert!(
            pin.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{:?}",
            pin.name
        );
        assert!(pin.sha256.len() == 64 && pin.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(pin.url.starts_with("https://") && pin.url.ends_with(".tar.gz"), "{}", pin.url);
        if let Some(words) = &pin.check {
            assert!(!words.is_empty() && relative_ok(&words[0]), "check {words:?}");
        }
        if let Some(dir) = &pin.dir {
            assert!(relative_ok(dir), "dir {dir:?} leaves the organ");
        }
    }
});
