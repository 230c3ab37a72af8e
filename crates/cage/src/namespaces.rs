//! The helper's first step: the namespaces a plan needs.
//!
//! - A mount namespace, in which the cage's first process builds a new
//!   root holding only the plan's grants ([`crate::root`]).
//! - A PID namespace, whose first process is the helper's child
//!   ([`crate::init`]): `/proc` shows only the cage's processes.
//! - A network namespace with only loopback, up, for every profile but the model's, into
//!   which the plan's forwarded ports are relayed ([`crate::relay`]).
//!
//! As root (CAP_SYS_ADMIN) they are made directly; otherwise inside a new
//! user namespace that maps the caller's uid and gid to themselves, so files
//! keep their owners. Capabilities gained in it are dropped by a later step.

use rustix::thread::{CapabilitySet, UnshareFlags};

use crate::plan::{Net, Plan};
use crate::steps;

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

/// Makes the namespaces of a cage: user (unless root), mount, PID, and a
/// network namespace with loopback up when the plan has only loopback.
/// The mount and PID namespaces are filled by the cage's first process
/// ([`crate::init`], [`crate::root`]).
/// What a zygote's spare made ahead (`crate::zygote`): these are used, not
/// made again.
#[derive(Debug, Clone, Copy, Default)]
pub struct Made {
    pub user: bool,
    pub net: bool,
    /// This process is the first of its PID namespace already.
    pub pid: bool,
}

pub fn enter(plan: &Plan, made: Made) -> Result<(), String> {
    if (made.net || made.pid) && !crate::zygote::spare_fits(plan) {
        return Err("namespaces made ahead serve only a loopback-only plan without forwarded \
                    ports"
            .into());
    }
    // The relay must be forked while this process is still in the kernel's
    // network namespace; it gets its listeners once loopback is up inside.
    let relay = crate::relay::start(&plan.forward)?;
    if relay.is_some() {
        steps::mark("fork the relay");
    }
    if !has_sys_admin() && !made.user {
        enter_user()?;
    }
    // One kind at a time (the same namespaces as one call makes, all
    // owned by the user namespace above when there is one), so that the
    // benchmark sees what each costs.
    let mut kinds = vec![(UnshareFlags::NEWNS, "mount namespace")];
    if !made.pid {
        kinds.push((UnshareFlags::NEWPID, "PID namespace"));
    }
    if plan.net == Net::Loopback && !made.net {
        kinds.push((UnshareFlags::NEWNET, "network namespace"));
    }
    for (flag, name) in kinds {
        crate::sys::unshare(flag).map_err(|e| format!("cannot make a {name}: {e}"))?;
        steps::mark(name);
    }
    if plan.net == Net::Loopback && !made.net {
        crate::sys::loopback_up().map_err(|e| format!("cannot bring loopback up: {e}"))?;
        steps::mark("loopback up");
    }
    if let Some(relay) = relay {
        crate::relay::hand_over(relay, &plan.forward)?;
        steps::mark("relay's listeners");
    }
    Ok(())
}

/// Enters a new user namespace that maps this process's uid and gid to
/// themselves (files keep their owners).
pub fn enter_user() -> Result<(), String> {
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    crate::sys::unshare(UnshareFlags::NEWUSER)
        .map_err(|e| format!("cannot make a user namespace: {e}"))?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("cannot write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{0} {0} 1", uid.as_raw()))?;
    write("gid_map", format!("{0} {0} 1", gid.as_raw()))?;
    steps::mark("user namespace");
    Ok(())
}
