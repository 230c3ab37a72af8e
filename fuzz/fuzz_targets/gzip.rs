//! Fuzzes the organ unpacker's gzip reader. Whatever it accepts, flate2's
//! own multi-member decoder decodes to the same bytes (it checks the same
//! trailers; it is laxer about what follows the last member).
#![no_main]

use std::io::Read;

use teneral::organs::unpack::gzip::GzipReader;

const MAX: u64 = 8 << 20;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut ours = Vec::new();
    let ok = GzipReader::new(data).take(MAX).read_to_end(&mut ours).is_ok();
    if ok && (ours.len() as u64) < MAX {
        let mut theirs = Vec::new();
        let got = flate2::bufread::MultiGzDecoder::new(data).take(MAX).read_to_end(&mut theirs);
        assert!(got.is_ok(), "flate2 refuses what was accepted: {got:?}");
        assert_eq!(ours, theirs, "the two decoders disagree");
    }
});
