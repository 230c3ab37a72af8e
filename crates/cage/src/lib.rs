//! The cage: what turns a process into a confined one, and nothing of the
//! kernel that decides what to confine.
//!
//! The kernel never confines itself. It starts the helper (`teneral-confine
//! confine`, or `teneral confine`, both [`helper::main`]) with a
//! [`plan::Plan`] on its command line; the freshly executed helper,
//! single-threaded, applies in order: closing every descriptor the plan
//! does not name, namespaces (a private mount namespace for the
//! generation's read-only journal, a network namespace with only loopback
//! and the forwarded ports), the Landlock ruleset, dropping every
//! capability, no_new_privs, the resource limits the plan names, the
//! seccomp profile (`seccomp/teneral.json`), and then executes the program.
//! Each step that fails ends the helper with its own status
//! ([`EXIT_NAMESPACES`] ...), so the kernel can say which one it was
//! ([`describe_exit`]). The [`zygote`] forks the same helper for each launch
//! instead of the kernel executing it anew.
//!
//! This crate links only what confinement needs (rustix, libc, landlock,
//! libseccomp, and serde for the seccomp profile's JSON); which plan a
//! profile gets, and who an individual is on the host, the kernel decides
//! (its `confine` module).
//!
//! Invariants:
//! - A step short of fully enforced is a failure, never a warning: Landlock
//!   is asked for with `HardRequirement`, and the helper executes nothing
//!   unless every step succeeded.
//! - The helper only applies a plan; it decides nothing about paths.
//!
//! The reasons are in docs/design.md ("The cage") and the table of what each
//! profile may touch in docs/cage.md.

mod filter;
pub mod helper;
pub mod identity;
mod init;
mod namespaces;
pub mod plan;
mod relay;
mod root;
mod ruleset;
pub mod steps;
mod sys;
pub mod zygote;

use std::ffi::OsString;

pub use filter::PROFILE_JSON;

/// Wrong arguments to `teneral confine`.
pub const EXIT_USAGE: i32 = 120;
/// The namespaces could not be made (mount or network namespace, loopback).
pub const EXIT_NAMESPACES: i32 = 121;
/// The Landlock ruleset could not be built or is not fully enforced.
pub const EXIT_LANDLOCK: i32 = 122;
/// A capability could not be dropped.
pub const EXIT_CAPABILITIES: i32 = 123;
/// no_new_privs could not be set.
pub const EXIT_NO_NEW_PRIVS: i32 = 124;
/// The seccomp profile could not be built or loaded.
pub const EXIT_SECCOMP: i32 = 125;
/// The program could not be executed (it exists but cannot run).
pub const EXIT_EXEC: i32 = 126;
/// The program was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// The resource limits could not be set.
pub const EXIT_LIMITS: i32 = 119;

/// The environment variable that names, one a line, the `cgroup.procs`
/// files a launch of the helper enters before anything else (the cgroup
/// runner's, when a zygote forks the helper; a spare's helper, forked
/// before, is moved into them by [`zygote::Zygote::launch`]). The helper
/// removes it from the program's environment.
pub const CGROUP_PROCS: &str = "TENERAL_CGROUP_PROCS";

/// The user and group (`nobody`) a root kernel's cage runs as when its
/// launch names no individual; an individual's cages run as its own
/// identity ([`identity`]).
pub const BODY_ID: u32 = 65534;

/// The Landlock ABI the cage needs: 3 for truncation rights, 6 for keeping
/// signals and abstract sockets inside the cage.
pub const LANDLOCK_ABI: i32 = 6;

/// The sources of the cage this was built from (build.rs): the helper
/// confines only for a kernel whose cage is of the same sources, so a
/// `teneral-confine` left behind by `cargo build --bin teneral` never runs
/// another cage than the kernel asks for.
pub const SOURCE_ID: &str = env!("TENERAL_SOURCE_ID");

/// Which step of the cage an exit status of the helper names, if any.
pub fn describe_exit(code: i32) -> Option<&'static str> {
    Some(match code {
        EXIT_USAGE => "the cage was given wrong arguments",
        EXIT_NAMESPACES => "the cage could not make its namespaces",
        EXIT_LANDLOCK => "the cage could not enforce its Landlock rules",
        EXIT_CAPABILITIES => "the cage could not drop the capabilities",
        EXIT_NO_NEW_PRIVS => "the cage could not set no_new_privs",
        EXIT_SECCOMP => "the cage could not load its seccomp profile",
        EXIT_EXEC => "the cage could not execute the program",
        EXIT_NOT_FOUND => "the cage did not find the program",
        EXIT_LIMITS => "the cage could not set its resource limits",
        _ => return None,
    })
}

/// The features of the running Linux the cage needs and does not find;
/// `pretend` names those to treat as missing (the test knob).
pub fn missing(pretend: &[String]) -> Vec<String> {
    let pretends = |f: &str| pretend.iter().any(|p| p == f);
    let mut missing = Vec::new();
    let abi = if pretends("landlock") { 0 } else { sys::landlock_abi() };
    if abi < LANDLOCK_ABI {
        let offers = if abi == 0 { "no Landlock".to_owned() } else { format!("ABI {abi}") };
        missing.push(format!(
            "Landlock ABI {LANDLOCK_ABI} (Linux 6.12 or later with landlock in its lsm= list; this one offers {offers})"
        ));
    }
    if pretends("seccomp") || !filter::available() {
        missing.push("seccomp filters (CONFIG_SECCOMP_FILTER)".to_owned());
    }
    if pretends("namespaces") || !namespaces::available() {
        missing.push(
            "namespaces for an unprivileged user (no user namespace can be made here: they \
             are off (see /proc/sys/user/max_user_namespaces and \
             kernel.unprivileged_userns_clone), or this process is already in a sandbox that \
             denies them, as a gate check is)"
                .to_owned(),
        );
    }
    missing
}

/// `teneral-confine`'s whole program, given its arguments (the program's
/// name first); returns its exit status. `teneral-confine confine
/// [--source ID] PLAN -- PROGRAM ...` is the helper, and `teneral-confine
/// zygote --source ID` the [`zygote`]; each refuses a kernel whose cage is
/// of other sources ([`SOURCE_ID`]).
pub fn program(args: &[OsString]) -> i32 {
    let other_sources = |given: &str| {
        eprintln!(
            "teneral-confine: built from other sources ({SOURCE_ID}) than the kernel that runs \
             it ({given}); build both programs again: cargo build --bins"
        );
        EXIT_USAGE
    };
    match args.get(1).and_then(|a| a.to_str()) {
        Some("confine") => {
            let mut plan = &args[2..];
            // The kernel names its sources; a helper left from other
            // sources (a build of `--bin teneral` alone) confines nothing
            // for it.
            if plan.first().is_some_and(|a| a == "--source") {
                let given = plan.get(1).map(|s| s.to_string_lossy()).unwrap_or_default();
                if given != SOURCE_ID {
                    return other_sources(&given);
                }
                plan = &plan[2.min(plan.len())..];
            }
            helper::main(plan)
        }
        // Kept by the kernel, forking each confined launch.
        Some("zygote") => match &args[2..] {
            [flag, id] if flag == "--source" => {
                let given = id.to_string_lossy();
                if given != SOURCE_ID {
                    return other_sources(&given);
                }
                zygote::main()
            }
            _ => {
                eprintln!(
                    "teneral-confine: the kernel runs this as `teneral-confine zygote --source ID`"
                );
                EXIT_USAGE
            }
        },
        _ => {
            eprintln!(
                "teneral-confine: the kernel runs this as `teneral-confine confine PLAN -- \
                 PROGRAM ...` (see the kernel's confine::wrap); there is nothing else to do with it"
            );
            EXIT_USAGE
        }
    }
}
