//! Organs: the unpacker against a malicious corpus and well-formed archives,
//! the cache and the set, `teneral organs` (the gate's steps, checks
//! included) and the supervisor's stop on a missing archive.

mod caged;
mod corpus;
mod costs;
#[path = "../fuzz/logic.rs"]
mod fuzz_logic;
mod gate;
mod limits;
mod staged;
pub mod tarball;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use teneral::organs::unpack::unpack_tar;

use crate::common::TestResult;
use corpus::Place;
use tarball::{Format, Head, Tar};

/// Every name under `dir`, sorted, with what it is: `d 755`, `f 644 <text>`,
/// `l <target>`.
pub fn listing(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = path.strip_prefix(root).unwrap_or(&path).display().to_string();
            let Ok(meta) = path.symlink_metadata() else { continue };
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap_or_default();
                out.push(format!("{name} l {}", target.display()));
            } else if meta.is_dir() {
                out.push(format!("{name} d {mode:o}"));
                walk(root, &path, out);
            } else {
                let text = std::fs::read(&path).unwrap_or_default();
                let text = String::from_utf8_lossy(&text).replace('\0', "0");
                out.push(format!("{name} f {mode:o} {text}"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn well_formed_archives_unpack_exactly() -> TestResult {
    let long = format!("pkg-1.0/share/{}/deep.txt", "long-directory-name".repeat(6));
    let pax_name = format!("pkg-1.0/share/{}.txt", "p".repeat(150));
    let sparse = Head {
        name: b"pkg-1.0/sparse.img".to_vec(),
        kind: b'S',
        size: 1024,
        format: Format::Gnu,
        sparse: vec![(0, 512), (2048, 512)],
        real_size: 3000,
        ..Head::default()
    };
    let mut sparse_data = vec![b'a'; 512];
    sparse_data.extend(vec![b'b'; 512]);
    let prefixed = Head {
        name: b"in-prefix.txt".to_vec(),
        prefix: b"pkg-1.0/share".to_vec(),
        size: 3,
        ..Head::default()
    };
    let tar = Tar::new()
        .dir("./", 0o755)
        .dir("pkg-1.0/", 0o755)
        .file_mode("pkg-1.0/bin/tool", b"#!/bin/sh\necho tool\n", 0o4755)
        .hard_link("pkg-1.0/bin/tool-again", "pkg-1.0/bin/tool")
        .file("pkg-1.0/lib/libx.so.1", b"ELF")
        .symlink("pkg-1.0/lib/libx.so", "libx.so.1")
        .symlink("pkg-1.0/bin/lib", "../lib")
        .symlink("pkg-1.0/bin/dangling", "../later/x")
        .dir("pkg-1.0/bin", 0o1777)
        .dir("pkg-1.0/private", 0o700)
        .gnu_long_name(long.as_bytes())
        .file(&long, b"deep")
        .pax(&[("path", pax_name.as_bytes()), ("mtime", b"1700000000.5"), ("size", b"3")])
        .file("ignored-by-pax", b"pax")
        .raw(&prefixed, b"pre")
        .raw(&sparse, &sparse_data)
        .file("pkg-1.0/perm/w", b"")
        .finish();
    let p = Place::new()?;
    let summary = unpack_tar(&tar[..], &p.stage())?;
    // 15 entries and the 5 directories made for them (bin, lib, perm, share, share/long...).
    assert_eq!(summary.entries, 20);
    let mut hole = "a".repeat(512);
    hole.push_str(&"0".repeat(1536));
    hole.push_str(&"b".repeat(512));
    hole.push_str(&"0".repeat(3000 - 2560));
    let mut want = vec![
        "pkg-1.0 d 755".to_owned(),
        "pkg-1.0/bin d 755".into(),
        "pkg-1.0/bin/dangling l ../later/x".into(),
        "pkg-1.0/bin/lib l ../lib".into(),
        "pkg-1.0/bin/tool f 755 #!/bin/sh\necho tool\n".into(),
        "pkg-1.0/bin/tool-again f 755 #!/bin/sh\necho tool\n".into(),
        "pkg-1.0/lib d 755".into(),
        "pkg-1.0/lib/libx.so l libx.so.1".into(),
        "pkg-1.0/lib/libx.so.1 f 644 ELF".into(),
        "pkg-1.0/perm d 755".into(),
        "pkg-1.0/perm/w f 644 ".into(),
        "pkg-1.0/private d 700".into(),
        "pkg-1.0/share d 755".into(),
        format!("{pax_name} f 644 pax"),
        "pkg-1.0/share/in-prefix.txt f 644 pre".into(),
        format!("pkg-1.0/share/{} d 755", "long-directory-name".repeat(6)),
        format!("{long} f 644 deep"),
        format!("pkg-1.0/sparse.img f 644 {hole}"),
    ];
    want.sort();
    assert_eq!(listing(&p.stage()), want);
    p.assert_nothing_outside("well-formed");
    let tool = p.stage().join("pkg-1.0/bin/tool").metadata()?;
    let again = p.stage().join("pkg-1.0/bin/tool-again").metadata()?;
    use std::os::unix::fs::MetadataExt;
    assert_eq!(tool.ino(), again.ino(), "the hard link is one file");
    Ok(())
}

#[test]
fn gzip_archives_unpack_and_report_their_hash() -> TestResult {
    let tar = Tar::new().file("a/b", b"hello").finish();
    let archive = tarball::gz(&tar);
    let p = Place::new()?;
    let (summary, hash) = teneral::organs::cache::unpack_file(&archive[..], &p.stage())?;
    assert_eq!(summary.entries, 2, "a/b and the directory a made for it");
    assert_eq!(hash, teneral::organs::cache::hash(&archive[..])?);
    assert_eq!(listing(&p.stage()), ["a d 755", "a/b f 644 hello"]);
    Ok(())
}

#[test]
fn fuzz_logic_runs_over_its_seeds() -> TestResult {
    for seed in fuzz_logic::seeds() {
        fuzz_logic::check(&seed);
        fuzz_logic::check(&fuzz_logic::fix_checksums(&seed));
    }
    // The seed files are GNU tar's own (gnu, pax, ustar, sparse): each unpacks.
    for file in std::fs::read_dir(crate::common::repo_root().join("fuzz/seeds/unpack"))? {
        let bytes = std::fs::read(file?.path())?;
        fuzz_logic::check(&bytes);
        let p = Place::new()?;
        unpack_tar(&bytes[..], &p.stage())?;
        assert!(!listing(&p.stage()).is_empty());
    }
    let tar = Tar::new().symlink("l", "..").file("x", b"y").finish();
    fuzz_logic::check(&tar);
    fuzz_logic::check(&tar[..700]);
    Ok(())
}
