//! Fuzzes the organ unpacker with raw tar streams, each header's checksum
//! made right: `cargo +nightly fuzz run unpack fuzz/corpus/unpack fuzz/seeds/unpack`
//! (new inputs go to the first directory, which git ignores).
#![no_main]

#[path = "../logic.rs"]
mod logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| logic::check(&logic::fix_checksums(data)));
