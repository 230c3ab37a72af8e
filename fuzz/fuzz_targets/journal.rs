//! Fuzzes the journal reader: any bytes as a journal file (torn lines,
//! mixed and unknown types, invalid UTF-8) read backwards, each line parsed
//! and rendered for the owner. Checks that reading backwards yields exactly
//! the file's lines in reverse, that `last_events` agrees, and that no
//! rendered line holds a control character other than a newline.
#![no_main]

use std::io::Write;

use teneral::journal::{last_events, parse_line, Backwards};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An odd first byte repeats the input past the reader's 64 KiB block,
    // so lines that straddle blocks are read too.
    let mut bytes = data.to_vec();
    if data.first().is_some_and(|b| b % 2 == 1) {
        while bytes.len() <= 70_000 {
            bytes.extend_from_slice(data);
        }
    }
    let Ok(mut file) = tempfile::tempfile() else { return };
    if file.write_all(&bytes).is_err() {
        return;
    }
    let Ok(reopened) = file.try_clone() else { return };
    let Ok(mut back) = Backwards::new(reopened) else { return };
    let mut got = Vec::new();
    while let Ok(Some(line)) = back.next_line() {
        got.push(line);
    }
    let mut want: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if bytes.ends_with(b"\n") || bytes.is_empty() {
        want.pop();
    }
    want.reverse();
    assert_eq!(got, want, "reading backwards lost or changed lines");
    let mut whole = Vec::new();
    for line in &got {
        if let Some(event) = parse_line(line) {
            assert!(!event.kind.is_empty() || event.fields.get("type").is_some());
            if let Some(shown) = teneralctl::talk::render::render(&event, 80) {
                assert!(
                    !shown.chars().any(|c| c.is_control() && c != '\n'),
                    "a rendered event holds a control character: {shown:?}"
                );
            }
            whole.push(event);
        }
    }
    whole.reverse();
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    if let Ok((last, len)) = last_events(std::path::Path::new(&path), usize::MAX, |_| true) {
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(last, whole, "last_events disagrees with the lines parsed one by one");
    }
});
