//! The unpacker holds its own costs: deep chains and many long names finish
//! or are refused within the limit, the deadline stops unpacking at the
//! entry it reached, depth and path length are bounded, and names are shown
//! escaped in messages.

use std::io::Read;
use std::time::{Duration, Instant};

use teneral::organs::cache;
use teneral::organs::unpack::resolve::Refusal;
use teneral::organs::unpack::{unpack_tar, unpack_tar_within, Limits, UnpackError};
use teneral::organs::UNPACK_LIMIT;

use super::corpus::{refused, Place};
use super::tarball::{Head, Tar};
use crate::common::TestResult;
use teneral_testkit::{Within, QUICK};

/// Gzip of `tar` by the system's gzip (fast, even in a debug build).
fn gzip9(tar: &[u8]) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("a.tar");
    std::fs::write(&path, tar)?;
    let out =
        std::process::Command::new("gzip").arg("-9").arg("-c").arg(&path).output_within(QUICK)?;
    assert!(out.status.success(), "gzip failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(out.stdout)
}

#[test]
fn deep_chains_of_many_files_finish_or_are_refused_within_the_limit() -> TestResult {
    // The costliest archive found: 8 chains 2,040 directories deep (names of
    // 4,084 bytes), a file at every level, 16,320 files; about 463 KB.
    let mut t = Tar::new();
    for chain in 0..8 {
        for level in 1..=2040 {
            let name = format!("c{chain}/{}f", "d/".repeat(level));
            t.named_file(name.as_bytes(), b"");
        }
    }
    let archive = gzip9(&t.finish())?;
    assert!(archive.len() < 1 << 20, "the archive is small: {} bytes", archive.len());
    let p = Place::new()?;
    let started = Instant::now();
    let got = cache::unpack_file(&archive[..], &p.stage());
    let took = started.elapsed();
    match &got {
        Ok((summary, _)) => assert!(summary.entries > 16_000, "{summary:?}"),
        Err(UnpackError::Refused { reason: Refusal::TooDeep, entry }) => {
            assert!(entry.starts_with("c0/d/d/"), "refused at the first entry too deep: {entry}");
        }
        Err(UnpackError::TimedOut { .. }) => {}
        Err(other) => unreachable!("neither finished nor refused for its cost: {other}"),
    }
    // A liveness bound, not a benchmark: the goal is 5 s, far below the limit.
    assert!(took < Duration::from_secs(5).min(UNPACK_LIMIT), "took {took:?}");
    p.assert_nothing_outside("deep chains");
    Ok(())
}

#[test]
fn sixteen_thousand_long_names_at_the_deepest_depth_finish_quickly() -> TestResult {
    // Within every bound: 250 levels of 15-byte names (4,000-byte paths),
    // 64 files on each level, entries in order.
    let part = "abcdefghijklmn/";
    let mut t = Tar::new();
    for level in 1..=250 {
        for i in 0..64 {
            t.named_file(format!("{}f{i}", part.repeat(level)).as_bytes(), b"x");
        }
    }
    let tar = t.finish();
    let p = Place::new()?;
    let started = Instant::now();
    let summary = unpack_tar(&tar[..], &p.stage())?;
    let took = started.elapsed();
    assert_eq!(summary.entries, 250 * 64 + 250, "files and the directories made for them");
    // A liveness bound: the 5 s goal in an optimized build, the limit in a
    // debug one (where hashing and slicing run unoptimized).
    let bound = if cfg!(debug_assertions) { UNPACK_LIMIT } else { Duration::from_secs(5) };
    assert!(took < bound, "took {took:?}");
    eprintln!("16,250 entries of 4,000-byte names: {took:?}");
    let deepest = p.stage().join(format!("{}f63", part.repeat(250)));
    assert_eq!(std::fs::read(deepest)?, b"x");
    Ok(())
}

/// A reader that gives its bytes slowly: 64 KiB every 20 ms.
struct Slow<'a>(&'a [u8]);

impl Read for Slow<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::thread::sleep(Duration::from_millis(20));
        let n = buf.len().min(64 << 10).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn the_deadline_stops_unpacking_at_the_entry_it_reached() -> TestResult {
    // Between entries: a deadline already passed stops at the first one.
    let tar = Tar::new().file("first", b"1").file("second", b"2").finish();
    let p = Place::new()?;
    let limits = Limits::new(Duration::ZERO, &p.stage());
    match unpack_tar_within(&tar[..], &p.stage(), &limits) {
        Err(e @ UnpackError::TimedOut { .. }) => {
            let text = e.to_string();
            assert!(text.starts_with("unpacking stopped at entry \"first\""), "{text}");
            assert!(text.contains("pin a release with fewer entries or less data"), "{text}");
        }
        other => unreachable!("want a time-out at the first entry, got {other:?}"),
    }
    // Within an entry: 8 MiB given slowly (2.5 s) against 300 ms.
    let tar = Tar::new().file("small", b"s").file("big", &vec![7u8; 8 << 20]).finish();
    let p = Place::new()?;
    let started = Instant::now();
    let limits = Limits::new(Duration::from_millis(300), &p.stage());
    match unpack_tar_within(Slow(&tar), &p.stage(), &limits) {
        Err(UnpackError::TimedOut { entry, limit }) => {
            assert_eq!((entry.as_str(), limit), ("big", Duration::from_millis(300)));
        }
        other => unreachable!("want a time-out inside big, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2), "stopped late: {:?}", started.elapsed());
    p.assert_nothing_outside("slow");
    Ok(())
}

#[test]
fn names_deeper_than_256_are_refused() -> TestResult {
    let at = |n: usize| format!("{}f", "d/".repeat(n - 1));
    let tar = Tar::new().named_file(at(256).as_bytes(), b"ok").finish();
    unpack_tar(&tar[..], &Place::new()?.stage())?;
    let tar = Tar::new().named_file(at(257).as_bytes(), b"no").finish();
    let entry = teneral::organs::unpack::resolve::show(at(257).as_bytes());
    refused(&Place::new()?, "257 deep", &tar, &entry, Refusal::TooDeep);
    // A symlink's own name counts; its target is bounded by its length.
    let tar = Tar::new().gnu_long_name(at(257).as_bytes()).symlink("l", "x").finish();
    refused(&Place::new()?, "deep link", &tar, &entry, Refusal::TooDeep);
    Ok(())
}

#[test]
fn paths_longer_than_path_max_where_the_tree_is_used_are_refused() -> TestResult {
    // 1,100 bytes fit behind a short root, not behind a 3,000-byte one.
    let name = ("n".repeat(99) + "/").repeat(10) + &"n".repeat(99);
    assert_eq!(name.len(), 1099);
    let tar = Tar::new().named_file(name.as_bytes(), b"x").finish();
    unpack_tar(&tar[..], &Place::new()?.stage())?;
    let p = Place::new()?;
    let limits = Limits { root_len: 3000, ..Limits::new(UNPACK_LIMIT, &p.stage()) };
    let got = unpack_tar_within(&tar[..], &p.stage(), &limits);
    match &got {
        Err(UnpackError::Refused { reason, .. }) => {
            assert_eq!(reason, &Refusal::PathTooLong { len: 3000 + 1 + 1099, root_len: 3000 });
        }
        other => unreachable!("want PathTooLong, got {other:?}"),
    }
    let text = got.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("its path would be 4100 bytes long"), "{text}");
    assert!(text.contains("at most 4095 (PATH_MAX)"), "{text}");
    p.assert_nothing_outside("long path");
    Ok(())
}

#[test]
fn names_with_control_characters_are_shown_escaped_and_cut() -> TestResult {
    let name = b"evil\x1b[2J\x1b]0;owned\x07\nname\xff";
    let h = Head { name: name.to_vec(), kind: b'6', ..Head::default() };
    let tar = Tar::new().raw(&h, b"").finish();
    let p = Place::new()?;
    let text = unpack_tar(&tar[..], &p.stage()).err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(
        text,
        "entry \"evil\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\nname\u{fffd}\" is refused: it is a fifo; \
         only files, directories and links are allowed"
    );
    assert!(!text.chars().any(char::is_control), "no control character reaches the message");
    // A long name is cut at 200 characters in the message.
    let long = "z".repeat(3000);
    let tar = Tar::new().gnu_long_name(long.as_bytes()).special("x", b'3').finish();
    let text = unpack_tar(&tar[..], &p.stage()).err().map(|e| e.to_string()).unwrap_or_default();
    let want = format!("entry \"{}... (3000 bytes in all)\" is refused", "z".repeat(200));
    assert!(text.starts_with(&want), "{text}");
    Ok(())
}

#[test]
fn what_follows_the_end_block_is_zeros_or_refused() -> TestResult {
    let tar = Tar::new().file("f", b"x").finish();
    let with = |extra: &[u8]| [tar.as_slice(), extra].concat();
    // GNU tar pads to 10 KiB records: accepted.
    unpack_tar(&with(&[0; 10240 - 2048])[..], &Place::new()?.stage())?;
    // A lone end block (the second missing) is accepted too.
    unpack_tar(&tar[..tar.len() - 512], &Place::new()?.stage())?;
    let appended = Tar::new().file("g", b"y").finish();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a second archive appended", with(&appended), "byte 513 after the end-of-archive block"),
        ("one byte of junk", with(&[0, 0, 9]), "byte 515 after the end-of-archive block"),
        ("over 1 MiB of zeros", with(&vec![0; (1 << 20) + 1024]), "more than 1 MiB of zeros"),
        ("no end block at all", tar[..tar.len() - 1024].to_vec(), "without its end-of-archive"),
    ];
    for (case, bytes, want) in cases {
        let p = Place::new()?;
        match unpack_tar(&bytes[..], &p.stage()) {
            Err(UnpackError::Corrupt(text)) => assert!(text.contains(want), "{case}: {text}"),
            other => unreachable!("{case}: want a refusal, got {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn gzip_members_with_a_wrong_crc_length_or_a_cut_are_refused_each_with_its_message() -> TestResult {
    let tar = Tar::new().file("pkg/a", b"hello").finish();
    let good = super::tarball::gz(&tar);
    let n = good.len();
    let patched = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0xff;
        b
    };
    let mut second = good.clone();
    second.extend(super::tarball::gz(b"more"));
    let mut junk = good.clone();
    junk.extend(b"junk");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("wrong CRC", patched(n - 8), "member 1: its trailer gives CRC32 "),
        ("wrong length", patched(n - 4), "member 1: its trailer gives a length (ISIZE) of "),
        (
            "cut trailer",
            good[..n - 3].to_vec(),
            "member 1: the stream ends inside its 8-byte trailer (5 bytes of it are there)",
        ),
        (
            "cut member",
            good[..n / 2].to_vec(),
            "member 1: the stream ends inside its compressed data",
        ),
        (
            "a second member's bytes after the end block",
            second,
            "byte 513 after the end-of-archive block is not zero",
        ),
        (
            "junk after the last member",
            junk,
            "after member 1: bytes that are not another gzip member",
        ),
        ("not gzip", tar.clone(), "it does not start with a gzip header"),
    ];
    for (case, archive, want) in cases {
        let p = Place::new()?;
        let got = cache::unpack_file(&archive[..], &p.stage());
        let text = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
        assert!(got.is_err() && text.contains(want), "{case}: {got:?}");
        p.assert_nothing_outside(case);
        // The caged unpacker's way, inflating on a thread of its own: the
        // same refusal in the same words.
        let p = Place::new()?;
        let got = counted(&archive, &p.stage());
        let said = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
        assert_eq!(said, text, "{case}: {got:?}");
    }
    // The good one unpacks, and so do two members holding one archive.
    cache::unpack_file(&good[..], &Place::new()?.stage())?;
    let (head, tail) = tar.split_at(700);
    let split = [super::tarball::gz(head), super::tarball::gz(tail)].concat();
    cache::unpack_file(&split[..], &Place::new()?.stage())?;
    for archive in [&good, &split] {
        let p = Place::new()?;
        let (summary, read) = counted(archive, &p.stage())?;
        assert_eq!((summary.entries, read), (2, archive.len() as u64));
        assert_eq!(super::listing(&p.stage()), ["pkg d 755", "pkg/a f 644 hello"]);
    }
    Ok(())
}

/// [`cache::unpack_counted_within`], the caged unpacker's way, on `archive`.
fn counted(
    archive: &[u8],
    stage: &std::path::Path,
) -> Result<(teneral::organs::unpack::Summary, u64), teneral::organs::unpack::UnpackError> {
    let limits = Limits::new(UNPACK_LIMIT, stage);
    cache::unpack_counted_within(std::io::Cursor::new(archive.to_vec()), stage, &limits)
}
