//! How the kernel runs a body or a gate check: as a systemd transient unit
//! when a user manager is there, else as its own child. One seam, chosen
//! once when the kernel starts ([`Runner::choose`]).
//!
//! Both paths give the same [`Running`]: its output logged line by line
//! under the unit's name and the last lines kept (the message about a
//! failure quotes them), `wait` (cancel-safe), `signal` (every process of
//! it), `stop` (SIGTERM, a grace period, then SIGKILL to all of it), `pid`.
//! Limits ([`Limits`]): under systemd `MemoryMax`, `TasksMax`,
//! `RuntimeMaxSec` are the unit's; run directly, only the runtime limit is
//! kept (by the kernel, with the same SIGTERM then SIGKILL), and
//! [`Runner::choose`] logs which limits cannot be applied.

mod tail;

use std::time::Duration;

use rustix::process::Signal;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use tail::Tails;

use crate::log;
use crate::settings::{RunnerChoice, Settings};
use crate::spawn::{self, Child, Exit, Output, Spec};
use crate::state::BodyProcess;
use crate::systemd::{Systemd, SystemdError, Unit};

/// The limits one run gets. `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of memory (`MemoryMax`).
    pub memory_max: Option<u64>,
    /// Processes and threads (`TasksMax`).
    pub tasks_max: Option<u64>,
    /// How long it may run before it is stopped (`RuntimeMaxSec`); a gate
    /// check has one, a body none.
    pub runtime_max: Option<Duration>,
    /// Between SIGTERM and SIGKILL when it is stopped (`TimeoutStopSec`).
    pub stop_timeout: Duration,
}

impl Limits {
    /// The owner's limits for a body: no runtime limit.
    pub fn from_settings(settings: &Settings) -> Limits {
        Limits {
            memory_max: settings.limits.memory_max,
            tasks_max: settings.limits.tasks_max,
            runtime_max: None,
            stop_timeout: settings.timing.stop_grace,
        }
    }

    /// The owner's limits for one gate check: the body's, and at most
    /// `TENERAL_CHECK_MINUTES` of running (none when it is 0).
    pub fn for_check(settings: &Settings) -> Limits {
        let minutes = u64::from(settings.check_minutes);
        let runtime_max = (minutes > 0).then(|| Duration::from_secs(minutes * 60));
        Limits::from_settings(settings).with_runtime_max(runtime_max)
    }

    /// The same with a runtime limit (for a gate check).
    pub fn with_runtime_max(self, runtime_max: Option<Duration>) -> Limits {
        Limits { runtime_max, ..self }
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

    fn direct(exit: Exit, over_time: bool) -> Ended {
        let result = match exit {
            _ if over_time => "timeout",
            Exit::Code(0) => "success",
            Exit::Code(_) => "exit-code",
            Exit::Signal(_) => "signal",
        };
        Ended { exit, result: result.to_owned(), over_time }
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

/// How children are started, for the kernel's whole life.
#[derive(Clone)]
pub enum Runner {
    /// As the kernel's own children (spawn.rs).
    Direct,
    /// As transient units of the user manager.
    Systemd(Systemd),
}

impl Runner {
    /// Chooses as the owner's setting says, and logs the choice.
    pub async fn choose(choice: RunnerChoice) -> Result<Runner, RunError> {
        if choice == RunnerChoice::Direct {
            log::info("running children directly (TENERAL_RUNNER=direct); MemoryMax and TasksMax are not applied");
            return Ok(Runner::Direct);
        }
        match Systemd::connect().await {
            Ok(systemd) => {
                log::info(
                    "running each generation and check as a transient unit of the user manager",
                );
                Ok(Runner::Systemd(systemd))
            }
            Err(e) if choice == RunnerChoice::Systemd => Err(RunError::NeedSystemd(e)),
            Err(e) => {
                log::info(format!(
                    "{e}: running children directly; MemoryMax and TasksMax cannot be applied \
                     (a runtime limit still is, by the kernel)"
                ));
                Ok(Runner::Direct)
            }
        }
    }

    pub fn is_systemd(&self) -> bool {
        matches!(self, Runner::Systemd(_))
    }

    /// Starts `spec` as unit `unit` (a name such as
    /// `teneral-gen-abc1234.service`; run directly, the name tags its log
    /// lines). `spec.stdout` and `spec.stderr` are ignored: output goes to
    /// the log and the kept tail.
    pub async fn start(
        &self,
        unit: &str,
        spec: Spec,
        limits: &Limits,
    ) -> Result<Running, RunError> {
        let tag = unit.strip_suffix(".service").unwrap_or(unit).to_owned();
        let tails = Tails::default();
        match self {
            Runner::Direct => {
                let mut spec = spec;
                spec.stdout = Output::Pipe;
                spec.stderr = Output::Pipe;
                let mut child = spawn::spawn(spec)
                    .map_err(|source| RunError::Spawn { unit: unit.to_owned(), source })?;
                tails.read(child.stdout.take(), &tag, None, false);
                tails.read(child.stderr.take(), &tag, None, true);
                let deadline = limits.runtime_max.map(|d| Instant::now() + d);
                let how = How::Direct { child, deadline, grace: limits.stop_timeout, over: None };
                Ok(Running { how, tails, unit: unit.to_owned() })
            }
            Runner::Systemd(systemd) => {
                let spawn_err = |source| RunError::Spawn { unit: unit.to_owned(), source };
                let (out_r, out_w) = pipe_pair().map_err(spawn_err)?;
                let (err_r, err_w) = pipe_pair().map_err(spawn_err)?;
                let running = Unit::start(systemd, unit, &spec, limits, out_w, err_w).await?;
                let out = pipe::Receiver::from_owned_fd(out_r).map_err(spawn_err)?;
                let err = pipe::Receiver::from_owned_fd(err_r).map_err(spawn_err)?;
                tails.read(Some(out), &tag, Some(unit), false);
                tails.read(Some(err), &tag, Some(unit), true);
                Ok(Running { how: How::Unit(running), tails, unit: unit.to_owned() })
            }
        }
    }

    /// Stops the body a killed kernel left running (its unit, when it had
    /// one and a manager is here; its process group when the same process
    /// still runs), and says so.
    pub async fn stop_leftover(&self, body: &BodyProcess) {
        if let (Some(unit), Runner::Systemd(systemd)) = (&body.unit, self) {
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

fn pipe_pair() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

enum How {
    Direct {
        child: Child,
        /// When the runtime limit runs out.
        deadline: Option<Instant>,
        grace: Duration,
        /// Past the limit: when SIGKILL follows the SIGTERM already sent.
        over: Option<Instant>,
    },
    Unit(Unit),
}

/// A started body or check.
pub struct Running {
    how: How,
    tails: Tails,
    unit: String,
}

impl Running {
    /// Waits for it to end (everything in it, under systemd). Cancel-safe:
    /// all progress is kept in `self`, so a `select!` loop may drop it.
    pub async fn wait(&mut self) -> Ended {
        let ended = self.wait_end().await;
        self.tails.drained().await;
        ended
    }

    async fn wait_end(&mut self) -> Ended {
        match &mut self.how {
            How::Unit(unit) => unit.wait().await,
            How::Direct { child, deadline, grace, over } => loop {
                let next = match (*over, *deadline) {
                    (Some(kill_at), _) => Some(kill_at),
                    (None, at) => at,
                };
                let timer = async move {
                    match next {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    exit = child.wait() => {
                        child.signal(Signal::KILL);
                        return Ended::direct(exit, over.is_some());
                    }
                    () = timer => {
                        if over.is_some() {
                            child.signal(Signal::KILL);
                            *over = Some(Instant::now() + Duration::from_secs(3600));
                        } else {
                            child.signal(Signal::TERM);
                            *over = Some(Instant::now() + *grace);
                        }
                    }
                }
            },
        }
    }

    /// Sends `sig` to every process of it.
    pub async fn signal(&self, sig: Signal) {
        match &self.how {
            How::Direct { child, .. } => child.signal(sig),
            How::Unit(unit) => unit.signal(sig.as_raw()).await,
        }
    }

    /// SIGTERM to all of it, `grace` to end, then SIGKILL; waits for the end.
    pub async fn stop(&mut self, grace: Duration) -> Ended {
        match &mut self.how {
            How::Direct { child, over, .. } => {
                let exit = child.stop(grace).await;
                Ended::direct(exit, over.is_some())
            }
            How::Unit(unit) => {
                if unit.try_ended().is_none() {
                    unit.signal(Signal::TERM.as_raw()).await;
                    if tokio::time::timeout(grace, unit.wait()).await.is_err() {
                        unit.signal(Signal::KILL.as_raw()).await;
                    }
                }
                let ended = unit.wait().await;
                self.tails.drained().await;
                ended
            }
        }
    }

    /// Its main process, when known.
    pub fn pid(&self) -> Option<u32> {
        match &self.how {
            How::Direct { child, .. } => Some(child.pid),
            How::Unit(unit) => unit.pid,
        }
    }

    /// The unit's name (run directly: the name its lines are logged under).
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// Whether it runs as a systemd unit.
    pub fn is_unit(&self) -> bool {
        matches!(self.how, How::Unit(_))
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.tails.text(&self.tails.stderr)
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
mod tests {
    use super::*;

    #[test]
    fn run_directly_a_runtime_limit_stops_it_as_over_time() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.unwrap_or_else(|e| unreachable!("{e}"));
        rt.block_on(async {
            spawn::start_reaper().unwrap_or_else(|e| unreachable!("{e}"));
            let spec = Spec::new("/bin/sh", "/").arg("-c").arg("echo checking; exec sleep 600");
            let limits = Limits {
                memory_max: None,
                tasks_max: None,
                runtime_max: Some(Duration::from_millis(300)),
                stop_timeout: Duration::from_secs(2),
            };
            let began = std::time::Instant::now();
            let mut check = Runner::Direct
                .start("teneral-gate-x-check.service", spec, &limits)
                .await
                .unwrap_or_else(|e| unreachable!("{e}"));
            let ended = check.wait().await;
            assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
            assert_eq!(
                ended,
                Ended { exit: Exit::Signal(15), result: "timeout".into(), over_time: true }
            );
            assert_eq!(check.output_tail(), "checking");
            assert_eq!(check.stderr_tail(), "");
        });
    }
}
