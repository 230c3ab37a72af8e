//! A launch run as the kernel's own child: the runtime limit is kept by the
//! kernel (SIGTERM when it runs out, SIGKILL to the group a grace period
//! later), everything else is [`crate::spawn`]'s.

use std::time::Duration;

use rustix::process::Signal;
use tokio::time::Instant;

use super::{Ended, Limits, RunError, Tails};
use crate::spawn::{self, Output, Spec};
use crate::spawn::{Child, Exit};
use teneral_core::log;

pub(super) struct Direct {
    child: Child,
    /// When the runtime limit runs out.
    deadline: Option<Instant>,
    grace: Duration,
    /// Past the limit: when SIGKILL follows the SIGTERM already sent.
    over: Option<Instant>,
}

impl Direct {
    pub(super) fn new(child: Child, limits: &Limits) -> Direct {
        let deadline = limits.runtime_max.map(|d| Instant::now() + d);
        Direct { child, deadline, grace: limits.stop_timeout, over: None }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.pid
    }

    /// The process a unit that adopts this launch takes: the cage's first
    /// process when a spare made it ahead (the child, its helper, only
    /// supervises it from outside and stays where the kernel is), else the
    /// child, which forks the cage once adopted.
    pub(super) fn adoptable(&self) -> u32 {
        self.child.first.unwrap_or(self.child.pid)
    }

    pub(super) fn signal(&self, sig: Signal) {
        self.child.signal(sig);
    }

    /// Waits for the end, stopping the child when its time runs out.
    /// Cancel-safe: the progress is kept in `self`.
    pub(super) async fn wait(&mut self) -> Ended {
        loop {
            let next = self.over.or(self.deadline);
            let timer = async move {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                exit = self.child.wait() => {
                    self.child.signal(Signal::KILL);
                    return ended(exit, self.over.is_some());
                }
                () = timer => {
                    if self.over.is_some() {
                        self.child.signal(Signal::KILL);
                        self.over = Some(Instant::now() + Duration::from_secs(3600));
                    } else {
                        self.child.signal(Signal::TERM);
                        self.over = Some(Instant::now() + self.grace);
                    }
                }
            }
        }
    }

    pub(super) async fn stop(&mut self, grace: Duration) -> Ended {
        let exit = self.child.stop(grace).await;
        ended(exit, self.over.is_some())
    }
}

fn ended(exit: Exit, over_time: bool) -> Ended {
    let result = match exit {
        _ if over_time => "timeout",
        Exit::Code(0) => "success",
        Exit::Code(_) => "exit-code",
        Exit::Signal(_) => "signal",
    };
    Ended { exit, result: result.to_owned(), over_time }
}

/// Starts `spec` as the kernel's own child, its output read into `tails`
/// and logged under `tag` (and `in_unit`, the unit that adopts it, if any).
pub(super) fn start(
    unit: &str,
    tag: &str,
    in_unit: Option<&str>,
    tails: &Tails,
    mut spec: Spec,
    limits: &Limits,
) -> Result<Direct, RunError> {
    spec.stdout = Output::Pipe;
    spec.stderr = Output::Pipe;
    let spawn_err = |source| RunError::Spawn { unit: unit.to_owned(), source };
    let mut child = spawn::spawn(spec).map_err(spawn_err)?;
    if limits.background {
        // Before it can have started anything: its children inherit it.
        let pid = rustix::process::Pid::from_raw(child.pid as i32);
        if let Err(e) = rustix::process::setpriority_process(pid, super::systemd::BACKGROUND_NICE) {
            log::warn(format!("cannot lower the priority of {unit}: {e}"));
        }
    }
    tails.read(child.stdout.take(), tag, in_unit, false);
    tails.read(child.stderr.take(), tag, in_unit, true);
    Ok(Direct::new(child, limits))
}
