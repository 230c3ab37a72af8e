//! A tree a body's code wrote (a build target its build scripts and tests
//! ran in), made harmless for the host once nothing of the body runs in it.
//!
//! What a caged process writes is kept on the host after it ends. Whatever
//! it could make there that carries meaning outside the cage is taken away:
//! a set-user-id or set-group-id bit is cleared, a link that leads out of
//! the tree is removed, and so is every entry that is neither a regular
//! file, a directory nor such a link (a FIFO, a socket, a device node).
//!
//! The walk opens each directory beneath the one before it, following no
//! link, and changes each entry through a descriptor of that very entry, so
//! a tree that is reshaped while it is walked cannot lead it elsewhere.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The set-user-id and set-group-id bits.
const SET_ID: u32 = 0o6000;

/// What the scrub does with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// A regular file or directory whose set-id bits are cleared.
    Clear,
    Remove,
}

/// The verdict on an entry of kind `kind` and mode `mode`; for a link,
/// `inside` says whether what it names stays inside the tree.
pub fn verdict(kind: FileType, mode: u32, inside: bool) -> Verdict {
    match kind {
        FileType::RegularFile | FileType::Directory if mode & SET_ID != 0 => Verdict::Clear,
        FileType::RegularFile | FileType::Directory => Verdict::Keep,
        FileType::Symlink if inside => Verdict::Keep,
        _ => Verdict::Remove,
    }
}

/// Whether a link `depth` directories below the tree's top, naming
/// `target`, names something inside the tree: a relative path whose `..`
/// never climbs above the top.
pub fn stays_inside(target: &Path, depth: usize) -> bool {
    let mut level = depth;
    for part in target.components() {
        match part {
            Component::Normal(_) => level += 1,
            Component::CurDir => {}
            Component::ParentDir => match level.checked_sub(1) {
                Some(up) => level = up,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// What a scrub changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Scrubbed {
    pub cleared: usize,
    pub removed: usize,
}

/// Scrubs the tree at `root` (a directory of the kernel's, through
/// whatever links its path holds; what lies beneath it is not). Call only when no process of a body writes in it.
/// A `root` that does not exist is nothing to do.
pub fn scrub(root: &Path) -> io::Result<Scrubbed> {
    // `root` is the kernel's own path, a link on it the owner's: followed.
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let top = match rustix::fs::open(root, flags, Mode::empty()).map_err(io::Error::from) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Scrubbed::default()),
        Err(e) => return Err(e),
    };
    let mut done = Scrubbed::default();
    let mut dirs = vec![(top, 0usize)];
    while let Some((dir, depth)) = dirs.pop() {
        let names: Vec<std::ffi::CString> = rustix::fs::Dir::read_from(&dir)?
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_owned())
            .filter(|name| name.as_bytes() != b"." && name.as_bytes() != b"..")
            .collect();
        for name in names {
            let stat = match rustix::fs::statat(&dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            let kind = FileType::from_raw_mode(stat.st_mode);
            let inside = kind == FileType::Symlink
                && rustix::fs::readlinkat(&dir, name.as_c_str(), Vec::new()).is_ok_and(|to| {
                    stays_inside(Path::new(OsStr::from_bytes(to.as_bytes())), depth)
                });
            match verdict(kind, stat.st_mode, inside) {
                Verdict::Keep => {}
                Verdict::Clear => match clear(&dir, &name, kind) {
                    Ok(()) => done.cleared += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                },
                Verdict::Remove => {
                    match rustix::fs::unlinkat(&dir, name.as_c_str(), AtFlags::empty()) {
                        Ok(()) | Err(rustix::io::Errno::NOENT) => done.removed += 1,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            if kind == FileType::Directory {
                match open_dir(&dir, Path::new(OsStr::from_bytes(name.as_bytes()))) {
                    Ok(fd) => dirs.push((fd, depth + 1)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(done)
}

/// Opens the directory `path` beneath `dir`, following no link at its end.
fn open_dir<Fd: AsFd>(dir: Fd, path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, path, flags, Mode::empty())?)
}

/// Clears the set-id bits of the entry `name` in `dir` through a
/// descriptor of the entry itself, checked to be of the kind seen.
fn clear(dir: &OwnedFd, name: &std::ffi::CStr, kind: FileType) -> io::Result<()> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != kind {
        return Err(io::Error::other("an entry changed its kind while it was scrubbed"));
    }
    let mode = Mode::from_raw_mode(stat.st_mode & 0o7777 & !SET_ID);
    // A descriptor opened with O_PATH cannot be changed itself; its entry in
    // /proc names the very inode, whatever happened to the name since.
    let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    match rustix::fs::chmod(proc.as_str(), mode) {
        Ok(()) => Ok(()),
        // No /proc here: a descriptor that can be changed itself.
        Err(rustix::io::Errno::NOENT) => {
            let flags = match kind {
                FileType::Directory => OFlags::RDONLY | OFlags::DIRECTORY,
                _ => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            };
            let fd = rustix::fs::openat(
                dir,
                name,
                flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            Ok(rustix::fs::fchmod(&fd, mode)?)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
