//! The kernel's check of a tree the caged unpacker left in its staging
//! directory, before the tree is renamed into place. The unpacker ran on a
//! hostile archive, so what it left is taken as hostile too: a tree that
//! passes holds what an honest unpacker could have made and nothing else.
//!
//! The walk opens every directory beneath the staging directory with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
//! RESOLVE_NO_XDEV)` and looks at every name with `fstatat(AT_SYMLINK_NOFOLLOW)`:
//! no link is followed and nothing outside the staging directory is
//! reached. Invariants of a tree [`check`] accepts: it holds only
//! directories, regular files and symlinks; no set-id, sticky, group-write
//! or other-write bit, the staging directory's own included; at most
//! [`MAX_ENTRIES`] names and [`MAX_BYTES`] bytes of files, no name deeper
//! than [`MAX_DEPTH`] or longer than PATH_MAX where the tree will be used;
//! every name of a file with several links is in the tree (no hard link to
//! a file outside); every symlink resolves inside the tree, by the rules
//! the unpacker itself applies ([`Tree::escaping_link`]).

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use super::unpack::resolve::{show, Node, Refusal, Tree, MAX_NAME, PATH_MAX};
use super::unpack::{MAX_BYTES, MAX_DEPTH, MAX_ENTRIES};

/// Mode bits no name of a tree may carry: set-uid, set-gid, sticky, and
/// write for the group or others.
pub const FORBIDDEN_BITS: u32 = 0o7022;

/// What the walk found in an accepted tree.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Names beneath the staging directory.
    pub entries: u32,
    /// Bytes of regular files, each file counted once however many names it has.
    pub bytes: u64,
}

/// Why a staged tree is refused. Names are shown escaped and cut, relative
/// to the tree's root (empty for the root itself).
#[derive(Debug, thiserror::Error)]
pub enum StagedError {
    #[error("\"{name}\" is a {kind}; a tree holds only directories, regular files and links")]
    Kind { name: String, kind: &'static str },
    #[error(
        "\"{name}\" has mode {mode:04o}; set-id, sticky, group-write and other-write bits are \
         not allowed"
    )]
    Mode { name: String, mode: u32 },
    #[error(
        "\"{name}\" is a file with {links} names, only {inside} of them in the tree: a hard link \
         to a file outside"
    )]
    HardLinkOut { name: String, links: u64, inside: u64 },
    #[error("\"{name}\": {reason}")]
    Refused { name: String, reason: Refusal },
    #[error("it holds more than 20000 names")]
    TooMany,
    #[error("its files hold more than 1 GiB")]
    TooLarge,
    #[error("\"{name}\" cannot be read: {source}")]
    Io { name: String, source: io::Error },
}

fn io_err(name: &[u8]) -> impl FnOnce(rustix::io::Errno) -> StagedError + '_ {
    move |e| StagedError::Io { name: show(name), source: e.into() }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);

/// One regular file met: its link count, the names found, the first of them.
struct Inode {
    links: u64,
    inside: u64,
    name: Vec<u8>,
}

/// Checks the tree in `staging` for use at a path `root_len` bytes long;
/// see the module doc for what passes.
pub fn check(staging: &Path, root_len: usize) -> Result<Found, StagedError> {
    let root = rustix::fs::open(staging, DIR_FLAGS, Mode::empty()).map_err(io_err(b""))?;
    let stat = rustix::fs::fstat(&root).map_err(io_err(b""))?;
    mode_ok(b"", stat.st_mode)?;
    let mut walk = Walk {
        root_len,
        tree: Tree::default(),
        inodes: HashMap::new(),
        found: Found::default(),
        todo: vec![Vec::new()],
    };
    while let Some(dir) = walk.todo.pop() {
        let fd = if dir.is_empty() {
            rustix::io::dup(&root).map_err(io_err(b""))?
        } else {
            let resolve = ResolveFlags::BENEATH
                | ResolveFlags::NO_SYMLINKS
                | ResolveFlags::NO_MAGICLINKS
                | ResolveFlags::NO_XDEV;
            rustix::fs::openat2(&root, dir.as_slice(), DIR_FLAGS, Mode::empty(), resolve)
                .map_err(io_err(&dir))?
        };
        walk.directory(&dir, fd)?;
    }
    for inode in walk.inodes.values() {
        if inode.inside != inode.links {
            return Err(StagedError::HardLinkOut {
                name: show(&inode.name),
                links: inode.links,
                inside: inode.inside,
            });
        }
    }
    if let Some((name, reason)) = walk.tree.escaping_link() {
        return Err(StagedError::Refused { name: show(&name), reason });
    }
    Ok(walk.found)
}

struct Walk {
    root_len: usize,
    tree: Tree,
    inodes: HashMap<(u64, u64), Inode>,
    found: Found,
    /// Directories still to read, relative to the root.
    todo: Vec<Vec<u8>>,
}

impl Walk {
    /// Reads the directory `dir` (open as `fd`): every name in it.
    fn directory(&mut self, dir: &[u8], fd: OwnedFd) -> Result<(), StagedError> {
        let entries = rustix::fs::Dir::read_from(&fd).map_err(io_err(dir))?;
        for entry in entries {
            let entry = entry.map_err(io_err(dir))?;
            let base = entry.file_name().to_bytes();
            if base == b"." || base == b".." {
                continue;
            }
            let mut path = dir.to_vec();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(base);
            self.name(&fd, base, path)?;
        }
        Ok(())
    }

    /// Looks at one name, `base` in the directory `fd`, `path` from the root.
    fn name(&mut self, fd: &OwnedFd, base: &[u8], path: Vec<u8>) -> Result<(), StagedError> {
        self.found.entries += 1;
        if self.found.entries > MAX_ENTRIES {
            return Err(StagedError::TooMany);
        }
        let refused = |reason| StagedError::Refused { name: show(&path), reason };
        if path.split(|b| *b == b'/').count() > MAX_DEPTH {
            return Err(refused(Refusal::TooDeep));
        }
        let used = self.root_len + 1 + path.len();
        if used >= PATH_MAX {
            return Err(refused(Refusal::PathTooLong { len: used, root_len: self.root_len }));
        }
        let stat =
            rustix::fs::statat(fd, base, AtFlags::SYMLINK_NOFOLLOW).map_err(io_err(&path))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let node = match kind {
            FileType::Directory => {
                mode_ok(&path, stat.st_mode)?;
                self.todo.push(path.clone());
                Node::Dir { explicit: true }
            }
            FileType::RegularFile => {
                mode_ok(&path, stat.st_mode)?;
                let key = (stat.st_dev, stat.st_ino);
                // A u32 on some architectures.
                #[allow(clippy::useless_conversion)]
                let links = u64::from(stat.st_nlink);
                let inode = self.inodes.entry(key).or_insert_with(|| Inode {
                    links,
                    inside: 0,
                    name: path.clone(),
                });
                if inode.inside == 0 {
                    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
                    self.found.bytes = self.found.bytes.saturating_add(size);
                    if self.found.bytes > MAX_BYTES {
                        return Err(StagedError::TooLarge);
                    }
                }
                inode.inside += 1;
                Node::File
            }
            FileType::Symlink => {
                if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > MAX_NAME as u64 {
                    return Err(refused(Refusal::TooLong));
                }
                let target = rustix::fs::readlinkat(fd, base, Vec::new()).map_err(io_err(&path))?;
                Node::Symlink(target.into_bytes())
            }
            other => return Err(StagedError::Kind { name: show(&path), kind: kind_name(other) }),
        };
        self.tree.record(&path, node);
        Ok(())
    }
}

/// A directory's or a file's mode, refused with [`FORBIDDEN_BITS`].
fn mode_ok(name: &[u8], mode: u32) -> Result<(), StagedError> {
    if mode & FORBIDDEN_BITS != 0 {
        return Err(StagedError::Mode { name: show(name), mode: mode & 0o7777 });
    }
    Ok(())
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "file of an unknown kind",
    }
}
