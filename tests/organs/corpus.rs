//! The malicious corpus: each archive is refused, the refusal names the
//! entry and says why, and nothing is written outside the staging directory;
//! by the unpacker in this process and, in the same words, by the unpacker
//! the kernel runs in the cage's `unpack` profile.

use std::path::PathBuf;

use teneral::organs::unpack::resolve::{show, Refusal};
use teneral::organs::unpack::{unpack_tar, UnpackError};
use teneral::organs::unpacker::Outcome;

use super::tarball::{Head, Tar};
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

/// Unpacks `tar` and asserts the refusal of `entry` for `reason`; then
/// unpacks it gzipped, as the kernel does, in the cage (a place of its
/// own), and asserts the same refusal in the same words.
pub fn refused(place: &Place, case: &str, tar: &[u8], entry: &str, reason: Refusal) {
    let got = unpack_tar(tar, &place.stage());
    let text = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
    match &got {
        Err(UnpackError::Refused { entry: e, reason: r }) => {
            assert_eq!((e.as_str(), r), (entry, &reason), "{case}");
            assert!(text.contains(&format!("entry \"{entry}\" is refused")), "{case}: {text}");
        }
        other => panic!("{case}: want {entry:?} refused for {reason}, got {other:?}"),
    }
    place.assert_nothing_outside(case);
    let caged = Place::new().expect("a place for the caged unpacker");
    match super::caged::unpack_in(&caged, tar, super::caged::cage(), &crate::common::teneral()) {
        Outcome::Refused(said) => assert_eq!(said, text, "{case}: in the cage"),
        other => panic!("{case}: in the cage, want {entry:?} refused, got {other:?}"),
    }
    caged.assert_nothing_outside(case);
}

pub fn ustar(name: &str, kind: u8, size: u64) -> Head {
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
            show("a/".repeat(2100).as_bytes()),
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
            Refusal::LinkOut(show(long_up.as_bytes())),
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
