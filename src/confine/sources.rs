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

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Makes the crate sources of this kernel's cargo home readable by the
/// identity its checks run as, when that is another one (the kernel is
/// root). Returns how many entries it opened.
pub fn readable_by_checks() -> io::Result<usize> {
    if !rustix::process::geteuid().is_root() {
        return Ok(0);
    }
    let Some(cargo) = cargo_home() else { return Ok(0) };
    let mut opened = 0;
    for part in ["registry/src", "git/checkouts"] {
        opened += open_up(&cargo.join(part))?;
    }
    Ok(opened)
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
pub fn open_up(root: &Path) -> io::Result<usize> {
    let mut opened = 0;
    let mut todo = vec![root.to_owned()];
    while let Some(path) = todo.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
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
            opened += 1;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                todo.push(entry?.path());
            }
        }
    }
    Ok(opened)
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
}
