//! The cage's file tree: a new root holding exactly what the plan grants.
//!
//! In its own mount namespace, the cage's first process (pid 1 of its PID
//! namespace, see [`crate::init`]) mounts an empty tmpfs, makes it the root
//! (`pivot_root`, as bubblewrap does), and brings into it, at the same
//! place, each granted path of the old root by a bind mount: read-only for
//! what the plan lets be read or executed, writable for what it lets be
//! written. Then come a fresh `/proc` (showing only the cage's processes),
//! a minimal `/dev` (the granted device files and the `/dev/fd` links), an
//! empty `/tmp`, the links `/bin`, `/lib`... the machine has, and the old
//! root is detached. The tmpfs itself ends read-only.
//!
//! Invariants: nothing is reachable that no rule names, so a socket, file
//! or directory not granted cannot even be named (ENOENT): another
//! program's socket, the owner's `.env`, another individual. Landlock stays
//! the second wall ([`crate::ruleset`]), applied after, in the new tree. A
//! directory that only leads to granted paths (the individual's root, its
//! `.teneral`) exists in the tmpfs and holds only those.

use std::io;
use std::path::{Component, Path, PathBuf};

use rustix::fs::Mode;
use rustix::mount::{
    mount, mount_bind_recursive, mount_change, mount_remount, unmount, MountFlags,
    MountPropagationFlags, UnmountFlags,
};

use crate::identity::{self, Identity};
use crate::plan::{Access, Plan};
use crate::steps;
use crate::sys::{attach_tree, Attrs};

/// Where the old root is while the new one is filled.
const OLD: &str = "/.old-root";

/// The new root's tmpfs: no set-uid, no devices, and no access times. An
/// access time is a write: the first walk through a link just made there
/// (`/bin`, a granted link) updates the link's, and a write in progress
/// makes the read-only remount in [`finish`] fail with EBUSY. The program's
/// process walks such links (its Landlock rules) while [`finish`] runs; with
/// relatime a test made that collision 18 times in 300.
const ROOT_FLAGS: MountFlags =
    MountFlags::NOSUID.union(MountFlags::NODEV).union(MountFlags::NOATIME);

/// Links of the top directory that many machines have (`/bin` to
/// `usr/bin`); remade in the new root when they are links here.
const TOP_LINKS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Replaces this process's root by a new one holding only `plan`'s grants,
/// with the old root still hanging at [`OLD`]: [`finish`] detaches it.
/// Returns the working directory to keep ([`enter_workdir`]). Runs in a
/// fresh mount namespace, in the cage's PID namespace. With `owner` (the
/// kernel is root), every writable grant and socket directory is given to
/// that identity first ([`identity::own`]).
pub fn build(plan: &Plan, owner: Option<Identity>) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    // What each path names is resolved here, in the old root: a link there
    // may point anywhere by an absolute path, which means nothing later.
    // No grant leads through a link a cage may have made: none beneath a
    // writable grant, and for a root kernel none its identity may have made.
    let writable: Vec<PathBuf> = plan
        .rules
        .iter()
        .filter(|r| matches!(r.access, Access::Write | Access::Consume))
        .filter_map(|r| r.path.canonicalize().ok())
        .collect();
    let resolve = |path: &Path| -> Result<PathBuf, String> {
        if path == Path::new("/proc") {
            return Ok(path.to_owned());
        }
        identity::resolve_grant(path, owner, &writable)
            .map_err(|e| format!("cannot grant {}: {e}", path.display()))
    };
    let mut grants: Vec<(PathBuf, PathBuf, Access, bool)> = Vec::new();
    for rule in &plan.rules {
        grants.push((rule.path.clone(), resolve(&rule.path)?, rule.access, false));
    }
    for dir in &plan.socket_dirs {
        grants.push((dir.clone(), resolve(dir)?, Access::Read, true));
    }
    // A read-only file that is not there is left out; one that cannot be
    // resolved (a link the identity may have made) fails the launch.
    let mut readonly: Vec<PathBuf> = Vec::new();
    for path in plan.readonly.iter().filter(|p| std::fs::symlink_metadata(p).is_ok()) {
        readonly.push(resolve(path)?);
    }
    steps::mark("resolve the grants");
    if let Some(id) = owner {
        for (_, real, access, socket) in &grants {
            let given = match (socket, access) {
                (true, _) => identity::own_sockets(real, id),
                (false, Access::Write | Access::Consume) => identity::own(real, id, &readonly),
                _ => continue,
            };
            given.map_err(|e| {
                format!(
                    "cannot give {} to the cage's identity {}: {e}; what a cage writes is its \
                     individual's identity's, so its file system must let root change owners \
                     to ids of root's range (/etc/subuid and /etc/subgid; docs/cage.md, \
                     \"Identities\")",
                    real.display(),
                    id.to_arg()
                )
            })?;
        }
        steps::mark("ownership of the writable grants");
    }
    mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)
        .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    steps::mark("mounts private");
    // A fresh tmpfs on /tmp becomes the root; the old root then hangs at
    // OLD, its own /tmp whole again, and each grant is taken from there.
    mount("tmpfs", "/tmp", "tmpfs", ROOT_FLAGS, c"mode=0755,size=1m")
        .map_err(|e| format!("cannot mount the new root: {e}"))?;
    mkdir("/tmp/.old-root").map_err(|e| format!("cannot make {OLD}: {e}"))?;
    rustix::process::pivot_root("/tmp", "/tmp/.old-root")
        .map_err(|e| format!("cannot pivot to the new root: {e}"))?;
    rustix::process::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    steps::mark("tmpfs, pivot_root");

    // Parents before children, so a grant inside another lands on it.
    grants.sort_by_key(|(_, real, _, _)| real.components().count());
    for (_, real, access, socket) in &grants {
        let proc = real == Path::new("/proc");
        if proc {
            steps::mark("grants");
        }
        grant(real, *access, *socket)
            .map_err(|e| format!("cannot grant {}: {e}", real.display()))?;
        if proc {
            steps::mark("/proc");
        }
    }
    steps::mark("grants");
    // A granted path that was a link (`.teneral/target` to a shared cache)
    // is one still, to the same place.
    for (path, real, _, _) in &grants {
        if path != real && std::fs::symlink_metadata(path).is_err() {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("{e}"))?;
            }
            std::os::unix::fs::symlink(real, path)
                .map_err(|e| format!("cannot link {}: {e}", path.display()))?;
        }
    }
    steps::mark("links to grants");
    for path in &readonly {
        read_only(path).map_err(|e| format!("cannot make {} read-only: {e}", path.display()))?;
    }
    steps::mark("read-only files");
    for link in TOP_LINKS {
        let Ok(target) = std::fs::read_link(old(Path::new(link))) else { continue };
        if std::fs::symlink_metadata(link).is_err() {
            std::os::unix::fs::symlink(&target, link)
                .map_err(|e| format!("cannot link {link}: {e}"))?;
        }
    }
    dev().map_err(|e| format!("cannot make /dev: {e}"))?;
    if std::fs::symlink_metadata("/tmp").is_err() {
        mkdir("/tmp").map_err(|e| format!("cannot make /tmp: {e}"))?;
    }
    steps::mark("top links, /dev, /tmp");
    Ok(cwd)
}

/// Detaches the old root and makes the new one read-only: the last step of
/// the new root, which the program's process waits for before it executes
/// anything. Detaching a mount tree waits for an RCU grace period
/// (milliseconds on a loaded machine), so the cage's first process does it
/// while the program's process applies its own steps.
pub fn finish() -> Result<(), String> {
    unmount(OLD, UnmountFlags::DETACH).map_err(|e| format!("cannot detach the old root: {e}"))?;
    std::fs::remove_dir(OLD).map_err(|e| format!("cannot remove {OLD}: {e}"))?;
    steps::mark("detach the old root");
    mount_remount("/", MountFlags::BIND | MountFlags::RDONLY | ROOT_FLAGS, "")
        .map_err(|e| format!("cannot make the new root read-only: {e}"))?;
    steps::mark("root read-only");
    Ok(())
}

/// Keeps the working directory `cwd` when it is granted or leads to a grant.
/// A directory not granted is not there; the program starts at the root
/// then, where it reaches what it reached from there before: its grants.
pub fn enter_workdir(cwd: &Path) -> Result<(), String> {
    if rustix::process::chdir(cwd).is_err() {
        rustix::process::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    }
    Ok(())
}

/// `path` of the old root, seen from the new one.
fn old(path: &Path) -> PathBuf {
    let rel: PathBuf = path.components().filter(|c| !matches!(c, Component::RootDir)).collect();
    Path::new(OLD).join(rel)
}

/// Brings `path` into the new root with what `access` needs: nothing more
/// than an empty directory for a listing, a fresh proc for `/proc`, else a
/// bind mount of the old root's, read-only unless it may be written.
fn grant(path: &Path, access: Access, socket: bool) -> io::Result<()> {
    if access == Access::List {
        return std::fs::create_dir_all(path);
    }
    if path == Path::new("/proc") {
        mkdir("/proc")?;
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        return Ok(mount("proc", "/proc", "proc", flags, c"")?);
    }
    let source = old(path);
    let meta = std::fs::metadata(&source)?;
    if std::fs::symlink_metadata(path).is_err() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if meta.is_dir() {
            mkdir(path)?;
        } else {
            std::fs::File::create(path)?;
        }
    }
    let writable = socket || matches!(access, Access::Write | Access::Consume);
    let read_only = matches!(access, Access::Read | Access::Exec);
    // What may be written is nosuid,nodev: a set-id file or a device made
    // or found there means nothing inside. A socket's directory is
    // read-only (connecting writes nothing on the file system).
    if writable || read_only {
        let attrs = if read_only { Attrs::ReadOnly } else { Attrs::Writable };
        attach_tree(&source, path, attrs)
    } else {
        // A device file read and written (`/dev/null`): a plain bind.
        Ok(mount_bind_recursive(&source, path)?)
    }
}

/// Mounts `path` on itself read-only, and every mount beneath it (a file
/// beneath a writable grant, the journal). The flags Linux locks on it
/// (nosuid, nodev, noexec) stay as they are.
fn read_only(path: &Path) -> io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    attach_tree(path, path, Attrs::ReadOnly)
}

/// The links of a minimal `/dev` (its device files are grants of the plan).
fn dev() -> io::Result<()> {
    std::fs::create_dir_all("/dev")?;
    for (link, target) in [
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        if std::fs::symlink_metadata(link).is_err() {
            std::os::unix::fs::symlink(target, link)?;
        }
    }
    Ok(())
}

fn mkdir(path: impl AsRef<Path>) -> io::Result<()> {
    Ok(rustix::fs::mkdir(path.as_ref(), Mode::from_raw_mode(0o755))?)
}
