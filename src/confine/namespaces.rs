//! The helper's first step: the namespaces a plan needs.
//!
//! - A private mount namespace when files must be read-only beneath a
//!   writable directory (the journal in `memory/`): each is bind-mounted on
//!   itself and remounted read-only. Writing it then fails with EROFS, and
//!   removing or renaming over it with EBUSY, whatever Landlock allows.
//! - In that namespace, an empty read-only tmpfs over each directory where
//!   other programs keep their Unix sockets (`/run/user`, `/run/dbus`), which
//!   Landlock before ABI 9 does not keep a process from connecting to.
//! - A network namespace with only loopback, up, for every profile, into
//!   which the plan's forwarded ports are relayed ([`super::relay`]).
//!
//! As root (CAP_SYS_ADMIN) they are made directly; otherwise inside a new
//! user namespace that maps the caller's uid and gid to themselves, so files
//! keep their owners. Capabilities gained in it are dropped by a later step.

use std::io;
use std::path::{Path, PathBuf};

use rustix::mount::{mount_bind, mount_change, mount_remount, MountFlags, MountPropagationFlags};
use rustix::thread::{CapabilitySet, UnshareFlags};

use super::plan::{Net, Plan};

/// Whether this process can make the namespaces a plan may ask for. Root
/// makes them directly; anyone else needs a user namespace, which is tried
/// once (it is refused inside another sandbox, such as a gate check running
/// the kernel's own tests).
pub fn available() -> bool {
    if has_sys_admin() {
        return true;
    }
    static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBED.get_or_init(|| {
        let number =
            |p: &str| std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse::<u64>().ok());
        let max = number("/proc/sys/user/max_user_namespaces").unwrap_or(0);
        let clone = number("/proc/sys/kernel/unprivileged_userns_clone").unwrap_or(1);
        max > 0
            && clone != 0
            && crate::sys::can_unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)
    })
}

pub fn has_sys_admin() -> bool {
    rustix::thread::capabilities(None)
        .map(|c| c.effective.contains(CapabilitySet::SYS_ADMIN))
        .unwrap_or(false)
}

/// Makes the namespaces `plan` needs; does nothing when it needs none.
pub fn enter(plan: &Plan) -> Result<(), String> {
    let mut flags = UnshareFlags::empty();
    if !plan.readonly.is_empty() || !plan.hidden.is_empty() {
        flags |= UnshareFlags::NEWNS;
    }
    if plan.net == Net::Loopback {
        flags |= UnshareFlags::NEWNET;
    }
    if flags.is_empty() {
        return Ok(());
    }
    // The relay must be forked while this process is still in the kernel's
    // network namespace; it gets its listeners once loopback is up inside.
    let relay = super::relay::start(&plan.forward)?;
    let in_userns = !has_sys_admin();
    if in_userns {
        let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
        crate::sys::unshare(flags | UnshareFlags::NEWUSER)
            .map_err(|e| format!("cannot make a user namespace: {e}"))?;
        let write = |file: &str, text: String| {
            std::fs::write(format!("/proc/self/{file}"), text)
                .map_err(|e| format!("cannot write /proc/self/{file}: {e}"))
        };
        write("setgroups", "deny".into())?;
        write("uid_map", format!("{0} {0} 1", uid.as_raw()))?;
        write("gid_map", format!("{0} {0} 1", gid.as_raw()))?;
    } else {
        crate::sys::unshare(flags).map_err(|e| format!("cannot make namespaces: {e}"))?;
    }
    if flags.contains(UnshareFlags::NEWNS) {
        mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)
            .map_err(|e| format!("cannot make the mounts private: {e}"))?;
        for dir in &plan.hidden {
            let flags =
                MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY;
            match rustix::mount::mount("tmpfs", dir, "tmpfs", flags, c"mode=0555,size=4k") {
                Ok(()) => {}
                // A place that is not there in this mount namespace hides
                // nothing (a manager's private /run, say): nothing to cover.
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(format!("cannot hide {}: {e}", dir.display())),
            }
        }
        for path in &plan.readonly {
            read_only(path)
                .map_err(|e| format!("cannot make {} read-only: {e}", path.display()))?;
        }
    }
    if plan.net == Net::Loopback {
        crate::sys::loopback_up().map_err(|e| format!("cannot bring loopback up: {e}"))?;
    }
    if let Some(relay) = relay {
        super::relay::hand_over(relay, &plan.forward)?;
    }
    Ok(())
}

/// Bind-mounts `path` on itself, read-only. The flags Linux locks on the
/// mount beneath (nosuid, nodev, noexec) are kept, or a user namespace may
/// not remount it.
fn read_only(path: &Path) -> io::Result<()> {
    let path: PathBuf = path.canonicalize()?;
    mount_bind(&path, &path)?;
    let kept = rustix::fs::statvfs(&path)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (st, ms) in [
        (rustix::fs::StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (rustix::fs::StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (rustix::fs::StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
    ] {
        if kept.contains(st) {
            flags |= ms;
        }
    }
    mount_remount(&path, flags, "")?;
    Ok(())
}
