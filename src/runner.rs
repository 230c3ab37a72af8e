//! The one way the kernel starts a child: [`Runner::start`] with a
//! [`Launch`] (what to run, in which profile of the cage, with which
//! limits). Every child goes through it: a generation's body, the body's
//! build and the fetch before it, each gate check, organ checks, the smoke
//! run, the stand-in model and the toolchain probe.
//!
//! Two choices are made once, when the kernel starts ([`Runner::choose`]):
//! the backend (a systemd transient unit when a user manager is there,
//! [`systemd`]; else the kernel's own child, [`direct`]) and the cage
//! ([`Cage`]: on, or off by the owner's `TENERAL_UNSAFE_UNCONFINED=1`).
//! A launch names a profile; the runner wraps it in the cage or, with the
//! cage off, starts it as it is and says so.
//!
//! Both backends give the same [`Running`]: its output logged line by line
//! under the unit's name and the last lines kept (the message about a
//! failure quotes them), `wait` (cancel-safe), `signal` (every process of
//! it), `stop` (SIGTERM, a grace period, then SIGKILL to all of it), `pid`.
//! Under systemd a caged launch the cage's zygote forks (every check and
//! build, not a generation's body) is adopted by a transient scope unit
//! instead of started as a service ([`systemd::Scope`]).
//! Limits ([`Limits`]): under systemd `MemoryMax`, `TasksMax`,
//! `RuntimeMaxSec` are the unit's; run directly, the runtime limit is
//! kept by the kernel (with the same SIGTERM then SIGKILL), `TasksMax` and
//! `MemoryMax` become the cage's `RLIMIT_NPROC` and `RLIMIT_AS` (for
//! confined children), and [`Runner::choose`] logs which limits hold. Without a user
//! manager but with a cgroup the kernel may write below ([`cgroup`]), the
//! children are the kernel's own and `MemoryMax` and `TasksMax` are applied
//! through that cgroup.

pub mod ceiling;
pub mod cgroup;
mod direct;
mod limits;
pub mod systemd;
mod tail;

use std::time::Duration;

use rustix::process::Signal;
use tokio::net::unix::pipe;

use tail::Tails;

pub use crate::confine::{Cage, Profile};
pub use limits::Limits;

use crate::settings::RunnerChoice;
use crate::spawn::{self, Exit, Spec};
use systemd::{Systemd, SystemdError, Unit};
use teneral_core::log;
use teneral_core::state::BodyProcess;

/// One child to start: what it runs, the cage profile it runs in (`None`:
/// no cage, for what runs none of the agent's code, such as `cargo fetch`),
/// and its limits.
pub struct Launch {
    pub spec: Spec,
    pub cage: Option<Profile>,
    pub limits: Limits,
}

impl Launch {
    /// `spec` with `limits`, outside the cage.
    pub fn new(spec: Spec, limits: Limits) -> Launch {
        Launch { spec, cage: None, limits }
    }

    /// The same, inside the cage's `profile`.
    pub fn caged(self, profile: Profile) -> Launch {
        Launch { cage: Some(profile), ..self }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub exit: Exit,
    /// systemd's `Result` of the unit (`success`, `exit-code`, `signal`,
    /// `timeout`, `oom-kill`, ...); run directly: `success`, `exit-code`,
    /// `signal` or `timeout` the same way.
    pub result: String,
    /// Stopped because it ran past its runtime limit.
    pub over_time: bool,
}

impl Ended {
    pub(crate) fn lost(why: &str) -> Ended {
        Ended { exit: Exit::Code(-1), result: why.to_owned(), over_time: false }
    }

    /// Which step of the cage failed, when the exit status names one.
    pub fn cage_step(&self) -> Option<&'static str> {
        match self.exit {
            Exit::Code(code) => teneral_cage::describe_exit(code),
            Exit::Signal(_) => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {unit}: {source}")]
    Spawn { unit: String, source: std::io::Error },
    #[error(transparent)]
    Systemd(#[from] SystemdError),
    #[error(
        "TENERAL_RUNNER=systemd, but {0}; start a user manager (systemctl --user, a login \
         session, or loginctl enable-linger) or write TENERAL_RUNNER=auto"
    )]
    NeedSystemd(SystemdError),
}

/// Where children run.
#[derive(Clone)]
enum Backend {
    /// As the kernel's own children (spawn.rs).
    Direct,
    /// As transient units of the user manager.
    Systemd(Systemd),
    /// As the kernel's own children, each in a cgroup of its own below the
    /// kernel's.
    Cgroup(std::sync::Arc<cgroup::Delegated>),
}

/// How children are started, for the kernel's whole life.
#[derive(Clone)]
pub struct Runner {
    backend: Backend,
    cage: Cage,
    /// The individual whose identity confined launches take (root kernel).
    individual: Option<std::path::PathBuf>,
}

impl Runner {
    /// Chooses the backend as the owner's setting says, with `cage`, and
    /// logs the choice.
    pub async fn choose(choice: RunnerChoice, cage: Cage) -> Result<Runner, RunError> {
        if !asks_the_bus(choice) {
            log::info(
                "running children directly (TENERAL_RUNNER=direct); TasksMax and MemoryMax hold \
                 for confined children only, as RLIMIT_NPROC and RLIMIT_AS",
            );
            return Ok(Runner::direct(cage));
        }
        match Systemd::connect().await {
            Ok(systemd) => {
                log::info(
                    "running each generation and check as a transient unit of the user manager",
                );
                Ok(Runner { backend: Backend::Systemd(systemd), cage, individual: None })
            }
            Err(e) if choice == RunnerChoice::Systemd => Err(RunError::NeedSystemd(e)),
            Err(e) => match cgroup::Delegated::find() {
                Ok(delegated) => {
                    log::info(format!(
                        "{e}: running children directly; MemoryMax and TasksMax are applied \
                         through {} (the runtime limit by the kernel)",
                        delegated.describe()
                    ));
                    Ok(Runner::cgroup(delegated, cage))
                }
                Err(why) => {
                    log::info(format!(
                        "{e}: running children directly; MemoryMax and TasksMax cannot be \
                         applied as cgroup limits ({why}): confined children get them as \
                         RLIMIT_AS and RLIMIT_NPROC, and a runtime limit is kept by the kernel"
                    ));
                    Ok(Runner::direct(cage))
                }
            },
        }
    }

    /// The same, with every unit started for the individual in `home`
    /// (named in its description, so [`Runner::sweep_units`] finds it), and
    /// every confined launch run as that individual's identity when the
    /// kernel is root.
    pub fn for_individual(self, home: &std::path::Path) -> Runner {
        let backend = match self.backend {
            Backend::Systemd(systemd) => Backend::Systemd(systemd.for_individual(home)),
            direct => direct,
        };
        Runner { backend, individual: Some(home.to_owned()), ..self }
    }

    /// Stops the gate, build and generation units a killed kernel of this
    /// individual left running (under systemd; run directly, the groups'
    /// keeper and the start's sweep do it), and says so.
    pub async fn sweep_units(&self) {
        let Backend::Systemd(systemd) = &self.backend else { return };
        match systemd.sweep().await {
            Ok(names) if names.is_empty() => {}
            Ok(names) => log::info(format!(
                "stopped {} unit(s) that a killed supervisor left behind: {}",
                names.len(),
                names.join(", ")
            )),
            Err(e) => log::info(format!(
                "cannot look for units a killed supervisor left behind: {e}; \
                 systemctl --user list-units 'teneral-*' shows them"
            )),
        }
    }

    /// Children as the kernel's own, with `cage`.
    pub fn direct(cage: Cage) -> Runner {
        Runner { backend: Backend::Direct, cage, individual: None }
    }

    /// Children as the kernel's own, limited through cgroups below `delegated`.
    pub fn cgroup(delegated: cgroup::Delegated, cage: Cage) -> Runner {
        Runner { backend: Backend::Cgroup(std::sync::Arc::new(delegated)), cage, individual: None }
    }

    /// The resource limits the cage applies itself: `TasksMax` and
    /// `MemoryMax` as `RLIMIT_NPROC` and `RLIMIT_AS` when no unit nor cgroup
    /// holds them (the direct backend), none otherwise; and under every
    /// backend a background launch's nice value, which neither a scope nor
    /// the zygote's spare (forked before its launch was asked for) gives it.
    fn rlimits(&self, limits: &Limits) -> teneral_cage::plan::Rlimits {
        let nice = u8::try_from(systemd::BACKGROUND_NICE).ok().filter(|_| limits.background);
        match self.backend {
            Backend::Direct => teneral_cage::plan::Rlimits {
                tasks: limits.tasks_max,
                address_space: limits.memory_max,
                nice,
            },
            Backend::Systemd(_) | Backend::Cgroup(_) => {
                teneral_cage::plan::Rlimits { nice, ..Default::default() }
            }
        }
    }

    pub fn is_systemd(&self) -> bool {
        matches!(self.backend, Backend::Systemd(_))
    }

    /// Whether launches with a profile run inside the cage.
    pub fn caged(&self) -> bool {
        self.cage.is_on()
    }

    /// Starts `launch` as unit `unit` (a name such as
    /// `teneral-gen-abc1234.service`; run directly, the name tags its log
    /// lines). The spec's `stdout` and `stderr` are ignored: output goes to
    /// the log and the kept tail.
    pub async fn start(&self, unit: &str, launch: Launch) -> Result<Running, RunError> {
        let spawn_err = |source| RunError::Spawn { unit: unit.to_owned(), source };
        let Launch { spec, cage, limits } = launch;
        let spec = match &cage {
            Some(profile) => {
                let rlimits = self.rlimits(&limits);
                let individual = self.individual.as_deref();
                self.cage.wrap(unit, profile, spec, rlimits, individual).map_err(spawn_err)?
            }
            None => spec,
        };
        let tag = unit.strip_suffix(".service").unwrap_or(unit).to_owned();
        let tails = Tails::default();
        let how = match &self.backend {
            Backend::Direct => How::Direct(direct::start(unit, &tag, None, &tails, spec, &limits)?),
            Backend::Cgroup(delegated) => {
                let setup = delegated.prepare(unit, &limits, spec);
                let (group, spec) = setup.map_err(|e| spawn_err(std::io::Error::other(e)))?;
                How::Cgroup(direct::start(unit, &tag, None, &tails, spec, &limits)?, group)
            }
            Backend::Systemd(systemd)
                if systemd::adopts(unit, spawn::goes_through_zygote(&spec)) =>
            {
                let name = systemd::scope_name(unit);
                let how = adopted(systemd, unit, &name, &tag, &tails, spec, &limits).await?;
                return Ok(Running { how, tails, unit: name });
            }
            Backend::Systemd(systemd) => {
                let (out_r, out_w) = pipe_pair().map_err(spawn_err)?;
                let (err_r, err_w) = pipe_pair().map_err(spawn_err)?;
                let running = Unit::start(systemd, unit, &spec, &limits, out_w, err_w).await?;
                let out = pipe::Receiver::from_owned_fd(out_r).map_err(spawn_err)?;
                let err = pipe::Receiver::from_owned_fd(err_r).map_err(spawn_err)?;
                tails.read(Some(out), &tag, Some(unit), false);
                tails.read(Some(err), &tag, Some(unit), true);
                How::Unit(running)
            }
        };
        Ok(Running { how, tails, unit: unit.to_owned() })
    }

    /// Starts `launch` and waits for its end: what a check, a build or a
    /// probe needs. The [`Running`] holds its output's tail.
    pub async fn run(&self, unit: &str, launch: Launch) -> Result<(Ended, Running), RunError> {
        let mut running = self.start(unit, launch).await?;
        let ended = running.wait().await;
        Ok((ended, running))
    }

    /// Stops the body a killed kernel left running (its unit, when it had
    /// one and a manager is here; its process group when the same process
    /// still runs), and says so.
    pub async fn stop_leftover(&self, body: &BodyProcess) {
        if let (Some(unit), Backend::Systemd(systemd)) = (&body.unit, &self.backend) {
            if systemd.stop_leftover(unit).await.unwrap_or(false) {
                log::info(format!("stopped {unit}, which a killed supervisor left behind"));
            }
        }
        if spawn::kill_leftover(body.pid, body.start_time) {
            log::info(format!(
                "stopped a body (pid {}) that a killed supervisor left behind",
                body.pid
            ));
        }
    }
}

/// Whether the kernel looks for a user manager on the session bus. Under
/// `TENERAL_RUNNER=direct` it never connects: whatever listens at the bus's
/// address (`/run/user/0/bus` for a root kernel, or `DBUS_SESSION_BUS_ADDRESS`)
/// is not the kernel's to talk to.
pub fn asks_the_bus(choice: RunnerChoice) -> bool {
    match choice {
        RunnerChoice::Direct => false,
        RunnerChoice::Auto | RunnerChoice::Systemd => true,
    }
}

/// Starts `spec` (a launch of the cage's helper) through the zygote, held,
/// has scope `name` adopt it (the cage's first process, or the helper
/// that forks it), then lets it go on (see [`systemd::Scope`]). A launch whose scope did not start is killed
/// before it forked anything or ran the program; one that ended on its own
/// meanwhile (its cage could not be made, so a process the manager was
/// given was gone) is reported as a direct launch is, by its end.
async fn adopted(
    systemd: &Systemd,
    unit: &str,
    name: &str,
    tag: &str,
    tails: &Tails,
    mut spec: Spec,
    limits: &Limits,
) -> Result<How, RunError> {
    let spawn_err = |source| RunError::Spawn { unit: unit.to_owned(), source };
    let (hold, release) = pipe_pair().map_err(spawn_err)?;
    spec.hold = Some(hold);
    let mut child = direct::start(unit, tag, Some(name), tails, spec, limits)?;
    let scope = match systemd::Scope::adopt(systemd, name, child.adoptable(), limits).await {
        Ok(scope) => scope,
        Err(e) => {
            // A launch still held does not end on its own.
            if tokio::time::timeout(ENDS_ALONE, child.wait()).await.is_ok() {
                return Ok(How::Direct(child));
            }
            // Closed with nothing written: the launch gives up at once.
            drop(release);
            child.signal(Signal::KILL);
            child.wait().await;
            return Err(e.into());
        }
    };
    // A launch that has ended already has closed its end, and its exit and
    // output say why.
    let _ = rustix::io::write(&release, b"adopted\n");
    Ok(How::Scope(child, scope))
}

/// How long a launch the manager would not adopt is given to show it had
/// ended on its own: its helper exits as soon as the cage's first process
/// has, and only a launch that was never let go waits longer.
const ENDS_ALONE: Duration = Duration::from_millis(100);

/// A child a scope adopted has ended (its process group killed, and the
/// cage's PID namespace gone with its first process): the scope is let go;
/// a memory kill or the scope's own runtime limit is named as systemd
/// names it.
async fn scope_ended(scope: &systemd::Scope, mut ended: Ended) -> Ended {
    let failed = ended.exit != Exit::Code(0);
    if failed && !ended.over_time {
        if let Some(result) = scope.result().await.filter(|r| r == "oom-kill" || r == "timeout") {
            ended.over_time = result == "timeout";
            ended.result = result;
        }
    }
    scope.release(failed).await;
    ended
}

/// A child of the cgroup backend has ended: what is left of it is killed,
/// its cgroup removed, and a memory kill named as systemd names it.
async fn cgroup_ended(unit: &str, group: &cgroup::Group, mut ended: Ended) -> Ended {
    if group.oom_kills() > 0 && !ended.over_time && ended.exit != Exit::Code(0) {
        ended.result = "oom-kill".to_owned();
    }
    if let Err(why) = group.remove().await {
        log::info(format!("{unit}: {why}"));
    }
    ended
}

fn pipe_pair() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

enum How {
    Direct(direct::Direct),
    /// Forked by the zygote and adopted by a scope unit.
    Scope(direct::Direct, systemd::Scope),
    Cgroup(direct::Direct, cgroup::Group),
    Unit(Unit),
}

/// A started child.
pub struct Running {
    how: How,
    tails: Tails,
    unit: String,
}

impl Running {
    /// Waits for it to end (everything in it, under systemd). Cancel-safe:
    /// all progress is kept in `self`, so a `select!` loop may drop it.
    pub async fn wait(&mut self) -> Ended {
        let ended = match &mut self.how {
            How::Unit(unit) => unit.wait().await,
            How::Direct(child) => child.wait().await,
            How::Cgroup(child, group) => {
                let ended = child.wait().await;
                cgroup_ended(&self.unit, group, ended).await
            }
            How::Scope(child, scope) => {
                let ended = child.wait().await;
                scope_ended(scope, ended).await
            }
        };
        self.tails.drained().await;
        ended
    }

    /// Sends `sig` to every process of it.
    pub async fn signal(&self, sig: Signal) {
        match &self.how {
            How::Direct(child) | How::Cgroup(child, _) => child.signal(sig),
            How::Scope(child, scope) => {
                child.signal(sig);
                scope.signal(sig.as_raw()).await;
            }
            How::Unit(unit) => unit.signal(sig.as_raw()).await,
        }
    }

    /// SIGTERM to all of it, `grace` to end, then SIGKILL; waits for the end.
    pub async fn stop(&mut self, grace: Duration) -> Ended {
        let ended = match &mut self.how {
            How::Direct(child) => child.stop(grace).await,
            How::Cgroup(child, group) => {
                let ended = child.stop(grace).await;
                cgroup_ended(&self.unit, group, ended).await
            }
            How::Scope(child, scope) => {
                let ended = child.stop(grace).await;
                // A stop ends everything in the scope, whatever it was.
                scope.signal(Signal::KILL.as_raw()).await;
                scope_ended(scope, ended).await
            }
            How::Unit(unit) => {
                if unit.try_ended().is_none() {
                    unit.signal(Signal::TERM.as_raw()).await;
                    if tokio::time::timeout(grace, unit.wait()).await.is_err() {
                        unit.signal(Signal::KILL.as_raw()).await;
                    }
                }
                unit.wait().await
            }
        };
        self.tails.drained().await;
        ended
    }

    /// Its main process, when known.
    pub fn pid(&self) -> Option<u32> {
        match &self.how {
            How::Direct(child) | How::Cgroup(child, _) | How::Scope(child, _) => Some(child.pid()),
            How::Unit(unit) => unit.pid,
        }
    }

    /// The unit's name (run directly: the name its lines are logged under).
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// Whether it runs as a systemd unit (a service, or a scope that
    /// adopted it).
    pub fn is_unit(&self) -> bool {
        matches!(self.how, How::Unit(_) | How::Scope(..))
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.tails.text(&self.tails.stderr)
    }

    /// The last lines it wrote to stdout alone.
    pub fn stdout_tail(&self) -> String {
        self.tails.text(&self.tails.stdout)
    }

    /// Every `test result:` line the run printed, one a line.
    pub fn test_results(&self) -> String {
        self.tails.text(&self.tails.results)
    }

    /// The last lines it wrote to stdout and stderr together.
    pub fn output_tail(&self) -> String {
        self.tails.text(&self.tails.both)
    }
}

#[cfg(test)]
mod tests;
