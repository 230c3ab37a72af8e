//! The malicious corpus: each archive is refused, the refusal names the
//! entry and says why, and nothing is written outside the staging directory.

use std::path::{Path, PathBuf};

use teneral::organs::unpack::resolve::Refusal;
use teneral::organs::unpack::{unpack_tar, UnpackError};

use super::tarball::{gz, Format, Head, Tar};
use crate::common::TestResult;

/// A place to unpack: `<tmp>/stage` (the staging directory) and
/// `<tmp>/outside`, an empty directory every escape aims at.
pub struct Place {
    pub dir: tempfile::TempDir,
}

impl Place {
    pub fn new() -> Result<Self, std::io::Error> {
        let dir = tempfile::Builder::new().prefix("tnl-organ").tempdir()?;
        std::fs::create_dir(dir.path().join("stage"))?;
        std::fs::create_dir(dir.path().join("outside"))?;
        Ok(Self { dir })
    }

    pub fn stage(&self) -> PathBuf {
        self.dir.path().join("stage")
    }

    /// The absolute path of `outside/<rest>`, as text for an entry name.
    pub fn outside(&self, rest: &str) -> String {
        format!("{}/outside/{rest}", self.dir.path().display())
    }

    /// Nothing but `stage` and an empty `outside` in the place.
    pub fn assert_nothing_outside(&self, case: &str) {
        let mut top: Vec<String> = std::fs::read_dir(self.dir.path())
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        top.sort();
        assert_eq!(top, ["outside", "stage"], "{case}: written beside the staging directory");
        let outside = std::fs::read_dir(self.dir.path().join("outside")).map(|d| d.count());
        assert_eq!(outside.ok(), Some(0), "{case}: written outside the staging directory");
    }
}

/// Unpacks `tar` and asserts the refusal of `entry` for `reason`.
fn refused(place: &Place, case: &str, tar: &[u8], entry: &str, reason: Refusal) {
    let got = unpack_tar(tar, &place.stage());
    match &got {
        Err(UnpackError::Refused { entry: e, reason: r }) => {
            assert_eq!((e.as_str(), r), (entry, &reason), "{case}");
            let text = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
            assert!(text.contains(&format!("entry {entry:?} is refused")), "{case}: {text}");
        }
        other => unreachable!("{case}: want {entry:?} refused for {reason}, got {other:?}"),
    }
    place.assert_nothing_outside(case);
}

fn ustar(name: &str, kind: u8, size: u64) -> Head {
    Head { name: name.into(), kind, size, ..Head::default() }
}

#[test]
fn names_that_leave_the_tree_are_refused() -> TestResult {
    let p = Place::new()?;
    let abs = p.outside("pwned");
    let cases: Vec<(&str, Vec<u8>, String, Refusal)> = vec![
        ("absolute", Tar::new().file(&abs, b"x").finish(), abs.clone(), Refusal::Absolute),
        (
            "double slash",
            Tar::new().file(&format!("/{abs}"), b"x").finish(),
            format!("/{abs}"),
            Refusal::Absolute,
        ),
        (
            "../x",
            Tar::new().file("../outside/pwned", b"x").finish(),
            "../outside/pwned".into(),
            Refusal::Climbs,
        ),
        (
            "a/../../x",
            Tar::new().dir("a", 0o755).file("a/../../outside/pwned", b"x").finish(),
            "a/../../outside/pwned".into(),
            Refusal::Climbs,
        ),
        (
            "PAX path that escapes",
            Tar::new().pax(&[("path", b"../outside/pwned")]).file("harmless", b"x").finish(),
            "../outside/pwned".into(),
            Refusal::Climbs,
        ),
        (
            "GNU long name that escapes",
            {
                let long = format!("{}../../outside/pwned", "d/".repeat(60));
                Tar::new().gnu_long_name(long.as_bytes()).file("harmless", b"x").finish()
            },
            format!("{}../../outside/pwned", "d/".repeat(60)),
            Refusal::Climbs,
        ),
        (
            "ustar prefix that escapes",
            {
                let h = Head {
                    name: b"pwned".to_vec(),
                    prefix: b"../outside".to_vec(),
                    size: 1,
                    ..Head::default()
                };
                Tar::new().raw(&h, b"x").finish()
            },
            "../outside/pwned".into(),
            Refusal::Climbs,
        ),
        (
            "a name longer than PATH_MAX",
            Tar::new().pax(&[("path", "a/".repeat(2100).as_bytes())]).file("f", b"x").finish(),
            "a/".repeat(2100),
            Refusal::TooLong,
        ),
    ];
    for (case, tar, entry, reason) in cases {
        refused(&p, case, &tar, &entry, reason);
    }
    Ok(())
}

#[test]
fn links_that_lead_out_are_refused() -> TestResult {
    let p = Place::new()?;
    let out = p.outside("");
    let out = out.trim_end_matches('/');
    let long_up = format!("{}{}outside", "x/".repeat(60), "../".repeat(61));
    let cases: Vec<(&str, Vec<u8>, &str, Refusal)> = vec![
        (
            "symlink to /tmp then a file through it",
            Tar::new().symlink("tmp", out).file("tmp/pwned", b"x").finish(),
            "tmp",
            Refusal::LinkOut(out.into()),
        ),
        (
            "cur -> ., par -> cur/.., then par/x",
            Tar::new()
                .symlink("cur", ".")
                .symlink("par", "cur/..")
                .file("par/outside/pwned", b"x")
                .finish(),
            "par",
            Refusal::LinkOut("cur/..".into()),
        ),
        (
            "symlink up then a directory of the same name (RUSTSEC-2026-0067)",
            Tar::new().symlink("d", "../outside").dir("d", 0o755).finish(),
            "d",
            Refusal::LinkOut("../outside".into()),
        ),
        (
            "hard link to an absolute path",
            Tar::new().hard_link("h", &p.outside("secret")).finish(),
            "h",
            Refusal::HardLinkOut(p.outside("secret")),
        ),
        (
            "hard link to ../",
            Tar::new().hard_link("h", "../outside/secret").finish(),
            "h",
            Refusal::HardLinkOut("../outside/secret".into()),
        ),
        (
            "hard link to a symlink that points out",
            Tar::new().symlink("s", out).hard_link("h", "s").finish(),
            "s",
            Refusal::LinkOut(out.into()),
        ),
        (
            "a GNU long link that escapes",
            Tar::new().gnu_long_link(long_up.as_bytes()).symlink("l", "short").finish(),
            "l",
            Refusal::LinkOut(long_up.clone()),
        ),
        (
            "a PAX linkpath that escapes",
            Tar::new().pax(&[("linkpath", b"../outside")]).symlink("l", "fine").finish(),
            "l",
            Refusal::LinkOut("../outside".into()),
        ),
        (
            "a link made to escape by a later link",
            Tar::new().symlink("a", "b/..").symlink("b", ".").finish(),
            "a",
            Refusal::LinkOut("b/..".into()),
        ),
    ];
    for (case, tar, entry, reason) in cases {
        refused(&Place::new()?, case, &tar, entry, reason);
    }
    Ok(())
}

#[test]
fn second_entries_and_writes_through_links_are_refused() -> TestResult {
    let cases: Vec<(&str, Vec<u8>, &str, Refusal)> = vec![
        (
            "symlink inside, then a directory of the same name",
            Tar::new().dir("real", 0o755).symlink("d", "real").dir("d", 0o755).finish(),
            "d",
            Refusal::Duplicate,
        ),
        (
            "symlink inside, then a file through it",
            Tar::new().dir("real", 0o755).symlink("d", "real").file("d/x", b"x").finish(),
            "d/x",
            Refusal::ThroughLink("d".into()),
        ),
        (
            "a file then a symlink of the same name",
            Tar::new().file("f", b"x").symlink("f", "g").finish(),
            "f",
            Refusal::Duplicate,
        ),
        (
            "a file twice",
            Tar::new().file("f", b"x").file("./f", b"y").finish(),
            "./f",
            Refusal::Duplicate,
        ),
        (
            "a directory twice",
            Tar::new().dir("d", 0o755).dir("d/", 0o755).finish(),
            "d/",
            Refusal::Duplicate,
        ),
        (
            "a file inside a file",
            Tar::new().file("f", b"x").file("f/g", b"y").finish(),
            "f/g",
            Refusal::ThroughFile("f".into()),
        ),
        (
            "hard link to a symlink inside",
            Tar::new().file("f", b"x").symlink("s", "f").hard_link("h", "s").finish(),
            "h",
            Refusal::HardLinkTarget("s".into()),
        ),
        (
            "hard link to a name not written",
            Tar::new().hard_link("h", "later").file("later", b"x").finish(),
            "h",
            Refusal::HardLinkTarget("later".into()),
        ),
        (
            "hard link to a directory",
            Tar::new().dir("d", 0o755).hard_link("h", "d").finish(),
            "h",
            Refusal::HardLinkTarget("d".into()),
        ),
    ];
    for (case, tar, entry, reason) in cases {
        refused(&Place::new()?, case, &tar, entry, reason);
    }
    Ok(())
}

#[test]
fn devices_fifos_and_unknown_types_are_refused() -> TestResult {
    for (kind, what) in [
        (b'6', "fifo"),
        (b'3', "character device"),
        (b'4', "block device"),
        (b'V', "entry of an unknown type"),
    ] {
        let tar = Tar::new().file("ok", b"x").special("special", kind).finish();
        refused(&Place::new()?, what, &tar, "special", Refusal::Type(what));
    }
    Ok(())
}

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
        other => unreachable!("the bomb was not refused: {other:?}"),
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
