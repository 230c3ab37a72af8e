//! The kernel's side of the cage: what it decides before anything is
//! confined. Which plan a profile gets ([`plan`]), from which paths of the
//! machine ([`host`]), as whom ([`identity`]), and whether the cage is on at
//! all ([`decide`]); [`Cage::wrap`] turns a launch into one of the helper
//! with that plan. The helper, the cage's first process and the zygote, which
//! carry the plan out, are the cage crate's (`teneral_cage`).
//!
//! Invariants:
//! - Policy is pure ([`plan`]): which path gets which rights is decided by
//!   functions over paths, tested by tables; the helper only applies it.
//! - A body is started unconfined only when the owner wrote
//!   `TENERAL_UNSAFE_UNCONFINED=1`, and then every start says so
//!   ([`decide`]). Without it, a Linux lacking a feature is a refusal naming
//!   the feature.
//!
//! The reasons are in docs/design.md ("The cage") and the table of what each
//! profile may touch in docs/cage.md.

pub mod host;
pub mod identity;
pub mod plan;
pub mod sources;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use teneral_cage::identity::Identity;
use teneral_cage::plan::Rlimits;

use crate::spawn::Spec;

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

    /// Starts the cage's zygote (`teneral-confine zygote`, see
    /// [`teneral_cage::zygote`]) and has [`crate::spawn::spawn`] send every
    /// launch [`Cage::wrap`] makes through it. `Ok(false)` when there is
    /// nothing to start: the cage is off, or the lean helper is not beside
    /// the kernel. Call it from the thread that spawns (the zygote dies with
    /// it), after the reaper started. Under the systemd runner a scope unit
    /// adopts what it forks (`runner::systemd::Scope`).
    pub fn start_zygote(&self) -> io::Result<bool> {
        let Cage::On { exe, .. } = self else { return Ok(false) };
        let helper = host::helper_program(exe);
        if helper == *exe {
            return Ok(false);
        }
        let zygote = crate::spawn::start_zygote(&helper, teneral_cage::SOURCE_ID)?;
        crate::spawn::use_zygote(zygote);
        Ok(true)
    }

    /// `spec` made to run inside `profile`: the helper with the plan on its
    /// command line, then the program. With the cage off the program runs as
    /// it is; a body's places are still made, and the log says it runs
    /// unconfined (`name` names it).
    /// `limits` are the resource limits the program gets inside (those a
    /// runner without cgroups applies, see [`Rlimits`]). When the
    /// kernel is root, the program runs as the identity of `individual`
    /// (the directory of the individual it serves), recorded machine-wide
    /// ([`identity::of`]); with none, as nobody.
    pub fn wrap(
        &self,
        name: &str,
        profile: &Profile,
        spec: Spec,
        limits: Rlimits,
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
                    teneral_core::log::info(format!(
                        "UNSAFE: {name} runs unconfined (TENERAL_UNSAFE_UNCONFINED=1 in .env): \
                         it can read your keys and change every file you can"
                    ));
                }
                if matches!(profile, Profile::Generation { .. }) {
                    teneral_core::log::info(format!(
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
    let missing = teneral_cage::missing(pretend_missing);
    if missing.is_empty() {
        Ok(Mode::Confined)
    } else {
        Err(CageError::Missing(missing))
    }
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
    /// socket's), see [`teneral_cage::plan::Plan::socket_dirs`].
    pub socket_dirs: Vec<PathBuf>,
    /// Test knob (`TENERAL_TEST_PRETEND_MISSING`): features the helper must
    /// treat as missing.
    pub pretend_missing: Vec<String>,
    /// The `teneral` program that is the helper; the running one when
    /// `None` (a caller that is not `teneral`, such as a test, names it).
    pub exe: Option<PathBuf>,
    /// The resource limits of the program inside.
    pub limits: Rlimits,
    /// Who the program is when the kernel is root; `None` is nobody.
    pub identity: Option<Identity>,
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
