//! The cage: the one place that turns a process into a confined one.
//!
//! The kernel never confines itself. It starts `teneral confine` (the
//! helper, [`helper::main`]) with a [`plan::Plan`] on its command line; the
//! freshly executed helper, single-threaded, applies in order: closing
//! every descriptor the plan does not name, namespaces
//! (a private mount namespace for the generation's read-only journal, a
//! network namespace with only loopback and the forwarded ports), the Landlock
//! ruleset, dropping every capability, no_new_privs, the resource limits
//! the plan names, the seccomp profile
//! (`seccomp/teneral.json`), and then executes the program. Each step that
//! fails ends the helper with its own status ([`EXIT_NAMESPACES`] ...), so
//! the kernel can say which one it was ([`describe_exit`]).
//!
//! Invariants:
//! - A step short of fully enforced is a failure, never a warning: Landlock
//!   is asked for with `HardRequirement`, and the helper executes nothing
//!   unless every step succeeded.
//! - Policy is pure ([`plan`]): which path gets which rights is decided by
//!   functions over paths, tested by tables; the helper only applies it.
//! - A body is started unconfined only when the owner wrote
//!   `TENERAL_UNSAFE_UNCONFINED=1`, and then every start says so
//!   ([`decide`]). Without it, a Linux lacking a feature is a refusal naming
//!   the feature.
//!
//! The reasons are in docs/design.md ("The cage") and the table of what each
//! profile may touch in docs/cage.md.

mod filter;
mod helper;
pub mod host;
pub mod identity;
mod init;
mod namespaces;
pub mod plan;
mod relay;
mod root;
mod ruleset;
pub mod sources;
pub mod steps;
mod sys;
pub mod zygote;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use crate::spawn::Spec;

pub use filter::PROFILE_JSON;
pub use helper::main as helper_main;
pub use zygote::main as zygote_main;

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

/// The environment variable that names the `cgroup.procs` files a launch
/// of the helper enters before anything else (the kernel's side of the
/// zygote defines it, since it moves a spare's helper into them).
pub use crate::spawn::zygote::CGROUP_PROCS;

/// The user and group (`nobody`) a root kernel's cage runs as when its
/// launch names no individual; an individual's cages run as its own
/// identity ([`identity`]).
pub const BODY_ID: u32 = 65534;

/// The Landlock ABI the cage needs: 3 for truncation rights, 6 for keeping
/// signals and abstract sockets inside the cage.
pub const LANDLOCK_ABI: i32 = 6;

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

/// What a confined process is, as the gate and the generation name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// The body of a generation of the individual at `home`, in a network
    /// namespace of its own; `forward` are the kernel's loopback ports
    /// relayed in (the model proxy, the egress proxy).
    Generation { home: PathBuf, forward: Vec<u16> },
    /// One check of a mutation in a fresh `checkout`; `writable` are the
    /// caches it may fill (e.g. the shared cargo target).
    Gate { checkout: PathBuf, writable: Vec<PathBuf> },
    /// The smoke run: the candidate's `checkout`, a throwaway `individual`;
    /// `forward` are the kernel's loopback ports relayed in (the stand-in).
    Smoke { checkout: PathBuf, individual: PathBuf, writable: Vec<PathBuf>, forward: Vec<u16> },
    /// An organ's check: its root read and executed, `writable` (a temp dir)
    /// written, loopback only.
    Organ { root: PathBuf, writable: Vec<PathBuf> },
    /// The stand-in model: `program` (the kernel's own) executed, `readable`
    /// (its script) read, `writable` (its request log) written, nothing
    /// else of `individual`, whose directory no system rule may cover; the
    /// host's network as it is (served on the host's loopback).
    Model { individual: PathBuf, program: PathBuf, readable: Vec<PathBuf>, writable: Vec<PathBuf> },
    /// Packing a mutation's objects from the agent's workspace: `source`
    /// (the clone) read, `out` written, loopback only.
    Pack { source: PathBuf, out: PathBuf },
    /// Unpacking an organ's archive (it comes on stdin): `program` (the
    /// kernel's own) executed, `staging` written, nothing else of
    /// `individual`, whose directory no system rule may cover; loopback only.
    Unpack { individual: PathBuf, program: PathBuf, staging: PathBuf },
}

/// Why the cage cannot be built here.
#[derive(Debug, thiserror::Error)]
pub enum CageError {
    #[error(
        "the cage cannot be built on this Linux, which lacks {}. Run teneral where Linux has them; \
         or, knowing that a body could then read your keys and change your files, write \
         TENERAL_UNSAFE_UNCONFINED=1 in .env to run without the cage",
        .0.join("; and ")
    )]
    Missing(Vec<String>),
}

/// Whether a process is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Confined,
    /// The owner's `TENERAL_UNSAFE_UNCONFINED=1`.
    Unconfined,
}

/// How the kernel confines what it starts, decided once when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cage {
    /// Every launch that names a profile runs inside it; `exe` is the
    /// `teneral` program that is the helper.
    On { exe: PathBuf, pretend_missing: Vec<String> },
    /// The owner's `TENERAL_UNSAFE_UNCONFINED=1`: nothing is confined.
    Off,
}

impl Cage {
    /// The cage as the owner's settings and this Linux allow: on when the
    /// Linux has everything it needs, off only when the owner said so, else
    /// a refusal naming what is missing. `exe` is the helper program.
    pub fn decide(
        unsafe_unconfined: bool,
        pretend_missing: &[String],
        exe: PathBuf,
    ) -> Result<Cage, CageError> {
        Ok(match decide(unsafe_unconfined, pretend_missing)? {
            Mode::Confined => Cage::On { exe, pretend_missing: pretend_missing.to_vec() },
            Mode::Unconfined => Cage::Off,
        })
    }

    pub fn is_on(&self) -> bool {
        matches!(self, Cage::On { .. })
    }

    /// Starts the cage's zygote (`teneral-confine zygote`, see [`zygote`])
    /// and has [`crate::spawn::spawn`] send every launch [`Cage::wrap`]
    /// makes through it. `Ok(false)` when there is nothing to start: the
    /// cage is off, or the lean helper is not beside the kernel. Call it
    /// from the thread that spawns (the zygote dies with it), after the
    /// reaper started. Launches under the systemd runner do not go through
    /// it (systemd starts them).
    pub fn start_zygote(&self) -> io::Result<bool> {
        let Cage::On { exe, .. } = self else { return Ok(false) };
        let helper = host::helper_program(exe);
        if helper == *exe {
            return Ok(false);
        }
        let zygote = crate::spawn::zygote::Zygote::start(&helper, host::SOURCE_ID, zygote::fits)?;
        crate::spawn::use_zygote(zygote);
        Ok(true)
    }

    /// `spec` made to run inside `profile`: the helper with the plan on its
    /// command line, then the program. With the cage off the program runs as
    /// it is; a body's places are still made, and the log says it runs
    /// unconfined (`name` names it).
    /// `limits` are the resource limits the program gets inside (those a
    /// runner without cgroups applies, see [`plan::Rlimits`]). When the
    /// kernel is root, the program runs as the identity of `individual`
    /// (the directory of the individual it serves), recorded machine-wide
    /// ([`identity::of`]); with none, as nobody.
    pub fn wrap(
        &self,
        name: &str,
        profile: &Profile,
        spec: Spec,
        limits: plan::Rlimits,
        individual: Option<&std::path::Path>,
    ) -> io::Result<Spec> {
        match self {
            Cage::On { exe, pretend_missing } => {
                let identity = match individual {
                    Some(home) if rustix::process::getuid().is_root() => {
                        Some(identity::of(home).map_err(io::Error::other)?)
                    }
                    _ => None,
                };
                let options = Options {
                    forward: Vec::new(),
                    socket_dirs: Vec::new(),
                    pretend_missing: pretend_missing.clone(),
                    exe: Some(exe.clone()),
                    limits,
                    identity,
                };
                wrap(profile, &options, spec)
            }
            Cage::Off => {
                let body = match profile {
                    Profile::Generation { home, .. } => Some(home),
                    Profile::Smoke { individual, .. } => Some(individual),
                    Profile::Gate { .. }
                    | Profile::Organ { .. }
                    | Profile::Model { .. }
                    | Profile::Pack { .. }
                    | Profile::Unpack { .. } => None,
                };
                if let Some(home) = body {
                    host::prepare_generation(home)?;
                    crate::log::info(format!(
                        "UNSAFE: {name} runs unconfined (TENERAL_UNSAFE_UNCONFINED=1 in .env): \
                         it can read your keys and change every file you can"
                    ));
                }
                if matches!(profile, Profile::Generation { .. }) {
                    crate::log::info(format!(
                        "UNSAFE: egress is not enforced for {name}: it has the host's network, \
                         every service on its loopback included, and TENERAL_EGRESS is not applied"
                    ));
                }
                Ok(spec)
            }
        }
    }
}

/// `spec` made to run confined by `profile`: its program and arguments
/// become the helper's, the rest (directory, environment, output) stays.
/// The directory of the event socket named in `TENERAL_EVENTS`, if any,
/// joins the plan's socket directories.
pub fn wrap(profile: &Profile, options: &Options, spec: Spec) -> io::Result<Spec> {
    let mut options = options.clone();
    let events = spec.env.iter().find(|(k, _)| k == "TENERAL_EVENTS");
    if let Some(dir) = events.and_then(|(_, v)| std::path::Path::new(v).parent()) {
        options.socket_dirs.push(dir.to_owned());
    }
    let options = &options;
    let mut argv = Vec::with_capacity(spec.args.len() + 1);
    argv.push(spec.program.clone().into_os_string());
    argv.extend(spec.args.iter().cloned());
    let mut wrapped = wrap_with(profile, options, argv)?.into_iter();
    let program = wrapped.next().ok_or_else(|| io::Error::other("the cage made no program"))?;
    Ok(Spec { program: program.into(), args: wrapped.collect(), ..spec })
}

/// Decides how to start a process: confined when the running Linux has
/// everything the cage needs, unconfined only when the owner said so, else
/// a refusal naming what is missing. `pretend_missing` is the test knob.
pub fn decide(unsafe_unconfined: bool, pretend_missing: &[String]) -> Result<Mode, CageError> {
    if unsafe_unconfined {
        return Ok(Mode::Unconfined);
    }
    let missing = missing(pretend_missing);
    if missing.is_empty() {
        Ok(Mode::Confined)
    } else {
        Err(CageError::Missing(missing))
    }
}

/// The features of the running Linux the cage needs and does not find.
pub fn missing(pretend: &[String]) -> Vec<String> {
    let pretends = |f: &str| pretend.iter().any(|p| p == f);
    let mut missing = Vec::new();
    let abi = if pretends("landlock") { 0 } else { crate::sys::landlock_abi() };
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

/// What else [`wrap_with`] may be asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Loopback ports of the kernel's to reach from inside a loopback-only
    /// profile at the same address, e.g. the stand-in model of the smoke
    /// run: `127.0.0.1:<port>` inside is relayed to `127.0.0.1:<port>`
    /// outside, and nothing else is.
    pub forward: Vec<u16>,
    /// Directories of Unix sockets to connect to from inside (the event
    /// socket's), see [`plan::Plan::socket_dirs`].
    pub socket_dirs: Vec<PathBuf>,
    /// Test knob (`TENERAL_TEST_PRETEND_MISSING`): features the helper must
    /// treat as missing.
    pub pretend_missing: Vec<String>,
    /// The `teneral` program that is the helper; the running one when
    /// `None` (a caller that is not `teneral`, such as a test, names it).
    pub exe: Option<PathBuf>,
    /// The resource limits of the program inside.
    pub limits: plan::Rlimits,
    /// Who the program is when the kernel is root; `None` is nobody.
    pub identity: Option<identity::Identity>,
}

/// The argv that runs `argv` confined by `profile`:
/// `[teneral, "confine", ..., "--", argv...]` (tests and benchmarks use it
/// to run the helper themselves; the kernel goes through [`Cage::wrap`]).
pub fn wrap_with(
    profile: &Profile,
    options: &Options,
    argv: Vec<OsString>,
) -> io::Result<Vec<OsString>> {
    let exe = match &options.exe {
        Some(exe) => host::helper_program(exe),
        None => host::helper_program(&host::exe()?),
    };
    let exe = exe.as_path();
    let forwards = !options.forward.is_empty()
        || matches!(profile, Profile::Smoke { forward, .. } | Profile::Generation { forward, .. } if !forward.is_empty());
    if forwards && matches!(profile, Profile::Model { .. }) {
        return Err(io::Error::other(
            "the model's profile keeps the host's network and forwards no port",
        ));
    }
    let mut plan = match profile {
        Profile::Generation { home, .. } => {
            host::prepare_generation(home)?;
            let tracked = host::tracked_names(home)?;
            let mut plan = plan::generation(home, &tracked, &host::host(&[home]));
            // A tracked name deleted from the checkout has nothing to hold.
            plan.rules.retain(|r| r.path.exists());
            plan
        }
        Profile::Gate { checkout, writable } => {
            must_exist(std::iter::once(checkout).chain(writable))?;
            let granted: Vec<&std::path::Path> =
                std::iter::once(checkout).chain(writable).map(PathBuf::as_path).collect();
            plan::gate(checkout, writable, &host::host(&granted))
        }
        Profile::Organ { root, writable } => {
            must_exist(std::iter::once(root).chain(writable))?;
            let granted: Vec<&std::path::Path> =
                std::iter::once(root).chain(writable).map(PathBuf::as_path).collect();
            plan::organ(root, writable, &host::host(&granted))
        }
        Profile::Model { individual, program, readable, writable } => {
            must_exist(std::iter::once(program).chain(readable).chain(writable))?;
            let granted: Vec<&std::path::Path> = std::iter::once(individual)
                .chain(readable)
                .chain(writable)
                .map(PathBuf::as_path)
                .collect();
            plan::model(program, readable, writable, &host::host(&granted))
        }
        Profile::Smoke { checkout, individual, writable, .. } => {
            must_exist([checkout, individual].into_iter().chain(writable))?;
            let granted: Vec<&std::path::Path> =
                [checkout, individual].into_iter().chain(writable).map(PathBuf::as_path).collect();
            plan::smoke(checkout, individual, writable, &host::host(&granted))
        }
        Profile::Pack { source, out } => {
            must_exist([source, out])?;
            plan::pack(source, out, &host::host(&[source, out]))
        }
        Profile::Unpack { individual, program, staging } => {
            must_exist([program, staging])?;
            plan::unpack(program, staging, &host::host(&[individual, staging]))
        }
    };
    // Every profile but the model's is loopback-only; what the kernel offers
    // inside is exactly the forwarded ports.
    plan.forward = options.forward.clone();
    if let Profile::Smoke { forward, .. } | Profile::Generation { forward, .. } = profile {
        plan.forward.extend(forward);
    }
    plan.socket_dirs = options.socket_dirs.clone();
    plan.pretend_missing = options.pretend_missing.clone();
    plan.limits = options.limits;
    plan.identity = options.identity;
    Ok(host::helper_argv(exe, plan.to_args(), argv))
}

fn must_exist<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> io::Result<()> {
    for path in paths {
        if !path.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} does not exist; the cage can only grant what is there", path.display()),
            ));
        }
    }
    Ok(())
}
