//! What one confined process may touch, as plain data: the rules of a
//! profile, built by pure functions from paths, and their round trip through
//! the helper's command line.
//!
//! Invariants: a plan is an allowlist (Landlock grants rights beneath a path;
//! nothing outside every rule is reachable), so a secret is kept out by never
//! naming it or a directory above it. The individual's root is granted only
//! as a listing ([`Access::List`]): in the cage's new root it holds nothing
//! but its parts granted one by one.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

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
}

/// Paths of the machine every profile reads or executes, before filtering
/// out those that do not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// Toolchains and system programs: read and execute.
    pub exec: Vec<PathBuf>,
    /// System configuration and kernel views: read.
    pub read: Vec<PathBuf>,
    /// Devices to read and write.
    pub devices: Vec<PathBuf>,
}

/// The parts of an individual a generation's body gets, and how; a network
/// namespace with only loopback, into which the kernel forwards the model's
/// and the egress proxy's ports.
///
/// `tracked` are the top-level names of the install (the checkout's tracked
/// files); those that are the individual's own or secret are left out here
/// whatever git says.
pub fn generation(home: &Path, tracked: &[String], host: &Host) -> Plan {
    const NEVER: &[&str] = &[".env", ".teneral", "memory", "soul", "inbox", "BACKLOG.md"];
    let mut rules = system(host);
    let at = |rel: &str, access| Rule { path: home.join(rel), access };
    for name in tracked {
        if !NEVER.contains(&name.as_str()) && !name.starts_with(".env") {
            rules.push(at(name, Access::Read));
        }
    }
    rules.extend([
        at(".git", Access::Read),
        at(".teneral/live", Access::Exec),
        at(".teneral/bin", Access::Exec),
        at(".teneral/candidate", Access::Write),
        at(".teneral/tmp", Access::Write),
        at("soul", Access::Write),
        at("inbox", Access::Write),
        at("memory", Access::Write),
        // Read only: the backlog changes through the workspace and a
        // mutation, like the body; the owner's checkout stays as committed.
        at("BACKLOG.md", Access::Read),
        // Listed, as it holds only the grants above in the cage's new root
        // (no `.env`, no `.teneral/auth`): the body's first `ls` works.
        Rule { path: home.to_owned(), access: Access::List },
        at(".teneral/owner", Access::Consume),
    ]);
    Plan {
        profile: "generation".into(),
        rules,
        readonly: vec![home.join(crate::journal::JOURNAL_PATH)],
        // Its network goes through the kernel: the model and the egress
        // proxy are forwarded in (`Profile::Generation`'s ports).
        net: Net::Loopback,
        socket_dirs: Vec::new(),
        forward: Vec::new(),
        pretend_missing: Vec::new(),
    }
}

/// A check of a mutation: its checkout and the caches it is given, nothing
/// of any individual, loopback only.
pub fn gate(checkout: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    let mut rules = system(host);
    rules.push(Rule { path: checkout.to_owned(), access: Access::Write });
    rules.extend(writable.iter().map(|p| Rule { path: p.clone(), access: Access::Write }));
    Plan {
        profile: "gate".into(),
        rules,
        readonly: Vec::new(),
        net: Net::Loopback,
        socket_dirs: Vec::new(),
        forward: Vec::new(),
        pretend_missing: Vec::new(),
    }
}

/// An organ's check: the organ's root to read and execute (the unpacked
/// tree is shared by every generation that pins it and stays as unpacked),
/// the places given to write (a temp dir), nothing of any individual,
/// loopback only.
pub fn organ(root: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    let mut rules = system(host);
    rules.push(Rule { path: root.to_owned(), access: Access::Exec });
    rules.extend(writable.iter().map(|p| Rule { path: p.clone(), access: Access::Write }));
    Plan {
        profile: "organ".into(),
        rules,
        readonly: Vec::new(),
        net: Net::Loopback,
        socket_dirs: Vec::new(),
        forward: Vec::new(),
        pretend_missing: Vec::new(),
    }
}

/// The smoke run: the candidate's checkout, a throwaway individual and the
/// caches given, loopback only (the stand-in model is forwarded in, see
/// `confine::Options::forward`).
pub fn smoke(checkout: &Path, individual: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    let mut plan = gate(checkout, writable, host);
    plan.profile = "smoke".into();
    plan.rules.push(Rule { path: individual.to_owned(), access: Access::Write });
    plan
}

/// The stand-in model: the kernel's own program to execute, the files given
/// to read (its script) and to write (its request log), nothing else of any
/// individual; the host's network as it is, since the kernel and the bodies
/// reach it on the host's loopback.
pub fn model(program: &Path, readable: &[PathBuf], writable: &[PathBuf], host: &Host) -> Plan {
    let mut rules = system(host);
    rules.push(Rule { path: program.to_owned(), access: Access::Exec });
    rules.extend(readable.iter().map(|p| Rule { path: p.clone(), access: Access::Read }));
    rules.extend(writable.iter().map(|p| Rule { path: p.clone(), access: Access::Write }));
    Plan {
        profile: "model".into(),
        rules,
        readonly: Vec::new(),
        net: Net::Open,
        socket_dirs: Vec::new(),
        forward: Vec::new(),
        pretend_missing: Vec::new(),
    }
}

/// Packing a mutation's objects: the agent's clone `source` to read (and
/// nothing it links to elsewhere), `out` to write the pack in, loopback only.
pub fn pack(source: &Path, out: &Path, host: &Host) -> Plan {
    let mut rules = system(host);
    rules.push(Rule { path: source.to_owned(), access: Access::Read });
    rules.push(Rule { path: out.to_owned(), access: Access::Write });
    Plan {
        profile: "pack".into(),
        rules,
        readonly: Vec::new(),
        net: Net::Loopback,
        socket_dirs: Vec::new(),
        forward: Vec::new(),
        pretend_missing: Vec::new(),
    }
}

fn system(host: &Host) -> Vec<Rule> {
    let rule = |access| move |p: &PathBuf| Rule { path: p.clone(), access };
    let mut rules: Vec<Rule> = host.exec.iter().map(rule(Access::Exec)).collect();
    rules.extend(host.read.iter().map(rule(Access::Read)));
    rules.extend(host.devices.iter().map(rule(Access::ReadWrite)));
    rules
}

impl Plan {
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
        args
    }

    /// Reads what [`Plan::to_args`] wrote, followed by `--` and the program
    /// with its arguments. Returns the plan and the program's argv.
    pub fn from_args(args: &[OsString]) -> Result<(Plan, Vec<OsString>), String> {
        let mut plan = Plan {
            profile: String::new(),
            rules: Vec::new(),
            readonly: Vec::new(),
            net: Net::Open,
            socket_dirs: Vec::new(),
            forward: Vec::new(),
            pretend_missing: Vec::new(),
        };
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
            } else {
                return Err(format!("unknown argument {:?}", flag.to_string_lossy()));
            }
        }
        Err("no `--` before the program".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        Host {
            exec: vec!["/usr".into(), "/root/.cargo".into()],
            read: vec!["/etc".into()],
            devices: vec!["/dev/null".into()],
        }
    }

    fn access_of(plan: &Plan, path: &str) -> Vec<Access> {
        plan.rules.iter().filter(|r| r.path == Path::new(path)).map(|r| r.access).collect()
    }

    #[test]
    fn generation_grants_each_part_as_the_design_table_says() {
        let tracked: Vec<String> =
            ["body", "src", "Cargo.toml", "BACKLOG.md", ".env", ".env.local", "memory", ".teneral"]
                .map(String::from)
                .to_vec();
        let plan = generation(Path::new("/i"), &tracked, &host());
        let table = [
            ("/i/body", vec![Access::Read]),
            ("/i/src", vec![Access::Read]),
            ("/i/Cargo.toml", vec![Access::Read]),
            ("/i/.git", vec![Access::Read]),
            ("/i/.teneral/live", vec![Access::Exec]),
            ("/i/.teneral/candidate", vec![Access::Write]),
            ("/i/soul", vec![Access::Write]),
            ("/i/inbox", vec![Access::Write]),
            ("/i/memory", vec![Access::Write]),
            ("/i/BACKLOG.md", vec![Access::Read]),
            ("/i/.teneral/owner", vec![Access::Consume]),
            ("/i/.env", vec![]),
            ("/i/.env.local", vec![]),
            ("/i/.teneral", vec![]),
            ("/i/.teneral/auth", vec![]),
            ("/i/.teneral/state.json", vec![]),
            ("/i", vec![Access::List]),
            ("/usr", vec![Access::Exec]),
            ("/dev/null", vec![Access::ReadWrite]),
        ];
        for (path, want) in table {
            assert_eq!(access_of(&plan, path), want, "{path}");
        }
        assert_eq!(plan.readonly, vec![PathBuf::from("/i/memory/journal.jsonl")]);
        assert_eq!(plan.net, Net::Loopback);
    }

    #[test]
    fn gate_and_smoke_get_nothing_of_the_individual_and_only_loopback() {
        let plan = gate(Path::new("/c"), &["/cache".into()], &host());
        assert_eq!(access_of(&plan, "/c"), vec![Access::Write]);
        assert_eq!(access_of(&plan, "/cache"), vec![Access::Write]);
        assert_eq!(plan.net, Net::Loopback);
        assert!(plan.rules.iter().all(|r| !r.path.starts_with("/i")));
        let plan = smoke(Path::new("/c"), Path::new("/t"), &[], &host());
        assert_eq!(plan.profile, "smoke");
        assert_eq!(access_of(&plan, "/t"), vec![Access::Write]);
        assert_eq!(plan.net, Net::Loopback);
    }

    #[test]
    fn the_model_gets_its_program_script_and_log_and_nothing_else_of_the_individual() {
        let plan = model(
            Path::new("/k/teneral"),
            &["/i/script.jsonl".into()],
            &["/i/standin.jsonl".into()],
            &host(),
        );
        let table = [
            ("/k/teneral", vec![Access::Exec]),
            ("/i/script.jsonl", vec![Access::Read]),
            ("/i/standin.jsonl", vec![Access::Write]),
            ("/i", vec![]),
            ("/i/.env", vec![]),
            ("/i/memory", vec![]),
            ("/i/soul", vec![]),
            ("/i/.teneral", vec![]),
            ("/i/.teneral/state.json", vec![]),
            ("/usr", vec![Access::Exec]),
            ("/etc", vec![Access::Read]),
            ("/dev/null", vec![Access::ReadWrite]),
        ];
        for (path, want) in table {
            assert_eq!(access_of(&plan, path), want, "{path}");
        }
        let individual: Vec<&Rule> =
            plan.rules.iter().filter(|r| r.path.starts_with("/i")).collect();
        assert_eq!(individual.len(), 2, "only the script and the log: {individual:?}");
        assert_eq!(plan.profile, "model");
        assert_eq!(
            plan.net,
            Net::Open,
            "the kernel and the bodies reach it on the host's loopback"
        );
        assert!(plan.readonly.is_empty());
        let bare = model(Path::new("/k/teneral"), &[], &[], &host());
        assert!(bare.rules.iter().all(|r| !r.path.starts_with("/i")));
        let mut args = plan.to_args();
        args.extend(["--".into(), "/k/teneral".into(), "standin".into()]);
        assert_eq!(Plan::from_args(&args).map(|(p, _)| p), Ok(plan));
    }

    #[test]
    fn pack_reads_the_clone_writes_only_its_output_and_has_loopback() {
        let plan = pack(Path::new("/i/.teneral/candidate"), Path::new("/i/.teneral/f"), &host());
        assert_eq!(access_of(&plan, "/i/.teneral/candidate"), vec![Access::Read]);
        assert_eq!(access_of(&plan, "/i/.teneral/f"), vec![Access::Write]);
        assert_eq!(access_of(&plan, "/i/.git"), vec![]);
        assert_eq!(access_of(&plan, "/i"), vec![]);
        assert_eq!(plan.net, Net::Loopback);
    }

    #[test]
    fn a_plan_survives_the_command_line() {
        let mut plan = generation(Path::new("/i"), &["src".into()], &host());
        plan.pretend_missing.push("landlock".into());
        plan.forward.push(8080);
        let mut args = plan.to_args();
        args.extend(["--".into(), "/bin/true".into(), "x".into()]);
        let (back, argv) = Plan::from_args(&args).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(back, plan);
        assert_eq!(argv, vec![OsString::from("/bin/true"), OsString::from("x")]);
        let gate = gate(Path::new("/c"), &[], &host());
        let mut args = gate.to_args();
        args.extend(["--".into(), "true".into()]);
        assert_eq!(Plan::from_args(&args).map(|(p, _)| p), Ok(gate));
    }

    #[test]
    fn malformed_command_lines_are_refused() {
        let bad: &[&[&str]] = &[
            &["--profile", "gate", "--write", "/c"],
            &["--profile", "gate", "--"],
            &["--write", "/c", "--", "true"],
            &["--profile", "gate", "--net", "wide", "--", "true"],
            &["--profile", "gate", "--bogus", "x", "--", "true"],
            &["--profile"],
        ];
        for args in bad {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            assert!(Plan::from_args(&args).is_err(), "{args:?}");
        }
    }
}
