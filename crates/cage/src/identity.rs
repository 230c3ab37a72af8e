//! Who a root kernel's cage is on the host, and the ownership of what it
//! may write: the helper gives each writable grant to the plan's identity
//! before the program runs, and resolves every grant without following a
//! link that identity could have made. Which individual holds which
//! identity is the kernel's record (its `confine::identity`).
//!
//! Invariants:
//! - The walk that gives a tree to an identity ([`own`]) never follows a
//!   link, never leaves the mount it starts on, and changes only the inode
//!   it examined (each entry is opened with `openat2`, `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, and changed through that
//!   descriptor); it gives away directories and regular files with one
//!   link only, never a device, FIFO, socket or a file linked elsewhere.
//!
//! The reasons are in docs/cage.md, "Identities".

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// A host user and group, without supplementary groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

impl Identity {
    /// What a root kernel's cage runs as when its launch names no
    /// individual (tests and benchmarks that run the helper themselves).
    pub const NOBODY: Identity = Identity { uid: crate::BODY_ID, gid: crate::BODY_ID };

    /// `UID:GID`, as the helper's `--identity` takes it.
    pub fn to_arg(self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }

    /// Reads [`Identity::to_arg`]; root (0) is never an identity.
    pub fn from_arg(text: &str) -> Option<Identity> {
        let (uid, gid) = text.split_once(':')?;
        let id = Identity { uid: uid.parse().ok()?, gid: gid.parse().ok()? };
        (id.uid != 0 && id.gid != 0).then_some(id)
    }
}

/// The map of the user namespace a root cage's task limit counts in: every
/// id but root's, each as itself, so whatever identity the plan names is
/// there, and the namespace can be made before the plan is known.
pub const EVERY_ID_BUT_ROOT: &str = "1 1 4294967294";

/// How many links [`resolve_grant`] follows before it gives up (as Linux).
const MAX_LINKS: usize = 40;

/// `path` made absolute and free of links, as `canonicalize` makes it, but
/// following no link a body or a check may have made or replaced: none
/// that lies beneath one of `writable` (the real paths of the plan's
/// writable grants), and for a root kernel's cage (`id`) none that the
/// identity owns or that lies in a directory it owns (or may write as its
/// group). A grant of the kernel's may lead through its own links (to a
/// cache, the sockets' link into the gate's target); what a cage writes
/// must not turn that into a path of its choosing.
pub fn resolve_grant(
    path: &Path,
    id: Option<Identity>,
    writable: &[PathBuf],
) -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let start =
        if path.is_absolute() { path.to_owned() } else { std::env::current_dir()?.join(path) };
    let mut todo: Vec<std::ffi::OsString> =
        start.components().rev().map(|c| c.as_os_str().to_owned()).collect();
    let mut done = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) | Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let next = done.join(&part);
        let meta = std::fs::symlink_metadata(&next)?;
        if !meta.file_type().is_symlink() {
            done = next;
            continue;
        }
        links += 1;
        let beneath_writable = writable.iter().any(|w| next.starts_with(w) && next != *w);
        let identitys = match id {
            Some(id) => {
                let parent = std::fs::symlink_metadata(&done)?;
                let group_writes = parent.gid() == id.gid && parent.mode() & 0o020 != 0;
                meta.uid() == id.uid || parent.uid() == id.uid || group_writes
            }
            None => false,
        };
        if beneath_writable || identitys {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a link in a place a cage writes; the kernel follows no link a body \
                     or a check may have made (remove it, or grant the place it leads to)",
                    next.display(),
                ),
            ));
        }
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&next)?;
        if target.is_absolute() {
            done = PathBuf::from("/");
        }
        todo.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
    }
    Ok(done)
}

/// An `O_PATH` descriptor of the absolute, link-free `path`: a link found
/// anywhere on it (one swapped in since it was resolved) is refused.
pub fn open_resolved(path: &Path) -> io::Result<OwnedFd> {
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    Ok(rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    )?)
}

/// Deeper than this, a walk gives nothing more away (each level holds two
/// descriptors open).
const MAX_DEPTH: usize = 256;

/// Gives the tree at `top` to `id`: `top` is a path resolved already (by
/// [`resolve_grant`]), and a link on it now is refused; nothing beneath it
/// is followed either.
/// A top that `id` owns already is the individual's since an earlier
/// start: only its entries owned by someone else (made by the kernel
/// since) are given, each whole. Otherwise the whole tree is, `top` last,
/// so a walk cut short is done again at the next start. `keep` (the
/// kernel's read-only files beneath) stay as they are.
pub fn own(top: &Path, id: Identity, keep: &[PathBuf]) -> io::Result<()> {
    let handle = open_resolved(top)?;
    let stat = rustix::fs::fstat(&handle)?;
    let real = top.to_owned();
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {
            give(&handle, &stat, id, false)?;
            Ok(())
        }
        FileType::Directory => {
            let ours = stat.st_uid == id.uid && stat.st_gid == id.gid;
            walk(&handle, &real, id, keep, ours)?;
            if !ours {
                give(&handle, &stat, id, true)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Gives the directory of sockets at `dir` and each socket in it to `id`
/// (a socket is connected to only by who may write it), nothing deeper.
pub fn own_sockets(dir: &Path, id: Identity) -> io::Result<()> {
    let handle = open_resolved(dir)?;
    let stat = rustix::fs::fstat(&handle)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    give(&handle, &stat, id, true)?;
    for entry in listing(&handle)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let Some(fd) = beneath(&handle, OsStr::from_bytes(name))? else { continue };
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Socket {
            give(&fd, &stat, id, true)?;
        }
    }
    Ok(())
}

/// The entries of the directory `handle` (an `O_PATH` descriptor) holds.
fn listing(handle: &OwnedFd) -> io::Result<rustix::fs::Dir> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(handle, ".", flags, Mode::empty())?;
    Ok(rustix::fs::Dir::new(fd)?)
}

/// An `O_PATH` descriptor of `name` beneath `dir`, or `None` when it is a
/// link, on another mount, or gone.
fn beneath(dir: &impl AsFd, name: &OsStr) -> io::Result<Option<OwnedFd>> {
    let resolve = ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat2(dir, name, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::XDEV | rustix::io::Errno::LOOP | rustix::io::Errno::NOENT) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Changes the owner of the inode `fd` holds (`stat` is its) to `id`,
/// unless it is `id`'s already, or a file with more than one link when
/// `linked_too` is false. Returns whether it changed.
fn give(fd: &OwnedFd, stat: &rustix::fs::Stat, id: Identity, linked_too: bool) -> io::Result<bool> {
    if stat.st_uid == id.uid && stat.st_gid == id.gid {
        return Ok(false);
    }
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind == FileType::RegularFile && stat.st_nlink > 1 && !linked_too {
        return Ok(false);
    }
    let (uid, gid) = (rustix::fs::Uid::from_raw(id.uid), rustix::fs::Gid::from_raw(id.gid));
    rustix::fs::chownat(fd, "", Some(uid), Some(gid), AtFlags::EMPTY_PATH)?;
    Ok(true)
}

/// Walks the directory `dir` (at `path`), depth first with one listing
/// open per level. With `only_others`, its entries that `id` owns are
/// passed over (at this level only; below an entry given, everything is).
fn walk(
    dir: &OwnedFd,
    path: &Path,
    id: Identity,
    keep: &[PathBuf],
    only_others: bool,
) -> io::Result<()> {
    struct Level {
        handle: OwnedFd,
        stat: rustix::fs::Stat,
        path: PathBuf,
        entries: rustix::fs::Dir,
        skip_ours: bool,
    }
    let open_level = |handle: OwnedFd, stat, path: PathBuf, skip_ours| -> io::Result<Level> {
        let entries = listing(&handle)?;
        Ok(Level { handle, stat, path, entries, skip_ours })
    };
    let top = rustix::fs::fstat(dir)?;
    let top_handle = rustix::fs::openat(
        dir,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut stack = vec![open_level(top_handle, top, path.to_owned(), only_others)?];
    while let Some(level) = stack.last_mut() {
        let Some(entry) = level.entries.next() else {
            // The directory's entries are given; now the directory itself
            // (the top is the caller's).
            let done = stack.pop();
            if let (Some(done), false) = (done, stack.is_empty()) {
                give(&done.handle, &done.stat, id, true)?;
            }
            continue;
        };
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_owned();
        if name == "." || name == ".." {
            continue;
        }
        let child = level.path.join(&name);
        if keep.contains(&child) {
            continue;
        }
        let Some(fd) = beneath(&level.handle, &name)? else { continue };
        let stat = rustix::fs::fstat(&fd)?;
        let ours = stat.st_uid == id.uid && stat.st_gid == id.gid;
        if level.skip_ours && ours {
            continue;
        }
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {
                give(&fd, &stat, id, false)?;
            }
            FileType::Directory if stack.len() < MAX_DEPTH => {
                stack.push(open_level(fd, stat, child, false)?);
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
