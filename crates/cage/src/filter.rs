//! The helper's seccomp step: `seccomp/teneral.json`, in the OCI runtime
//! spec's `linux.seccomp` shape (the file podman reads with
//! `--security-opt seccomp=`), compiled into the cage (so into both
//! programs that are the helper) and loaded with libseccomp.
//!
//! Invariants: the file is the only source of the filter, so a native run
//! and a podman run are confined alike; a name this libseccomp does not know
//! is passed over as runc and podman do (a test proves every name in the
//! file is known here); an action or comparison it cannot express is an
//! error, never a weaker filter.

use std::str::FromStr;

use libseccomp::{
    ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall,
};
use serde::Deserialize;

/// The seccomp profile every confined process runs under.
pub const PROFILE_JSON: &str = include_str!("../../../seccomp/teneral.json");

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    default_action: String,
    default_errno_ret: Option<i32>,
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    syscalls: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    names: Vec<String>,
    action: String,
    errno_ret: Option<i32>,
    #[serde(default)]
    args: Vec<Arg>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Arg {
    index: u32,
    value: u64,
    #[serde(default)]
    value_two: u64,
    op: String,
}

/// Whether the running Linux filters system calls with seccomp.
pub fn available() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false)
}

fn action(name: &str, errno: Option<i32>) -> Result<ScmpAction, String> {
    // OCI: an errno action without errnoRet means EPERM.
    let errno = if name == "SCMP_ACT_ERRNO" { Some(errno.unwrap_or(libc::EPERM)) } else { errno };
    ScmpAction::from_str(name, errno).map_err(|e| format!("action {name}: {e}"))
}

/// Builds the filter `json` describes, without loading it. Returns it and
/// the names this libseccomp does not know.
pub fn build(json: &str) -> Result<(ScmpFilterContext, Vec<String>), String> {
    let profile: Profile =
        serde_json::from_str(json).map_err(|e| format!("the seccomp profile is not valid: {e}"))?;
    let mut ctx =
        ScmpFilterContext::new(action(&profile.default_action, profile.default_errno_ret)?)
            .map_err(|e| format!("libseccomp: {e}"))?;
    // A binary tree of the system call numbers instead of libseccomp's
    // default chain: Linux runs a new filter once for every system call
    // number of each architecture when it is loaded (to cache which are
    // always allowed), and a chain of ~50 comparisons made that load 0.19 ms
    // of every confined start; the tree loads in 0.05 ms. Same rules, so a
    // libseccomp before 2.5, which cannot, keeps the chain.
    let _ = ctx.set_ctl_optimize(2);
    for name in &profile.architectures {
        let arch = ScmpArch::from_str(name).map_err(|e| format!("architecture {name}: {e}"))?;
        if !ctx.is_arch_present(arch).unwrap_or(false) {
            ctx.add_arch(arch).map_err(|e| format!("architecture {name}: {e}"))?;
        }
    }
    let mut unknown = Vec::new();
    for rule in &profile.syscalls {
        let act = action(&rule.action, rule.errno_ret)?;
        let mut compares = Vec::with_capacity(rule.args.len());
        for arg in &rule.args {
            let op =
                match ScmpCompareOp::from_str(&arg.op).map_err(|e| format!("{}: {e}", arg.op))? {
                    ScmpCompareOp::MaskedEqual(_) => {
                        compares.push(ScmpArgCompare::new(
                            arg.index,
                            ScmpCompareOp::MaskedEqual(arg.value),
                            arg.value_two,
                        ));
                        continue;
                    }
                    op => op,
                };
            compares.push(ScmpArgCompare::new(arg.index, op, arg.value));
        }
        for name in &rule.names {
            let Ok(syscall) = ScmpSyscall::from_name(name) else {
                unknown.push(name.clone());
                continue;
            };
            ctx.add_rule_conditional(act, syscall, &compares)
                .map_err(|e| format!("the rule for {name}: {e}"))?;
        }
    }
    Ok((ctx, unknown))
}

/// Compiles the filter `json` describes to BPF in the file at `path` (for
/// `build.rs`, which includes this file, and the tests).
#[allow(dead_code)]
pub fn compile(json: &str, path: &std::path::Path) -> Result<(), String> {
    let (ctx, _unknown) = build(json)?;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    ctx.export_bpf(&file).map_err(|e| format!("libseccomp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_builds_and_every_name_in_it_is_known_here() {
        let (_ctx, unknown) = build(PROFILE_JSON).expect("the shipped profile builds");
        assert!(unknown.is_empty(), "unknown to this libseccomp: {unknown:?}");
    }

    #[test]
    fn the_issue_list_is_denied() {
        let profile: Profile =
            serde_json::from_str(PROFILE_JSON).expect("the shipped profile is valid JSON");
        assert_eq!(profile.default_action, "SCMP_ACT_ALLOW");
        let denied: Vec<&str> = profile
            .syscalls
            .iter()
            .filter(|r| r.action == "SCMP_ACT_ERRNO" && r.args.is_empty())
            .flat_map(|r| r.names.iter().map(String::as_str))
            .collect();
        for name in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "mount",
            "umount2",
            "pivot_root",
            "move_mount",
            "fsopen",
            "fsmount",
            "bpf",
            "perf_event_open",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "keyctl",
            "add_key",
            "request_key",
            "userfaultfd",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "reboot",
            "swapon",
            "swapoff",
            "setns",
        ] {
            assert!(denied.contains(&name), "{name} is not denied");
        }
    }

    #[test]
    fn the_filter_compiled_at_build_time_is_the_profile() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("now.bpf");
        compile(PROFILE_JSON, &path).expect("the shipped profile compiles");
        let now = std::fs::read(&path).expect("the compiled filter reads back");
        assert!(!now.is_empty());
        assert_eq!(crate::helper::PRECOMPILED, &now[..], "build.rs compiled another profile");
    }

    #[test]
    fn wrong_profiles_are_refused_not_weakened() {
        for json in [
            r#"{"defaultAction": "SCMP_ACT_SOMETIMES"}"#,
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_PDP11"]}"#,
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["bpf"], "action": "SCMP_ACT_MAYBE"}]}"#,
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_ROUGHLY"}]}]}"#,
            "not json",
        ] {
            assert!(build(json).is_err(), "{json}");
        }
    }
}
