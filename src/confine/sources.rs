//! Crate sources a caged build reads, readable by the identity it runs as.
//!
//! A kernel that runs as root runs builds and checks as an unprivileged
//! identity (docs/cage.md, "A body never runs as root"). Cargo unpacks a
//! crate with the modes its archive holds, and some archives hold files
//! only their owner may read (`fnv` 1.0.7: `lib.rs` is 0640): unpacked by
//! root, such a crate could be fetched but never compiled in the cage, and
//! every mutation depending on it would be refused. Crate sources are
//! public; after each fetch, a root kernel opens what is closed in the
//! downloaded sources (`registry/src`, `git/checkouts` of the cargo home)
//! to others for reading. No link is followed; nothing else is touched.
//!
//! Each crate is walked once per kernel: the sources of a cargo home are
//! tens of thousands of entries (0.12 s to walk), and the gate fetches twice
//! per verdict. A crate counts as done once it was walked after cargo had
//! finished unpacking it (its `.cargo-ok` was there before the walk); one
//! still being unpacked by a fetch beside this one is walked again the next
//! time, and one unpacked anew (a new `.cargo-ok`) as well.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A crate walked whole: its directory and its `.cargo-ok` (inode, change
/// time in nanoseconds) as they were before the walk.
type Done = HashSet<(PathBuf, u64, i64)>;

static DONE: Mutex<Option<Done>> = Mutex::new(None);

/// Makes the crate sources of this kernel's cargo home readable by the
/// identity its checks run as, when that is another one (the kernel is
/// root). Returns how many entries it opened.
pub fn readable_by_checks() -> io::Result<usize> {
    if !rustix::process::geteuid().is_root() {
        return Ok(0);
    }
    let Some(cargo) = cargo_home() else { return Ok(0) };
    let mut done = DONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let done = done.get_or_insert_with(Done::new);
    let mut opened = 0;
    for part in ["registry/src", "git/checkouts"] {
        opened += open_crates(&cargo.join(part), done)?.opened;
    }
    Ok(opened)
}

/// What a walk did: entries opened, and entries looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Walk {
    pub opened: usize,
    pub visited: usize,
}

/// [`open_up`] for the crates below `root`, laid out as cargo does
/// (`<root>/<index or repository>/<crate or checkout>`), except those `done`
/// holds; the two levels above them are opened as well (not what they
/// hold). Adds to `done` each crate that cargo had finished unpacking.
pub fn open_crates(root: &Path, done: &mut Done) -> io::Result<Walk> {
    let mut walk = Walk::default();
    let Some(groups) = open_one(root, &mut walk)? else { return Ok(walk) };
    for group in groups {
        let Some(crates) = open_one(&group, &mut walk)? else { continue };
        for krate in crates {
            let finished = std::fs::symlink_metadata(krate.join(".cargo-ok"))
                .ok()
                .filter(|m| m.is_file())
                .map(|m| (krate.clone(), m.ino(), m.ctime() * 1_000_000_000 + m.ctime_nsec()));
            if finished.as_ref().is_some_and(|key| done.contains(key)) {
                continue;
            }
            let this = walk_up(&krate)?;
            walk.opened += this.opened;
            walk.visited += this.visited;
            if let Some(key) = finished {
                done.insert(key);
            }
        }
    }
    Ok(walk)
}

/// Opens `dir` alone (not what it holds) and lists it; `None` when it is
/// missing or no directory (a link is not followed).
fn open_one(dir: &Path, walk: &mut Walk) -> io::Result<Option<Vec<PathBuf>>> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => meta,
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    walk.visited += 1;
    let mode = meta.permissions().mode();
    if mode | 0o005 != mode {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o005))?;
        walk.opened += 1;
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        entries.push(entry?.path());
    }
    Ok(Some(entries))
}

fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// Adds read (and, for directories, search) for others to every file and
/// directory below `root` that lacks it; links are left as they are. A
/// missing `root` opens nothing.
#[cfg(test)]
pub fn open_up(root: &Path) -> io::Result<usize> {
    walk_up(root).map(|walk| walk.opened)
}

fn walk_up(root: &Path) -> io::Result<Walk> {
    let mut walk = Walk::default();
    let mut todo = vec![root.to_owned()];
    while let Some(path) = todo.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        walk.visited += 1;
        let mode = meta.permissions().mode();
        let want = if meta.is_dir() {
            mode | 0o005
        } else if meta.is_file() {
            mode | 0o004 | if mode & 0o100 != 0 { 0o001 } else { 0 }
        } else {
            continue;
        };
        if want != mode {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(want))?;
            walk.opened += 1;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                todo.push(entry?.path());
            }
        }
    }
    Ok(walk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_sources_are_opened_for_reading_and_links_left_alone() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let krate = dir.path().join("index/fnv-1.0.7");
        std::fs::create_dir_all(&krate).expect("a crate directory");
        let set = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        let lib = krate.join("lib.rs");
        std::fs::write(&lib, "pub fn f() {}\n").expect("lib.rs");
        set(&lib, 0o640).expect("lib.rs 0640");
        let tool = krate.join("tool.sh");
        std::fs::write(&tool, "#!/bin/sh\n").expect("tool.sh");
        set(&tool, 0o750).expect("tool.sh 0750");
        let open = krate.join("README.md");
        std::fs::write(&open, "hi\n").expect("README");
        set(&open, 0o644).expect("README 0644");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "the owner's\n").expect("outside");
        set(&outside, 0o600).expect("outside 0600");
        std::os::unix::fs::symlink(&outside, krate.join("link")).expect("a link");
        set(&krate, 0o750).expect("the crate dir 0750");
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).ok();

        assert_eq!(open_up(&dir.path().join("index")).ok(), Some(3));
        assert_eq!(mode(&lib), Some(0o644));
        assert_eq!(mode(&tool), Some(0o755));
        assert_eq!(mode(&open), Some(0o644));
        assert_eq!(mode(&krate), Some(0o755));
        assert_eq!(mode(&outside), Some(0o600), "a link is not followed");
        assert_eq!(open_up(&dir.path().join("index")).ok(), Some(0), "once is enough");
        assert_eq!(open_up(&dir.path().join("missing")).ok(), Some(0));
    }

    /// A crate cargo finished unpacking is walked once; one without its
    /// `.cargo-ok` yet (a fetch beside this one still unpacking it) and one
    /// unpacked anew are walked again.
    #[test]
    fn each_finished_crate_is_walked_once() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let src = dir.path().join("registry/src");
        let index = src.join("index.crates.io-0000");
        let set = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        let unpack = |name: &str, finished: bool| {
            let krate = index.join(name);
            std::fs::create_dir_all(krate.join("src")).expect("a crate directory");
            for file in ["src/lib.rs", "src/a.rs", "src/b.rs", "Cargo.toml"] {
                std::fs::write(krate.join(file), "//\n").expect("a source file");
                set(&krate.join(file), 0o640).expect("closed to others");
            }
            if finished {
                std::fs::write(krate.join(".cargo-ok"), "{\"v\":1}").expect(".cargo-ok");
            }
            krate
        };
        let fnv = unpack("fnv-1.0.7", true);
        let half = unpack("half-2.0.0", false);
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).ok();
        let mut done = Done::new();

        let first = open_crates(&src, &mut done).expect("the first walk");
        assert_eq!(first.opened, 8, "{first:?}");
        assert_eq!(mode(&fnv.join("src/lib.rs")), Some(0o644));
        // The second walk looks at the two levels above the crates and at
        // the unfinished crate (2 + 6 entries + its .cargo-ok now), not at
        // the finished one.
        std::fs::write(half.join(".cargo-ok"), "{\"v\":1}").expect(".cargo-ok at last");
        let second = open_crates(&src, &mut done).expect("the second walk");
        assert_eq!(second, Walk { opened: 0, visited: 9 });
        let third = open_crates(&src, &mut done).expect("the third walk");
        assert_eq!(third, Walk { opened: 0, visited: 2 });

        // Unpacked anew (cargo removes it and unpacks again): walked again.
        // (Moved aside rather than removed, so that no inode is reused.)
        std::fs::rename(&fnv, dir.path().join("old")).expect("the crate goes");
        let fnv = unpack("fnv-1.0.7", true);
        let again = open_crates(&src, &mut done).expect("the walk after unpacking again");
        assert_eq!(again.opened, 4, "{again:?}");
        assert_eq!(mode(&fnv.join("src/a.rs")), Some(0o644));
        assert_eq!(open_crates(&dir.path().join("missing"), &mut done).ok(), Some(Walk::default()));
    }
}
