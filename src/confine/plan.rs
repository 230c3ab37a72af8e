//! Which plan each profile gets: the rules of a profile, built by pure
//! functions from paths (the plan itself and its encoding are the cage's,
//! `teneral_cage::plan`).
//!
//! Invariants: a plan is an allowlist (Landlock grants rights beneath a path;
//! nothing outside every rule is reachable), so a secret is kept out by never
//! naming it or a directory above it. The individual's root is granted only
//! as a listing ([`Access::List`]): in the cage's new root it holds nothing
//! but its parts granted one by one.

use std::path::{Path, PathBuf};

use teneral_cage::plan::{Access, Net, Plan, Rule};

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
    const NEVER: &[&str] = &[
        ".env",
        ".teneral",
        "memory",
        "soul",
        "inbox",
        "BACKLOG.md",
        teneral_core::evals::EVALS_DIR,
    ];
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
    // Its network goes through the kernel: the model and the egress proxy
    // are forwarded in (`Profile::Generation`'s ports).
    let mut plan = Plan::empty("generation", Net::Loopback);
    plan.rules = rules;
    plan.readonly = vec![
        home.join(teneral_core::journal::JOURNAL_PATH),
        home.join(teneral_core::scorecard::SCORECARD_PATH),
        home.join(teneral_core::evals::RESULTS_PATH),
    ];
    plan
}

/// The profiles other than a generation's, as a table: what each grants of
/// the paths it is given, beside the system rows every profile has, and its
/// network. One row per profile; [`gate`], [`organ`], [`smoke`], [`model`],
/// [`pack`] and [`unpack`] read it through [`of`].
const PROFILES: &[(&str, Net)] = &[
    ("gate", Net::Loopback),
    ("smoke", Net::Loopback),
    ("organ", Net::Loopback),
    ("pack", Net::Loopback),
    ("unpack", Net::Loopback),
    // The kernel and the bodies reach the stand-in on the host's loopback.
    ("model", Net::Open),
];

/// The plan of `profile`: the system rows, then `grants` (each path with
/// its rights), and the profile's network from [`PROFILES`].
pub fn of(profile: &str, grants: &[(&[PathBuf], Access)], host: &Host) -> Plan {
    let net = PROFILES.iter().find(|(p, _)| *p == profile).map_or(Net::Loopback, |(_, n)| *n);
    let mut plan = Plan::empty(profile, net);
    plan.rules = system(host);
    for (paths, access) in grants {
        plan.rules.extend(paths.iter().map(|p| Rule { path: p.clone(), access: *access }));
    }
    plan
}

/// A check of a mutation: its checkout and the caches it is given, nothing
/// of any individual, loopback only.
pub fn gate(checkout: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    of("gate", &[(&[checkout.to_owned()], Access::Write), (writable, Access::Write)], host)
}

/// An organ's check: the organ's root to read and execute (the unpacked
/// tree is shared by every generation that pins it and stays as unpacked),
/// the places given to write (a temp dir), nothing of any individual,
/// loopback only.
pub fn organ(root: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    of("organ", &[(&[root.to_owned()], Access::Exec), (writable, Access::Write)], host)
}

/// The smoke run: the candidate's checkout, a throwaway individual and the
/// caches given, loopback only (the stand-in model is forwarded in, see
/// `confine::Options::forward`).
pub fn smoke(checkout: &Path, individual: &Path, writable: &[PathBuf], host: &Host) -> Plan {
    let given = [checkout.to_owned()];
    of(
        "smoke",
        &[
            (&given, Access::Write),
            (writable, Access::Write),
            (&[individual.to_owned()], Access::Write),
        ],
        host,
    )
}

/// The stand-in model: the kernel's own program to execute, the files given
/// to read (its script) and to write (its request log), nothing else of any
/// individual; the host's network as it is, since the kernel and the bodies
/// reach it on the host's loopback.
pub fn model(program: &Path, readable: &[PathBuf], writable: &[PathBuf], host: &Host) -> Plan {
    let program = [program.to_owned()];
    of(
        "model",
        &[(&program, Access::Exec), (readable, Access::Read), (writable, Access::Write)],
        host,
    )
}

/// Packing a mutation's objects: the agent's clone `source` to read (and
/// nothing it links to elsewhere), `out` to write the pack in, loopback only.
pub fn pack(source: &Path, out: &Path, host: &Host) -> Plan {
    of("pack", &[(&[source.to_owned()], Access::Read), (&[out.to_owned()], Access::Write)], host)
}

/// Unpacking an organ's archive: the kernel's own `program` to execute,
/// `staging` (the empty directory the tree is unpacked into) to write, and
/// nothing else of any individual; the archive comes on stdin, never by
/// path. Loopback only.
pub fn unpack(program: &Path, staging: &Path, host: &Host) -> Plan {
    of(
        "unpack",
        &[(&[program.to_owned()], Access::Exec), (&[staging.to_owned()], Access::Write)],
        host,
    )
}

fn system(host: &Host) -> Vec<Rule> {
    let rule = |access| move |p: &PathBuf| Rule { path: p.clone(), access };
    let mut rules: Vec<Rule> = host.exec.iter().map(rule(Access::Exec)).collect();
    rules.extend(host.read.iter().map(rule(Access::Read)));
    rules.extend(host.devices.iter().map(rule(Access::ReadWrite)));
    rules
}

#[cfg(test)]
mod tests;
