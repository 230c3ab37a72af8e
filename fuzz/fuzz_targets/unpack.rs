//! Fuzzes the organ unpacker with raw tar streams (`cargo +nightly fuzz run unpack`).
#![no_main]

#[path = "../logic.rs"]
mod logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| logic::check(data));
