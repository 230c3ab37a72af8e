//! What the fuzz target checks for one input, shared with the ordinary test
//! suite (`tests/organs.rs` runs it over [`seeds`], so CI exercises it
//! without nightly).
//!
//! For any bytes as a tar stream: the unpacker returns (never panics), writes
//! nothing beside or outside its staging directory, and when it accepts, the
//! tree holds only directories, files and symlinks, every symlink resolves
//! inside, and no set-id, sticky, or group/other write bit is set.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

// The test suite loads this file too: one copy of the builder per crate.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../tests/organs/tarball.rs"]
mod tarball;

/// Inputs to start from: a well-formed archive and a few near misses.
#[allow(dead_code)]
pub fn seeds() -> Vec<Vec<u8>> {
    use tarball::Tar;
    vec![
        Tar::new()
            .dir("p/", 0o755)
            .file("p/bin/x", b"#!/bin/sh\n")
            .symlink("p/lib", "bin")
            .hard_link("p/y", "p/bin/x")
            .finish(),
        Tar::new().gnu_long_name(&[b'n'; 200]).file("short", b"data").finish(),
        Tar::new().pax(&[("path", b"a/b/c"), ("size", b"2")]).file("x", b"hi").finish(),
        Tar::new().symlink("cur", ".").symlink("par", "cur/..").file("par/x", b"").finish(),
        Tar::new().file("f", b"x").special("fifo", b'6').finish(),
        Vec::new(),
    ]
}

/// `data` with a correct checksum in every 512-byte block, so the fuzzer
/// gets past the header checksum (a data block's bytes 148..156 change too,
/// which only makes another input).
pub fn fix_checksums(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    for block in out.chunks_exact_mut(512) {
        block[148..156].copy_from_slice(b"        ");
        let sum: u32 = block.iter().map(|b| u32::from(*b)).sum();
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }
    out
}

/// Runs the unpacker over `data` and checks what it left.
pub fn check(data: &[u8]) {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let place = std::env::temp_dir().join(format!("teneral-fuzz-{}-{n}", std::process::id()));
    let stage = place.join("stage");
    let outside = place.join("outside");
    let _ = std::fs::remove_dir_all(&place);
    if std::fs::create_dir_all(&stage).and_then(|()| std::fs::create_dir(&outside)).is_err() {
        return;
    }
    let result = teneral::organs::unpack::unpack_tar(data, &stage);
    let beside = std::fs::read_dir(&place).map(|d| d.count()).unwrap_or(0);
    let out = std::fs::read_dir(&outside).map(|d| d.count()).unwrap_or(0);
    assert_eq!((beside, out), (2, 0), "written outside the staging directory");
    if result.is_ok() {
        let root = stage.canonicalize().unwrap_or_else(|e| unreachable!("{e}"));
        walk(&root, &root);
    }
    let _ = std::fs::remove_dir_all(&place);
}

fn walk(root: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path: PathBuf = entry.path();
        let meta = path.symlink_metadata().unwrap_or_else(|e| unreachable!("{e}"));
        let kind = meta.file_type();
        if kind.is_symlink() {
            if let Ok(real) = path.canonicalize() {
                assert!(real.starts_with(root), "{} leads to {}", path.display(), real.display());
            }
            continue;
        }
        assert!(
            kind.is_dir() || kind.is_file(),
            "{} is neither file nor directory",
            path.display()
        );
        assert_eq!(
            meta.permissions().mode() & 0o7022,
            0,
            "{} keeps a bit it must not",
            path.display()
        );
        if kind.is_dir() {
            walk(root, &path);
        }
    }
}
