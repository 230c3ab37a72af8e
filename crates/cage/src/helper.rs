//! `teneral confine [plan] -- program args...`: the freshly executed helper
//! that confines itself and then becomes the program.
//!
//! It runs before any runtime or thread exists (the binary dispatches here
//! first), applies the steps in the module's order, writes one line to
//! stderr naming the step that failed, and exits with that step's status.
//! On success it never returns: it forks into the cage's PID namespace
//! (`init`) and ends as the program does; the program keeps its
//! environment, and of its descriptors 0, 1, 2 and those the plan names
//! (every other one is closed first, before any namespace is made).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use rustix::thread::{CapabilitySet, CapabilitySets};

use crate::plan::Plan;
use crate::zygote::{Ahead, Hold};
use crate::{
    filter, init, namespaces, root, ruleset, steps, EXIT_CAPABILITIES, EXIT_EXEC, EXIT_LANDLOCK,
    EXIT_LIMITS, EXIT_NAMESPACES, EXIT_NOT_FOUND, EXIT_NO_NEW_PRIVS, EXIT_SECCOMP, EXIT_USAGE,
};

/// Runs the helper with the arguments after `confine`; returns the exit
/// status of the step that failed (it returns only on failure).
pub fn main(args: &[OsString]) -> i32 {
    run(args, Ahead::default(), None)
}

/// [`main`] with what a zygote's spare made ahead of need
/// ([`crate::zygote`]): those namespaces are used instead of made; and,
/// when a unit of the user manager adopts the launch, held until the
/// kernel's word that it has ([`Hold`]). A fresh launch is the process the
/// unit adopts, and waits first of all. A spare's first process, adopted
/// in its helper's stead, waits once its root is built, just before it
/// forks the program's process: what comes before forks nothing and runs
/// nothing of the program, and the cage is made while the manager works.
pub(crate) fn run(args: &[OsString], ahead: Ahead, hold: Option<Hold>) -> i32 {
    steps::init();
    steps::mark("helper started");
    let hold = match hold {
        Some(hold) if ahead.inside.is_none() => {
            if let Err(e) = hold.wait() {
                return fail(EXIT_NAMESPACES, "hold", &e);
            }
            steps::mark("let go");
            None
        }
        hold => hold,
    };
    if let Err(e) = enter_cgroups() {
        return fail(EXIT_NAMESPACES, "cgroup", &e);
    }
    let (plan, argv) = match Plan::from_args(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            return fail(
                EXIT_USAGE,
                "arguments",
                &format!("{e}; the kernel writes these arguments, see confine::wrap"),
            )
        }
    };
    // Only what the plan names crosses into the cage: every other
    // descriptor this process inherited (from the kernel, from whatever
    // started the kernel, from the zygote) is closed before anything of
    // the cage is made; the helper's own are closed on exec.
    if let Err(e) = keep_descriptors(&plan, &ahead, hold.as_ref()) {
        return fail(EXIT_USAGE, "descriptors", &e);
    }
    steps::mark("descriptors");
    if plan.pretend_missing.iter().any(|p| p == "namespaces") {
        return fail(
            EXIT_NAMESPACES,
            "namespaces",
            "this Linux lets no namespace be made (pretended by TENERAL_TEST_PRETEND_MISSING)",
        );
    }
    // Root's cages run as the individual's own identity (the plan's, or
    // nobody when it names none), and what they may write is given to it
    // (root.rs): nothing a body writes is root's on disk.
    steps::mark("plan read");
    if let Some(e) = &ahead.failed {
        return fail(EXIT_NAMESPACES, "namespaces", e);
    }
    let body = rustix::process::getuid()
        .is_root()
        .then(|| plan.identity.unwrap_or(crate::identity::Identity::NOBODY));
    // With a task limit, root's body counts its processes in a user
    // namespace of its cage's own (RLIMIT_NPROC counts per user namespace),
    // not among every process its identity has on the machine.
    let counted = match (body, plan.limits.tasks, ahead.counted) {
        (Some(_), Some(_), Some(made)) => Some(made),
        (Some(_), Some(_), None) => {
            match crate::sys::user_namespace_fd(crate::identity::EVERY_ID_BUT_ROOT) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    return fail(
                        EXIT_LIMITS,
                        "limits",
                        &format!("cannot make the user namespace the task limit counts in: {e}"),
                    )
                }
            }
        }
        _ => None,
    };
    let made = namespaces::Made { user: ahead.user, net: ahead.net, pid: ahead.inside.is_some() };
    if let Err(e) = namespaces::enter(&plan, made) {
        return fail(EXIT_NAMESPACES, "namespaces", &e);
    }
    // The helper stays outside and supervises; what follows runs as pid 1
    // of the cage's PID namespace (a spare has forked into it already).
    let inside = match ahead.inside {
        Some(inside) => inside,
        None => match init::fork_first() {
            Ok(inside) => {
                steps::mark("fork into the PID namespace");
                inside
            }
            Err(e) => return fail(EXIT_NAMESPACES, "namespaces", &e),
        },
    };
    let cwd = match root::build(&plan, body) {
        Ok(cwd) => cwd,
        Err(e) => return fail(EXIT_NAMESPACES, "root", &e),
    };
    if let Some(hold) = hold {
        if let Err(e) = hold.wait() {
            return fail(EXIT_NAMESPACES, "hold", &e);
        }
        steps::mark("let go");
    }
    init::run(inside, root::finish, move |ready| {
        confine_and_exec(&plan, &argv, body, counted, &cwd, ready)
    })
}

/// Closes every descriptor from 3 up but those `plan` names (which lose
/// close-on-exec, so the program gets them) and the helper's own (`ahead`'s,
/// the hold's and the benchmark's, which keep or get it, so the program
/// does not).
fn keep_descriptors(plan: &Plan, ahead: &Ahead, hold: Option<&Hold>) -> Result<(), String> {
    let own: Vec<i32> =
        ahead.fds().into_iter().chain(hold.map(Hold::fd)).chain(steps::fd()).collect();
    let keep: Vec<i32> = plan.fds.iter().chain(&own).copied().collect();
    crate::sys::close_all_but(&keep).map_err(|e| format!("close_range: {e}"))?;
    for &fd in own.iter().filter(|fd| !plan.fds.contains(fd)) {
        crate::sys::set_cloexec(fd, true).map_err(|e| format!("descriptor {fd}: {e}"))?;
    }
    for &fd in &plan.fds {
        crate::sys::set_cloexec(fd, false)
            .map_err(|e| format!("descriptor {fd}, which the plan names, is not open: {e}"))?;
    }
    Ok(())
}

/// Enters the cgroups [`crate::CGROUP_PROCS`] names, if any, before this
/// process makes anything its limits should count; the variable does not
/// reach the program.
fn enter_cgroups() -> Result<(), String> {
    let Some(named) = std::env::var_os(crate::CGROUP_PROCS) else { return Ok(()) };
    std::env::remove_var(crate::CGROUP_PROCS);
    let me = std::process::id().to_string();
    for procs in named.to_string_lossy().lines().filter(|l| !l.is_empty()) {
        std::fs::write(procs, &me).map_err(|e| {
            format!("cannot enter the cgroup {procs}: {e}; the kernel made it for this launch")
        })?;
    }
    Ok(())
}

/// The program's process: Landlock, capabilities, no_new_privs, seccomp,
/// then, once the first process has finished the new root (the old one
/// detached: `ready`), the working directory and the program. Returns only
/// the status of the step that failed.
fn confine_and_exec(
    plan: &Plan,
    argv: &[OsString],
    body: Option<crate::identity::Identity>,
    counted: Option<std::os::fd::OwnedFd>,
    cwd: &std::path::Path,
    ready: init::RootReady,
) -> i32 {
    steps::mark("fork the program");
    let privileged = namespaces::has_sys_admin();
    if let Err(e) = ruleset::restrict(plan, !privileged) {
        return fail(EXIT_LANDLOCK, "landlock", &e);
    }
    steps::mark("landlock");
    if let Some(userns) = counted {
        use std::os::fd::AsFd;
        let joined = rustix::thread::move_into_link_name_space(
            userns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::User),
        );
        if let Err(e) = joined {
            return fail(
                EXIT_LIMITS,
                "limits",
                &format!("cannot enter the cage's user namespace: {e}"),
            );
        }
        steps::mark("the task limit's user namespace");
    }
    if let Some(id) = body {
        if let Err(e) = drop_bounding().and_then(|()| become_identity(id)) {
            return fail(EXIT_CAPABILITIES, "identity", &e);
        }
        steps::mark("identity");
    }
    if let Err(e) = drop_capabilities() {
        return fail(EXIT_CAPABILITIES, "capabilities", &e);
    }
    steps::mark("capabilities");
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        return fail(EXIT_NO_NEW_PRIVS, "no_new_privs", &e.to_string());
    }
    if let Err(e) = set_limits(plan.limits) {
        return fail(EXIT_LIMITS, "limits", &e);
    }
    if plan.pretend_missing.iter().any(|p| p == "seccomp") {
        return fail(
            EXIT_SECCOMP,
            "seccomp",
            "this Linux has no seccomp filters (pretended by TENERAL_TEST_PRETEND_MISSING)",
        );
    }
    if let Err(e) = load_seccomp() {
        return fail(EXIT_SECCOMP, "seccomp", &e);
    }
    steps::mark("no_new_privs, seccomp");
    // Nothing runs while the old root is still there.
    if let Err(e) = ready.wait().and_then(|()| root::enter_workdir(cwd)) {
        return fail(EXIT_NAMESPACES, "root", &e);
    }
    steps::mark("root finished (waited)");
    let Some((program, rest)) = argv.split_first() else {
        return fail(EXIT_USAGE, "arguments", "no program to run");
    };
    let e = std::process::Command::new(program).args(rest).exec();
    let status = if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_EXEC };
    fail(status, "exec", &format!("{}: {e}", program.to_string_lossy()))
}

/// The program's resource limits, soft and hard alike: `RLIMIT_NPROC`
/// (counted for its identity in its user namespace, so a fork bomb ends in
/// EAGAIN inside) and `RLIMIT_AS`; and its nice value, which only lowers
/// its priority and needs no capability.
fn set_limits(limits: crate::plan::Rlimits) -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    if let Some(nice) = limits.nice {
        rustix::process::setpriority_process(None, i32::from(nice))
            .map_err(|e| format!("nice {nice}: {e}"))?;
    }
    for (resource, name, limit) in [
        (Resource::Nproc, "RLIMIT_NPROC", limits.tasks),
        (Resource::As, "RLIMIT_AS", limits.address_space),
    ] {
        if let Some(limit) = limit {
            let value = Rlimit { current: Some(limit), maximum: Some(limit) };
            setrlimit(resource, value).map_err(|e| format!("{name} {limit}: {e}"))?;
        }
    }
    Ok(())
}

/// The supervising helper, once it has forked the cage: capabilities
/// dropped, no_new_privs, seccomp. On failure, the step's status.
pub(crate) fn confine_supervisor() -> Result<(), (i32, String)> {
    drop_capabilities().map_err(|e| (EXIT_CAPABILITIES, e))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| (EXIT_NO_NEW_PRIVS, e.to_string()))?;
    load_seccomp().map_err(|e| (EXIT_SECCOMP, e))
}

/// Empties the bounding set when this process may (CAP_SETPCAP).
fn drop_bounding() -> Result<(), String> {
    let can_bound = rustix::thread::capabilities(None)
        .map(|c| c.effective.contains(CapabilitySet::SETPCAP))
        .map_err(|e| format!("capget: {e}"))?;
    if !can_bound {
        return Ok(());
    }
    for bit in 0..64u32 {
        match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1u64 << bit,
        )) {
            Ok(()) => {}
            // Past the last capability this Linux knows.
            Err(rustix::io::Errno::INVAL) => break,
            Err(e) => {
                return Err(format!("cannot drop capability {bit} from the bounding set: {e}"))
            }
        }
    }
    Ok(())
}

/// Root's body becomes `id`, its individual's identity: no supplementary
/// group, and real, effective and saved ids all changed, which also
/// empties its capabilities. Single-threaded, so the thread's ids are the
/// process's.
fn become_identity(id: crate::identity::Identity) -> Result<(), String> {
    use rustix::process::{Gid, Uid};
    let (uid, gid) = (Uid::from_raw(id.uid), Gid::from_raw(id.gid));
    rustix::thread::set_thread_groups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    rustix::thread::set_thread_res_gid(gid, gid, gid).map_err(|e| format!("setresgid: {e}"))?;
    rustix::thread::set_thread_res_uid(uid, uid, uid).map_err(|e| format!("setresuid: {e}"))?;
    Ok(())
}

/// The seccomp profile as `build.rs` compiled it; empty when it could not.
pub(crate) const PRECOMPILED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/teneral.bpf"));

/// Loads the seccomp profile: the BPF compiled at build time when there is
/// one (compiling it with libseccomp is most of the cage's cost), else
/// compiled from the profile now.
fn load_seccomp() -> Result<(), String> {
    if !PRECOMPILED.is_empty() {
        return crate::sys::load_seccomp_bpf(PRECOMPILED)
            .map_err(|e| format!("cannot load the compiled seccomp filter: {e}"));
    }
    let (ctx, _unknown) = filter::build(filter::PROFILE_JSON)?;
    ctx.load().map_err(|e| format!("cannot load the seccomp filter: {e}"))
}

fn fail(status: i32, step: &str, message: &str) -> i32 {
    eprintln!("teneral confine: {step}: {message}");
    status
}

/// Empties the bounding, ambient, inheritable, permitted and effective
/// sets, and checks that they are empty. Without CAP_SETPCAP (an
/// unprivileged caller outside a user namespace) the bounding set cannot be
/// changed; there it matters not, since no_new_privs keeps an execution from
/// gaining what the permitted set lacks.
pub(crate) fn drop_capabilities() -> Result<(), String> {
    keep_only(CapabilitySet::empty())
}

/// [`drop_capabilities`], but `keep` stays effective and permitted (the
/// cage's first process keeps CAP_KILL). A `keep` this process lacks is
/// not gained.
pub(crate) fn keep_only(keep: CapabilitySet) -> Result<(), String> {
    drop_bounding()?;
    rustix::thread::clear_ambient_capability_set().map_err(|e| format!("ambient set: {e}"))?;
    let had = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    let kept = had.permitted & keep;
    let sets =
        CapabilitySets { effective: kept, permitted: kept, inheritable: CapabilitySet::empty() };
    rustix::thread::set_capabilities(None, sets).map_err(|e| format!("capset: {e}"))?;
    let now = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    if (now.effective | now.permitted) & !keep != CapabilitySet::empty()
        || !now.inheritable.is_empty()
    {
        return Err(format!("capabilities remain after dropping them: {now:?}"));
    }
    Ok(())
}
