//! The corpus, continued: lying sizes, ambiguous headers, malformed
//! archives, and the limits (20,000 entries, 1 GiB, the gzip bomb).

use std::path::Path;

use teneral::organs::unpack::resolve::Refusal;
use teneral::organs::unpack::{unpack_tar, UnpackError};

use super::corpus::{refused, ustar, Place};
use super::tarball::{gz, Format, Head, Tar};
use crate::common::TestResult;

#[test]
fn lying_sizes_and_ambiguous_headers_are_refused() -> TestResult {
    let cases: Vec<(&str, Vec<u8>, &str, Refusal)> = vec![
        (
            "PAX size that disagrees with the header (RUSTSEC-2026-0068)",
            Tar::new()
                .pax(&[("size", b"1024")])
                .raw(&ustar("f", b'0', 0), b"")
                .file("g", b"x")
                .finish(),
            "f",
            Refusal::PaxSize { pax: 1024, header: 0 },
        ),
        (
            "a GNU long name and a PAX path for one entry",
            Tar::new().gnu_long_name(b"one").pax(&[("path", b"two")]).file("f", b"x").finish(),
            "f",
            Refusal::TwoNames("name"),
        ),
        (
            "PAX sparse records",
            Tar::new().pax(&[("GNU.sparse.size", b"99")]).file("f", b"x").finish(),
            "f",
            Refusal::Sparse("PAX sparse records"),
        ),
        (
            "a metadata header too large to hold",
            Tar::new().gnu_long_name(&vec![b'a'; 70_000]).file("f", b"x").finish(),
            "././@LongLink",
            Refusal::MetadataTooLarge(70_001),
        ),
        (
            "a sparse entry declaring more than 1 GiB",
            {
                let h = Head {
                    name: b"huge".to_vec(),
                    kind: b'S',
                    size: 512,
                    format: Format::Gnu,
                    sparse: vec![(0, 512)],
                    real_size: 2 << 30,
                    ..Head::default()
                };
                Tar::new().raw(&h, &[7u8; 512]).finish()
            },
            "huge",
            Refusal::TooLarge,
        ),
        (
            "files adding up to more than 1 GiB",
            {
                let mut t = Tar::new();
                t.raw(&ustar("a", b'0', 1), b"x");
                // The second header alone declares the rest; its data never comes.
                t.bytes.extend_from_slice(&super::tarball::header(&ustar("b", b'0', 1 << 30)));
                t.bytes.clone()
            },
            "b",
            Refusal::TooLarge,
        ),
    ];
    for (case, tar, entry, reason) in cases {
        refused(&Place::new()?, case, &tar, entry, reason);
    }
    Ok(())
}

#[test]
fn malformed_archives_are_refused_as_such() -> TestResult {
    let mut bad_sum = Tar::new().file("f", b"x").finish();
    bad_sum[148] = b'7';
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad checksum", bad_sum),
        (
            "two long names",
            Tar::new().gnu_long_name(b"a").gnu_long_name(b"b").file("f", b"x").finish(),
        ),
        ("a long name and nothing after", Tar::new().gnu_long_name(b"a").finish()),
        ("cut inside a file", Tar::new().file("f", &[1u8; 2000]).bytes[..1200].to_vec()),
    ];
    for (case, tar) in cases {
        let p = Place::new()?;
        let got = unpack_tar(&tar[..], &p.stage());
        assert!(matches!(got, Err(UnpackError::Corrupt(_))), "{case}: {got:?}");
        p.assert_nothing_outside(case);
    }
    Ok(())
}

#[test]
fn more_than_20000_entries_are_refused() -> TestResult {
    let mut t = Tar::new();
    t.dir("d", 0o755);
    for i in 1..20_001 {
        t.raw(&ustar(&format!("d/{i}"), b'0', 0), b"");
    }
    let tar = t.finish();
    refused(&Place::new()?, "20,001 entries", &tar, "d/20000", Refusal::TooMany);
    Ok(())
}

#[test]
fn a_gzip_bomb_is_refused_before_it_is_written() -> TestResult {
    // One member holds a header declaring 1.5 GiB; members of 1 MiB of zeros
    // follow (concatenated gzip members are one stream to gzip and to us).
    let header = super::tarball::header(&ustar("bomb", b'0', 3 << 29));
    let zeros = gz(&vec![0u8; 1 << 20]);
    let mut archive = gz(&header);
    for _ in 0..1536 {
        archive.extend_from_slice(&zeros);
    }
    assert!(archive.len() < 4 << 20, "the bomb is small: {}", archive.len());
    let p = Place::new()?;
    let got = teneral::organs::cache::unpack_file(&archive[..], &p.stage());
    match got {
        Err(UnpackError::Refused { entry, reason }) => {
            assert_eq!((entry.as_str(), reason), ("bomb", Refusal::TooLarge));
        }
        other => panic!("the bomb was not refused: {other:?}"),
    }
    p.assert_nothing_outside("gzip bomb");
    assert_eq!(dir_size(&p.stage()), 0, "nothing of the bomb was written");
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}
