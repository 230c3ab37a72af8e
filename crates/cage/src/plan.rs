//! What one confined process may touch, as plain data: the plan the kernel
//! hands the helper, and its round trip through the helper's command line.
//! The kernel builds a profile's plan (its `confine::plan`); the helper only
//! applies it.
//!
//! Invariants: a plan is an allowlist (Landlock grants rights beneath a path;
//! nothing outside every rule is reachable), so a secret is kept out by never
//! naming it or a directory above it. The individual's root is granted only
//! as a listing ([`Access::List`]): in the cage's new root it holds nothing
//! but its parts granted one by one.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::identity::Identity;

/// Rights one rule grants beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read files, list directories.
    Read,
    /// Read and execute.
    Exec,
    /// Everything: read, write, create, remove, rename, execute.
    Write,
    /// Read, list and remove files, but create nothing (the owner channel).
    Consume,
    /// Read and write existing files; create and remove nothing (`/dev/null`).
    ReadWrite,
    /// List a directory of the new root that holds only other grants (the
    /// individual's root): it is made empty, nothing of it is mounted.
    List,
}

impl Access {
    const ALL: [(Access, &'static str); 6] = [
        (Access::Read, "--read"),
        (Access::Exec, "--exec"),
        (Access::Write, "--write"),
        (Access::Consume, "--consume"),
        (Access::ReadWrite, "--read-write"),
        (Access::List, "--list"),
    ];

    fn flag(self) -> &'static str {
        Access::ALL.iter().find(|(a, _)| *a == self).map(|(_, f)| *f).unwrap_or("--read")
    }
}

/// One Landlock rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub path: PathBuf,
    pub access: Access,
}

/// The network a confined process sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// The host's network, as the kernel has it.
    Open,
    /// A network namespace of its own with only loopback, up.
    Loopback,
}

/// Everything the helper applies before it executes the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `generation`, `gate`, `smoke`, `organ` or `model`: for messages.
    pub profile: String,
    pub rules: Vec<Rule>,
    /// Files made read-only by a bind mount in a private mount namespace,
    /// where Landlock cannot subtract them from a writable directory.
    pub readonly: Vec<PathBuf>,
    pub net: Net,
    /// Directories of Unix sockets the process connects to (the event
    /// socket's): mounted read-only in the new root, with no Landlock rule,
    /// so their sockets can be connected to and nothing in them read.
    pub socket_dirs: Vec<PathBuf>,
    /// Loopback ports relayed from inside a loopback-only namespace to the
    /// same port of the kernel's loopback.
    pub forward: Vec<u16>,
    /// Test-only: features the helper must treat as missing.
    pub pretend_missing: Vec<String>,
    /// Descriptors beyond 0, 1 and 2 that cross into the cage; every other
    /// one the helper holds is closed before the program runs.
    pub fds: Vec<i32>,
    /// Resource limits the program's process gets before it executes.
    pub limits: Rlimits,
    /// Who the program is on the host when the kernel is root (the
    /// individual's own identity); `None` is [`Identity::NOBODY`]. A kernel
    /// that is not root keeps its own.
    pub identity: Option<Identity>,
}

/// The resource limits of a cage run without a service manager (under
/// systemd its unit's `TasksMax` and `MemoryMax` hold instead). `None` is
/// no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rlimits {
    /// `RLIMIT_NPROC`: processes and threads of the body's identity in the
    /// cage's own user namespace.
    pub tasks: Option<u64>,
    /// `RLIMIT_AS`: bytes of address space of each process.
    pub address_space: Option<u64>,
    /// The nice value the program starts at, 0 to 19 (19: background
    /// work, such as the checks the gate runs ahead). A launch the zygote
    /// forks may have been made before its plan was known, so the program's
    /// process sets it on itself; `None` keeps the helper's.
    pub nice: Option<u8>,
}

impl Plan {
    /// A plan of `profile` that grants nothing yet.
    pub fn empty(profile: &str, net: Net) -> Plan {
        Plan {
            profile: profile.into(),
            rules: Vec::new(),
            readonly: Vec::new(),
            net,
            socket_dirs: Vec::new(),
            forward: Vec::new(),
            pretend_missing: Vec::new(),
            fds: Vec::new(),
            limits: Rlimits::default(),
            identity: None,
        }
    }

    /// The helper's arguments for this plan (before `--` and the program).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--profile".into(), self.profile.clone().into()];
        for rule in &self.rules {
            args.push(rule.access.flag().into());
            args.push(rule.path.clone().into());
        }
        for path in &self.readonly {
            args.push("--readonly".into());
            args.push(path.clone().into());
        }
        if self.net == Net::Loopback {
            args.push("--net".into());
            args.push("loopback".into());
        }
        for dir in &self.socket_dirs {
            args.push("--socket-dir".into());
            args.push(dir.clone().into());
        }
        for port in &self.forward {
            args.push("--forward".into());
            args.push(port.to_string().into());
        }
        for feature in &self.pretend_missing {
            args.push("--pretend-missing".into());
            args.push(feature.into());
        }
        for fd in &self.fds {
            args.push("--keep-fd".into());
            args.push(fd.to_string().into());
        }
        for (flag, limit) in
            [("--tasks-max", self.limits.tasks), ("--address-space-max", self.limits.address_space)]
        {
            if let Some(limit) = limit {
                args.push(flag.into());
                args.push(limit.to_string().into());
            }
        }
        if let Some(nice) = self.limits.nice {
            args.push("--nice".into());
            args.push(nice.to_string().into());
        }
        if let Some(id) = self.identity {
            args.push("--identity".into());
            args.push(id.to_arg().into());
        }
        args
    }

    /// Reads what [`Plan::to_args`] wrote, followed by `--` and the program
    /// with its arguments. Returns the plan and the program's argv.
    pub fn from_args(args: &[OsString]) -> Result<(Plan, Vec<OsString>), String> {
        let mut plan = Plan::empty("", Net::Open);
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if flag == "--" {
                let argv: Vec<OsString> = it.cloned().collect();
                if argv.is_empty() {
                    return Err("no program after `--`".into());
                }
                if plan.profile.is_empty() {
                    return Err("no --profile".into());
                }
                return Ok((plan, argv));
            }
            let value =
                it.next().ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))?;
            let text = || value.to_str().map(str::to_owned).ok_or("a value that is not UTF-8");
            if let Some((access, _)) = Access::ALL.iter().find(|(_, f)| OsStr::new(f) == flag) {
                plan.rules.push(Rule { path: PathBuf::from(value), access: *access });
            } else if flag == "--profile" {
                plan.profile = text()?;
            } else if flag == "--readonly" {
                plan.readonly.push(PathBuf::from(value));
            } else if flag == "--socket-dir" {
                plan.socket_dirs.push(PathBuf::from(value));
            } else if flag == "--net" {
                plan.net = match value.to_str() {
                    Some("loopback") => Net::Loopback,
                    Some("open") => Net::Open,
                    _ => return Err("--net is loopback or open".into()),
                };
            } else if flag == "--forward" {
                let port = text()?.parse().map_err(|_| "--forward takes a port number")?;
                plan.forward.push(port);
            } else if flag == "--pretend-missing" {
                plan.pretend_missing.push(text()?);
            } else if flag == "--keep-fd" {
                let fd = text()?.parse().map_err(|_| "--keep-fd takes a descriptor number")?;
                if fd < 3 {
                    return Err("--keep-fd names a descriptor above 2 (0, 1, 2 are kept)".into());
                }
                plan.fds.push(fd);
            } else if flag == "--tasks-max" {
                plan.limits.tasks =
                    Some(text()?.parse().map_err(|_| "--tasks-max takes a number")?);
            } else if flag == "--nice" {
                let nice = text()?.parse().ok().filter(|n: &u8| *n <= 19);
                plan.limits.nice = Some(nice.ok_or("--nice takes a nice value from 0 to 19")?);
            } else if flag == "--identity" {
                let id = Identity::from_arg(&text()?);
                plan.identity = Some(id.ok_or("--identity takes UID:GID, neither of them 0")?);
            } else if flag == "--address-space-max" {
                plan.limits.address_space =
                    Some(text()?.parse().map_err(|_| "--address-space-max takes bytes")?);
            } else {
                return Err(format!("unknown argument {:?}", flag.to_string_lossy()));
            }
        }
        Err("no `--` before the program".into())
    }
}

#[cfg(test)]
mod tests;
