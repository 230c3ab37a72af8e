//! The limits of the cgroup the kernel runs in (a container's, a pod's),
//! read at its start, and the owner's limits for bodies and checks held
//! against them: a body or a check runs below the kernel, so a limit above
//! the kernel's own could never be reached, and the memory killer would take
//! the whole container (the kernel with it) instead of the one child.
//!
//! Read once at the start, when children run below the kernel (not as units
//! of a user manager): the `memory` ceiling is the lowest `memory.max` (v2)
//! or `memory.limit_in_bytes` (v1) of the kernel's cgroup and every ancestor
//! it can see; the `tasks` ceiling likewise from `pids.max`. "max" and v1's
//! page-rounded "no limit" are no ceiling. [`check`] is the decision.

use std::path::{Path, PathBuf};

use crate::settings::Quota;

/// A v1 memory limit at or above this is the hierarchy's "no limit" (the
/// largest signed 64-bit number, rounded down to a page).
const V1_UNLIMITED: u64 = 1 << 62;

/// One limit of the kernel's cgroups: its value and the file that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    pub limit: u64,
    pub file: PathBuf,
}

/// The limits the kernel's cgroups put on everything below them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ceilings {
    /// Bytes of memory.
    pub memory: Option<Ceiling>,
    /// Processes and threads.
    pub tasks: Option<Ceiling>,
}

/// An owner's limit above the kernel's cgroup's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AboveCeiling {
    #[error(
        "TENERAL_MEMORY_MAX={setting} is above the memory limit of the cgroup the kernel runs in \
         ({ceiling}, set by {}): a body or a check would be killed with the kernel before it \
         reached its own limit. Write TENERAL_MEMORY_MAX={advice} (or less) in .env, leaving \
         the kernel room of its own, or raise the container's memory limit \
         (resources.limits.memory of the pod, docs/kubernetes.md)",
        file.display()
    )]
    Memory { setting: String, ceiling: String, advice: String, file: PathBuf },
    #[error(
        "TENERAL_TASKS_MAX={setting} is above the task limit of the cgroup the kernel runs in \
         ({ceiling}, set by {}): the kernel's own threads share it. Write \
         TENERAL_TASKS_MAX={advice} (or less) in .env, or raise the container's pids limit",
        file.display()
    )]
    Tasks { setting: String, ceiling: u64, advice: u64, file: PathBuf },
}

/// The decision: the owner's `quota` against the kernel's `ceilings`. A
/// limit of none (infinity) under a ceiling is above it; a limit equal to
/// the ceiling is allowed. The advice leaves the kernel an eighth of the
/// memory (at least 64 MiB) and 64 tasks.
pub fn check(quota: &Quota, ceilings: &Ceilings) -> Result<(), AboveCeiling> {
    if let Some(Ceiling { limit, file }) = &ceilings.memory {
        if quota.memory_max.is_none_or(|m| m > *limit) {
            let room = (limit / 8).max(64 << 20);
            return Err(AboveCeiling::Memory {
                setting: quota.memory_max.map_or("infinity".to_owned(), size),
                ceiling: size(*limit),
                advice: size(floor_mib(limit.saturating_sub(room).max(16 << 20))),
                file: file.clone(),
            });
        }
    }
    if let Some(Ceiling { limit, file }) = &ceilings.tasks {
        if quota.tasks_max.is_none_or(|t| t > *limit) {
            return Err(AboveCeiling::Tasks {
                setting: quota.tasks_max.map_or("infinity".to_owned(), |t| t.to_string()),
                ceiling: *limit,
                advice: limit.saturating_sub(64).max(8),
                file: file.clone(),
            });
        }
    }
    Ok(())
}

/// `n` bytes rounded down to a whole MiB.
fn floor_mib(n: u64) -> u64 {
    n & !((1 << 20) - 1)
}

/// Bytes as `.env` takes them: the largest of T, G, M, K that divides it.
fn size(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n != 0 && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// The ceilings of the kernel's cgroups: from `v2` (its cgroup in the
/// unified hierarchy) or `memory` and `pids` (its cgroups in v1's), each
/// and its ancestors up to its hierarchy's root.
pub fn read(v2: Option<&Path>, memory: Option<&Path>, pids: Option<&Path>) -> Ceilings {
    let v2_memory = v2.and_then(|d| lowest(d, "memory.max", u64::MAX));
    let v1_memory = memory.and_then(|d| lowest(d, "memory.limit_in_bytes", V1_UNLIMITED));
    let v2_tasks = v2.and_then(|d| lowest(d, "pids.max", u64::MAX));
    let v1_tasks = pids.and_then(|d| lowest(d, "pids.max", u64::MAX));
    Ceilings { memory: least(v2_memory, v1_memory), tasks: least(v2_tasks, v1_tasks) }
}

/// The ceilings of the running kernel's cgroups.
pub fn of_this_process() -> Ceilings {
    let text = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let found = super::cgroup::locate(&text("/proc/self/cgroup"), &text("/proc/self/mountinfo"));
    read(found.v2.as_deref(), found.memory.as_deref(), found.pids.as_deref())
}

fn least(a: Option<Ceiling>, b: Option<Ceiling>) -> Option<Ceiling> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.limit < a.limit { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The lowest limit `name` sets in `dir` and the cgroups above it (each
/// directory with a `cgroup.procs` is one); values at or above `unlimited`
/// and "max" set none.
fn lowest(dir: &Path, name: &str, unlimited: u64) -> Option<Ceiling> {
    let mut found: Option<Ceiling> = None;
    let mut at = Some(dir);
    while let Some(cgroup) = at.filter(|d| d.join("cgroup.procs").exists()) {
        let file = cgroup.join(name);
        let limit = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .filter(|&n| n < unlimited);
        if let Some(limit) = limit {
            if found.as_ref().is_none_or(|f| limit < f.limit) {
                found = Some(Ceiling { limit, file });
            }
        }
        at = cgroup.parent();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;

    fn at(limit: u64) -> Option<Ceiling> {
        Some(Ceiling { limit, file: PathBuf::from("/sys/fs/cgroup/memory.max") })
    }

    #[test]
    fn limits_above_the_kernels_cgroup_are_refused_with_what_to_write() {
        let quota = |memory_max, tasks_max| Quota { memory_max, tasks_max };
        let ceilings = |memory, tasks| Ceilings { memory, tasks };
        // (the owner's limits, the cgroup's, the words of the refusal or none)
        let table: [(Quota, Ceilings, Option<&str>); 9] = [
            (quota(Some(4 * G), Some(2048)), ceilings(None, None), None),
            (quota(None, None), ceilings(None, None), None),
            (quota(Some(2 * G), Some(512)), ceilings(at(3 * G), at(1024)), None),
            (quota(Some(3 * G), Some(1024)), ceilings(at(3 * G), at(1024)), None),
            (
                quota(Some(4 * G), Some(512)),
                ceilings(at(3 * G), None),
                Some("TENERAL_MEMORY_MAX=4G is above the memory limit of the cgroup the kernel runs in (3G, set by /sys/fs/cgroup/memory.max)"),
            ),
            (
                quota(None, Some(512)),
                ceilings(at(3 * G), None),
                Some("TENERAL_MEMORY_MAX=infinity is above"),
            ),
            (
                quota(Some(4 * G), Some(512)),
                ceilings(at(3 * G), None),
                Some("Write TENERAL_MEMORY_MAX=2688M (or less) in .env"),
            ),
            (
                quota(Some(256 * M), Some(2048)),
                ceilings(at(G), at(1000)),
                Some("TENERAL_TASKS_MAX=2048 is above the task limit of the cgroup the kernel runs in (1000, set by /sys/fs/cgroup/memory.max): the kernel's own threads share it. Write TENERAL_TASKS_MAX=936 (or less)"),
            ),
            (quota(Some(G), None), ceilings(None, at(100)), Some("TENERAL_TASKS_MAX=infinity")),
        ];
        for (quota, ceilings, want) in table {
            let got = check(&quota, &ceilings).err().map(|e| e.to_string());
            match (want, &got) {
                (None, None) => {}
                (Some(want), Some(got)) => assert!(got.contains(want), "{quota:?}: {got}"),
                _ => panic!("{quota:?} under {ceilings:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn sizes_are_written_as_env_takes_them() {
        let table = [(3 * G, "3G"), (2688 * M, "2688M"), (1 << 40, "1T"), (1000, "1000"), (0, "0")];
        for (n, want) in table {
            assert_eq!(size(n), want);
        }
        assert_eq!(floor_mib(3 * M + 5), 3 * M);
    }

    /// Planted cgroup files: the lowest limit of the cgroup and its
    /// ancestors counts, "max" and v1's no-limit count as none, and a
    /// directory without `cgroup.procs` ends the walk.
    #[test]
    fn the_lowest_limit_of_the_cgroup_and_its_ancestors_is_read() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let plant = |dir: &Path, files: &[(&str, &str)]| -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            std::fs::write(dir.join("cgroup.procs"), "")?;
            for (name, text) in files {
                std::fs::write(dir.join(name), text)?;
            }
            Ok(())
        };
        // Above the hierarchy's root, a limit that must not count.
        std::fs::write(root.path().join("memory.max"), "1\n")?;
        let top = root.path().join("unified");
        let pod = top.join("kubepods/pod1");
        let own = pod.join("ctr");
        plant(&top, &[("pids.max", "max\n")])?;
        plant(&top.join("kubepods"), &[("memory.max", "8589934592\n"), ("pids.max", "4096\n")])?;
        plant(&pod, &[("memory.max", "3221225472\n"), ("pids.max", "max\n")])?;
        plant(&own, &[("memory.max", "max\n"), ("pids.max", "max\n")])?;
        let got = read(Some(&own), None, None);
        assert_eq!(got.memory, Some(Ceiling { limit: 3 * G, file: pod.join("memory.max") }));
        assert_eq!(got.tasks, Some(Ceiling { limit: 4096, file: top.join("kubepods/pids.max") }));

        let memory = root.path().join("memory/libpod-1");
        plant(&root.path().join("memory"), &[("memory.limit_in_bytes", "9223372036854771712\n")])?;
        plant(&memory, &[("memory.limit_in_bytes", "2147483648\n")])?;
        let pids = root.path().join("pids/libpod-1");
        plant(&root.path().join("pids"), &[])?;
        plant(&pids, &[("pids.max", "max\n")])?;
        let got = read(None, Some(&memory), Some(&pids));
        assert_eq!(got.memory.map(|c| c.limit), Some(2 * G));
        assert_eq!(got.tasks, None);

        plant(&memory, &[("memory.limit_in_bytes", "9223372036854771712\n")])?;
        assert_eq!(read(None, Some(&memory), Some(&pids)), Ceilings::default());
        Ok(())
    }
}
