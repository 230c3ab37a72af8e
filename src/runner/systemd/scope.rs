//! A transient scope unit that adopts a launch the cage's zygote forked: the
//! manager does not start the process (a service's exec of the helper costs
//! what the zygote saves), it takes a running one into a unit of its own
//! (`StartTransientUnit` with `PIDs=`) with the same limits and name a
//! service would have had.
//!
//! The manager is given the process that holds, or will fork, the cage:
//! the cage's first process when the zygote's spare made it ahead (pid 1
//! of the cage's PID namespace; its helper only supervises it from outside
//! and stays where the kernel is), else the launch's helper, which forks
//! the cage once adopted. The launch is held
//! (`teneral_cage::zygote::Hold`) until the kernel says the manager has
//! moved that process: until then it forks nothing and runs nothing of the
//! program, so everything of the cage is born in the scope. A spare's
//! first process builds its cage's root while it waits, so that the
//! manager's work and the cage's overlap.
//!
//! The helper stays the kernel's child: the kernel reaps it and keeps its
//! runtime limit as for a direct launch; the scope holds `MemoryMax`,
//! `TasksMax` and `RuntimeMaxSec` and is bound to the kernel's own unit.
//! The kernel holds no reference to it (no `AddRef`, see [`ask`]): it is
//! unloaded once the manager has seen it empty, a failed one once the
//! kernel has read its result and had its failure forgotten
//! ([`Scope::release`]). A killed kernel's launches die with it (their
//! parent-death signal), so the emptied scope is unloaded.
//!
//! On a start's path are two exchanges with the manager: the
//! `StartTransientUnit` call, and its job's end (`JobRemoved`, which the
//! manager sends the client that asked for the job, subscribed or not),
//! after the job moved the process into the scope. No answer, or no end,
//! within [`ADOPT_WITHIN`] is a start that failed, named with the unit's
//! state. The release after the launch's end waits for no answer,
//! and a launch of the same name right after waits only for the manager to
//! have seen the last one's end ([`Systemd::ask_for`]): a scope is active
//! until the manager learns its cgroup is empty, a moment after its last
//! process exited.

use std::time::Duration;

use zbus::zvariant::Value;

use super::{properties, Systemd, SystemdError};
use crate::runner::Limits;

/// A scope that adopted a launch.
pub struct Scope {
    pub name: String,
    systemd: Systemd,
}

impl Scope {
    /// Has the manager adopt process `pid` into scope `name` with `limits`;
    /// returns once the start job is done (the process is in the scope). A
    /// job that ends otherwise, or no answer or no end within
    /// [`ADOPT_WITHIN`], is a scope that did not start, named with its
    /// state.
    pub async fn adopt(
        systemd: &Systemd,
        name: &str,
        pid: u32,
        limits: &Limits,
    ) -> Result<Scope, SystemdError> {
        // Watch first, then ask: the job's end cannot come unheard.
        let jobs = systemd.jobs.watch(name);
        let started = tokio::time::timeout(ADOPT_WITHIN, async {
            let job = systemd.ask_for(name, || ask(systemd, name, pid, limits)).await?;
            jobs.ended(job.as_str()).await
        })
        .await;
        drop(jobs);
        let scope = Scope { name: name.to_owned(), systemd: systemd.clone() };
        let (result, unit_result) = match started {
            Ok(Ok(result)) if result == "done" => return Ok(scope),
            Ok(Ok(result)) => (result, "the scope did not adopt the launch".to_owned()),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                let state = systemd
                    .property(name, "org.freedesktop.systemd1.Unit", "ActiveState")
                    .await
                    .ok()
                    .and_then(|v| v.downcast_ref::<String>().ok())
                    .unwrap_or_else(|| "not loaded".to_owned());
                (
                    format!("no end within {} s", ADOPT_WITHIN.as_secs()),
                    format!("the scope is {state}, without the launch"),
                )
            }
        };
        scope.kill_and_release().await;
        Err(SystemdError::StartFailed { unit: name.to_owned(), result, unit_result })
    }

    /// Sends `signal` to every process in the scope.
    pub async fn signal(&self, signal: i32) {
        let _ = self.systemd.kill(&self.name, signal).await;
    }

    /// The scope's `Result` (`success`, `oom-kill`, `timeout`, ...), when
    /// the manager still has it.
    pub async fn result(&self) -> Option<String> {
        let value =
            self.systemd.property(&self.name, "org.freedesktop.systemd1.Scope", "Result").await;
        value.ok().and_then(|v| v.downcast_ref::<String>().ok())
    }

    /// Lets the scope go once the launch has ended, without waiting for
    /// the manager: a failed one's failure is forgotten, so it is unloaded
    /// as an ended scope is ([`Systemd::forget_failure`]). Nothing is left
    /// to end in it: the launch's helper has been reaped, and the cage's
    /// PID namespace ended with its first process.
    pub async fn release(&self, failed: bool) {
        if failed {
            self.systemd.forget_failure(&self.name).await;
        }
    }

    /// Ends everything in the scope, then lets it go.
    pub async fn kill_and_release(&self) {
        let _ = self.systemd.kill(&self.name, super::sigkill()).await;
        self.systemd.forget_failure(&self.name).await;
    }
}

/// The scope's name for a launch named `unit` (`teneral-gate-abc-x.service`
/// is adopted as `teneral-gate-abc-x.scope`).
pub fn scope_name(unit: &str) -> String {
    format!("{}.scope", unit.strip_suffix(".service").unwrap_or(unit))
}

/// Whether launch `unit` is adopted by a scope rather than started as a
/// service: every launch the zygote forks, but a generation's body, whose
/// service unit's main process is what the owner's commands and
/// `systemctl status` name (its start comes once a generation).
pub fn adopts(unit: &str, through_zygote: bool) -> bool {
    through_zygote && !unit.starts_with("teneral-gen-")
}

/// How long a start waits for the manager to adopt its launch.
pub const ADOPT_WITHIN: Duration = Duration::from_secs(10);

/// Asks the manager for the scope; the job's path.
async fn ask(
    systemd: &Systemd,
    name: &str,
    pid: u32,
    limits: &Limits,
) -> Result<zbus::zvariant::OwnedObjectPath, SystemdError> {
    // No `AddRef`: the manager would send the scope's signals (its
    // creation and each change of its properties) to the bus for the
    // kernel, before it runs the job that moves the process.
    let own = systemd.own_unit.as_deref();
    let mut props = properties::common(systemd.describe(name), own, limits, false);
    props.push(("PIDs", Value::from(vec![pid])));
    let aux: &[(&str, &[(&str, Value<'_>)])] = &[];
    match systemd.manager.start_transient_unit(name, "fail", &props, aux).await {
        Ok(job) => Ok(job),
        Err(zbus::Error::MethodError(error, _, _))
            if error.as_str() == "org.freedesktop.systemd1.UnitExists" =>
        {
            Err(SystemdError::Exists { unit: name.to_owned() })
        }
        Err(zbus::Error::MethodError(error, message, _)) => Err(SystemdError::Refused {
            unit: name.to_owned(),
            message: message.unwrap_or_else(|| error.to_string()),
        }),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_launch_the_zygote_forks_is_adopted_but_a_generations_body() {
        let table = [
            ("teneral-gate-abc1234-kernel-tests.service", true, true),
            ("teneral-build-abc1234-check-x.service", true, true),
            ("teneral-gate-abc1234-kernel-tests.service", false, false),
            ("teneral-gen-abc1234.service", true, false),
        ];
        for (unit, through_zygote, want) in table {
            assert_eq!(adopts(unit, through_zygote), want, "{unit} {through_zygote}");
        }
        assert_eq!(scope_name("teneral-gate-a-b.service"), "teneral-gate-a-b.scope");
    }
}
