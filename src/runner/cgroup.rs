//! Limits without a user manager: the kernel's own children, each in a
//! cgroup of its own below the cgroup the kernel was given (a container with
//! its own cgroup namespace, a unit with `Delegate=yes`, or any cgroup the
//! kernel may write), with the memory and task limits a transient unit would
//! have had.
//!
//! Found once at the kernel's start ([`Delegated::find`]), from
//! `/proc/self/cgroup` and `/proc/self/mountinfo` ([`locate`]):
//! - cgroup v2, when the kernel's cgroup offers `memory` and `pids`: the
//!   kernel moves itself into a leaf `teneral-kernel/` (a v2 cgroup with
//!   children holds no processes), enables both controllers below its cgroup
//!   and puts each child in a sibling leaf (`memory.max`, `memory.swap.max`
//!   0, `memory.oom.group` 1, `pids.max`);
//! - cgroup v1 (the `memory` and `pids` hierarchies, as on hosts with the
//!   hybrid layout): a cgroup of the child's name below the kernel's in each
//!   (`memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes` where swap
//!   is counted, `pids.max`).
//!
//! A child enters its cgroups before it runs anything: it is started as
//! `/bin/sh` writing its own pid to their `cgroup.procs`, then `exec`s the
//! launch. The runtime limit stays the kernel's ([`super::direct`]). When
//! the child ends, whatever is left in its cgroup is killed and the cgroup
//! removed; a memory kill is reported as systemd reports it on v2,
//! `oom-kill`.

use std::path::{Path, PathBuf};

use super::Limits;
use crate::spawn::Spec;

/// The exit status of the wrapper when it cannot enter its cgroup.
pub const CANNOT_ENTER: i32 = 125;

const ENTER: &str = "echo $$ > \"$1\" && echo $$ > \"$2\" || { echo \"teneral: cannot enter the cgroup $1\" >&2; exit 125; }; shift 2; exec \"$@\"";

/// Why there is no delegated cgroup to use.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "no cgroup v2 with memory and pids, nor cgroup v1 memory and pids hierarchies, are mounted"
    )]
    NoControllers,
    #[error("cannot write below the kernel's cgroup {dir}: {source}")]
    NotWritable { dir: PathBuf, source: std::io::Error },
    #[error(
        "other processes share the kernel's cgroup {0}, so it is not delegated to the kernel \
         (start it as a unit with Delegate=yes, or as a container's first process)"
    )]
    Shared(PathBuf),
    #[error("cannot set up {path}: {source}")]
    Setup { path: PathBuf, source: std::io::Error },
}

/// Where the kernel's cgroups are, as read from `/proc/self`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Located {
    /// The kernel's cgroup in the v2 hierarchy, when one is mounted.
    pub v2: Option<PathBuf>,
    /// Its cgroup in the v1 `memory` hierarchy.
    pub memory: Option<PathBuf>,
    /// Its cgroup in the v1 `pids` hierarchy.
    pub pids: Option<PathBuf>,
}

/// The kernel's cgroup directories, from the text of `/proc/self/cgroup`
/// and `/proc/self/mountinfo`: each mount of a hierarchy shows the part of
/// it below its root (field 4), so the directory is the mount point and the
/// cgroup's path below that root.
/// A mount stacked on another at the same point hides it: the last one
/// there counts (a container's read-only hierarchy with a writable part of
/// it bound over).
pub fn locate(proc_cgroup: &str, mountinfo: &str) -> Located {
    let mut found = Located::default();
    let mut points: [Option<String>; 3] = Default::default();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let options = right.get(2).copied().unwrap_or("");
        let (slot, own, at) = match *fstype {
            "cgroup2" => (&mut found.v2, own_path(proc_cgroup, |id, _| id == "0"), &mut points[0]),
            "cgroup" => {
                let wants = |c: &str| options.split(',').any(|o| o == c);
                let pick = |ctrl: &str| {
                    own_path(proc_cgroup, |id, ctrls| {
                        id != "0" && ctrls.split(',').any(|c| c == ctrl)
                    })
                };
                if wants("memory") {
                    (&mut found.memory, pick("memory"), &mut points[1])
                } else if wants("pids") {
                    (&mut found.pids, pick("pids"), &mut points[2])
                } else {
                    continue;
                }
            }
            _ => continue,
        };
        let Some(own) = own else { continue };
        if at.as_deref().is_some_and(|first| first != *point) {
            continue;
        }
        let below = if *root == "/" { Some(own.as_str()) } else { own.strip_prefix(root) };
        *slot = below.map(|below| Path::new(point).join(below.trim_start_matches('/')));
        *at = Some((*point).to_owned());
    }
    found
}

fn own_path(proc_cgroup: &str, which: impl Fn(&str, &str) -> bool) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        which(id, ctrls).then(|| path.to_owned())
    })
}

/// The subtree the kernel puts its children in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegated {
    /// Children are leaves of this v2 cgroup (the kernel sits in its
    /// `teneral-kernel` leaf).
    V2(PathBuf),
    /// Children get a cgroup below each of these v1 ones.
    V1 { memory: PathBuf, pids: PathBuf },
}

impl Delegated {
    /// The kernel's delegated subtree, set up for children, or why there is
    /// none.
    pub fn find() -> Result<Delegated, CgroupError> {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let found = locate(&read("/proc/self/cgroup"), &read("/proc/self/mountinfo"));
        let v2 = found.v2.filter(|dir| {
            let ctrls = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            ["memory", "pids"].iter().all(|c| ctrls.split_whitespace().any(|x| x == *c))
        });
        if let Some(dir) = v2 {
            probe(&dir)?;
            enable_v2(&dir)?;
            return Ok(Delegated::V2(dir));
        }
        match (found.memory, found.pids) {
            (Some(memory), Some(pids)) => {
                probe(&memory)?;
                probe(&pids)?;
                Ok(Delegated::V1 { memory, pids })
            }
            _ => Err(CgroupError::NoControllers),
        }
    }

    /// What the log says about it.
    pub fn describe(&self) -> String {
        match self {
            Delegated::V2(dir) => format!("cgroup v2 {}", dir.display()),
            Delegated::V1 { memory, .. } => format!("cgroup v1 {} (and pids)", memory.display()),
        }
    }

    /// Makes the cgroups of child `name` with `limits` and returns them with
    /// `spec` wrapped to enter them first.
    pub fn prepare(
        &self,
        name: &str,
        limits: &Limits,
        spec: Spec,
    ) -> Result<(Group, Spec), CgroupError> {
        let dirs = match self {
            Delegated::V2(dir) => vec![dir.join(name)],
            Delegated::V1 { memory, pids } => vec![memory.join(name), pids.join(name)],
        };
        for dir in &dirs {
            fresh_dir(dir)?;
        }
        let group = Group { dirs, v2: matches!(self, Delegated::V2(_)) };
        for (file, value) in group.settings(limits) {
            write(&file, &value)?;
        }
        let procs = |i: usize| group.dirs[i.min(group.dirs.len() - 1)].join("cgroup.procs");
        if crate::spawn::goes_through_zygote(&spec) {
            // The zygote forks the helper, which enters these before
            // anything else (teneral_cage::CGROUP_PROCS); no shell in between.
            let mut named = procs(0).into_os_string();
            if group.dirs.len() > 1 {
                named.push("\n");
                named.push(procs(1));
            }
            let spec = spec.env(teneral_cage::CGROUP_PROCS, named);
            return Ok((group, spec));
        }
        let mut wrapped = Spec::new("/bin/sh", spec.cwd.clone())
            .arg("-c")
            .arg(ENTER)
            .arg("teneral-cgroup")
            .arg(procs(0))
            .arg(procs(1))
            .arg(spec.program.as_os_str());
        wrapped.args.extend(spec.args);
        wrapped.env = spec.env;
        wrapped.stdout = spec.stdout;
        wrapped.stderr = spec.stderr;
        wrapped.stdin = spec.stdin;
        Ok((group, wrapped))
    }
}

/// The cgroups of one child.
#[derive(Debug)]
pub struct Group {
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl Group {
    /// The files to write and their values, in order, for `limits`.
    fn settings(&self, limits: &Limits) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let (mem, pids) = (&self.dirs[0], &self.dirs[self.dirs.len() - 1]);
        if let Some(max) = limits.memory_max {
            if self.v2 {
                out.push((mem.join("memory.max"), max.to_string()));
                out.push((mem.join("memory.swap.max"), "0".to_owned()));
                out.push((mem.join("memory.oom.group"), "1".to_owned()));
            } else {
                out.push((mem.join("memory.limit_in_bytes"), max.to_string()));
                if mem.join("memory.memsw.limit_in_bytes").exists() {
                    out.push((mem.join("memory.memsw.limit_in_bytes"), max.to_string()));
                }
            }
        }
        if let Some(max) = limits.tasks_max {
            out.push((pids.join("pids.max"), max.to_string()));
        }
        out
    }

    /// How many times the kernel killed in it for memory.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        let text = std::fs::read_to_string(self.dirs[0].join(file)).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix(key)?.trim().parse().ok()).unwrap_or(0)
    }

    /// Kills what is left in it and removes it; says why not, when it
    /// cannot.
    pub async fn remove(&self) -> Result<(), String> {
        for dir in &self.dirs {
            empty_and_remove(dir).await?;
        }
        Ok(())
    }
}

/// Checks that the kernel may make cgroups below `dir`.
fn probe(dir: &Path) -> Result<(), CgroupError> {
    let probe = dir.join(format!("teneral-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&probe).and_then(|()| std::fs::remove_dir(&probe));
    made.map_err(|source| CgroupError::NotWritable { dir: dir.to_owned(), source })
}

/// Moves the kernel into `dir/teneral-kernel` and enables memory and pids
/// for the children of `dir`.
fn enable_v2(dir: &Path) -> Result<(), CgroupError> {
    let me = std::process::id().to_string();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    if procs.lines().any(|pid| pid.trim() != me) {
        return Err(CgroupError::Shared(dir.to_owned()));
    }
    let leaf = dir.join("teneral-kernel");
    match std::fs::create_dir(&leaf) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(CgroupError::Setup { path: leaf, source: e });
        }
        _ => {}
    }
    write(&leaf.join("cgroup.procs"), &me)?;
    let enabled = write(&dir.join("cgroup.subtree_control"), "+memory +pids");
    if enabled.is_err() {
        // Back where it was, as if it had never tried.
        let _ = std::fs::write(dir.join("cgroup.procs"), &me);
        let _ = std::fs::remove_dir(&leaf);
    }
    enabled
}

/// Makes `dir`, after emptying and removing one a killed kernel left.
fn fresh_dir(dir: &Path) -> Result<(), CgroupError> {
    if dir.exists() {
        kill_all(dir);
        let _ = std::fs::remove_dir(dir);
    }
    std::fs::create_dir(dir).map_err(|source| CgroupError::Setup { path: dir.to_owned(), source })
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value)
        .map_err(|source| CgroupError::Setup { path: path.to_owned(), source })
}

/// SIGKILL to every process in `dir` (`cgroup.kill` where there is one).
fn kill_all(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

async fn empty_and_remove(dir: &Path) -> Result<(), String> {
    for _ in 0..100 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) => kill_all(dir),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Err(format!("cannot remove {}: processes are still in it", dir.display()))
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
