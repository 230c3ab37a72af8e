//! The cage's one raw system call that rustix does not wrap:
//! `mount_setattr(2)`, used on a detached copy of a granted tree.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::mount::{move_mount, open_tree, MoveMountFlags, OpenTreeFlags};

/// Copies the tree at `source` and mounts the copy at `target`: one
/// `open_tree`, one `mount_setattr`, one `move_mount`. `read_only` makes it
/// read-only with every mount beneath it (recursively: a mount nested below
/// a read-only grant is read-only as well). `idmap` shows its ids through
/// that user namespace (root's files as the body's own); such a copy is of
/// the top mount alone, as Linux maps no tree whose mounts it cannot all map.
pub fn attach_tree(
    source: &Path,
    target: &Path,
    read_only: bool,
    idmap: Option<&OwnedFd>,
) -> io::Result<()> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    if idmap.is_none() {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    let tree = open_tree(rustix::fs::CWD, source, flags)?;
    let mut set = 0;
    let mut userns = 0u64;
    if read_only {
        set |= libc::MOUNT_ATTR_RDONLY;
    }
    if let Some(fd) = idmap {
        set |= libc::MOUNT_ATTR_IDMAP;
        userns = u64::try_from(fd.as_raw_fd()).map_err(io::Error::other)?;
    }
    let recursive = idmap.is_none();
    let attr = libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: userns };
    let at = libc::AT_EMPTY_PATH | if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `attr` lives across the call and its size is passed with it;
    // the path is a valid empty C string; the fd is open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            at,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    move_mount(&tree, "", rustix::fs::CWD, target, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)?;
    Ok(())
}
