//! One transient service unit: asked for with `StartTransientUnit`, watched
//! through its signals until it is inactive, its end read from the unit.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};

use futures_util::StreamExt;
use tokio::sync::oneshot;
use zbus::zvariant::{Fd, OwnedValue, Value};

use super::{properties, Systemd, SystemdError};
use crate::runner::{Ended, Limits};
use crate::spawn::{Exit, Spec};

/// Variables systemd sets for every service on top of its environment; a
/// child of the kernel gets exactly its spec's environment, so these go too.
const SERVICE_VARIABLES: &[&str] =
    &["INVOCATION_ID", "SYSTEMD_EXEC_PID", "JOURNAL_STREAM", "NOTIFY_SOCKET", "MANAGERPID"];

/// The nice value of background work, the lowest priority.
pub const BACKGROUND_NICE: i32 = 19;
/// The idle IO scheduling class (`IOPRIO_CLASS_IDLE`).
const IOPRIO_CLASS_IDLE: i32 = 3;

/// A started unit.
pub struct Unit {
    pub name: String,
    /// Its main process, as the manager reported it once the start job ended.
    pub pid: Option<u32>,
    systemd: Systemd,
    ended: Option<oneshot::Receiver<Ended>>,
    done: Option<Ended>,
}

impl Unit {
    /// Starts `spec` as unit `name` with `limits`; its stdout and stderr are
    /// the given pipe ends. Returns once the start job is done.
    pub async fn start(
        systemd: &Systemd,
        name: &str,
        spec: &Spec,
        limits: &Limits,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> Result<Unit, SystemdError> {
        let props = systemd.unit_properties(name).await?;
        // Listen first, then ask: no signal of this unit can come unheard.
        let mut changes = props.receive_properties_changed().await?;
        let jobs = systemd.jobs.watch(name);
        let job =
            systemd.ask_for(name, || ask(systemd, name, spec, limits, &stdout, &stderr)).await?;
        // The manager holds its own copies of the pipe ends now.
        drop((stdout, stderr));
        let result = jobs.ended(job.as_str()).await?;
        drop(jobs);
        let (tx, rx) = oneshot::channel();
        let watcher = Watcher { systemd: systemd.clone(), name: name.to_owned(), props };
        let pid = match watcher.service_value("ExecMainPID").await {
            Some(v) => u32::try_from(v).ok().filter(|p| *p > 0),
            None => None,
        };
        let unit = Unit {
            name: name.to_owned(),
            pid,
            systemd: systemd.clone(),
            ended: Some(rx),
            done: None,
        };
        if result != "done" {
            // A program that ends at once can end before the manager has seen
            // its exec: the job fails, yet it ran. Only systemd's own setup
            // failures (exit statuses 200 and up) mean it never started.
            let ended = watcher.ended().await;
            watcher.release().await;
            return match ended {
                Some(ended) if !matches!(ended.exit, Exit::Code(200..=255)) => {
                    let _ = tx.send(ended);
                    Ok(unit)
                }
                ended => {
                    let unit_result =
                        ended.map(|e| format!("{}, {}", e.result, e.exit)).unwrap_or_default();
                    Err(SystemdError::StartFailed { unit: name.to_owned(), result, unit_result })
                }
            };
        }
        tokio::spawn(async move {
            while let Some(signal) = changes.next().await {
                let Ok(args) = signal.args() else { continue };
                let state = args.changed_properties().get("ActiveState");
                let over = state
                    .and_then(|v| v.downcast_ref::<&str>().ok())
                    .is_some_and(|s| s == "inactive" || s == "failed");
                // The state may read inactive before the run began; the end of
                // a run is an inactive unit whose main process has exited.
                if over {
                    if let Some(ended) = watcher.ended().await {
                        watcher.release().await;
                        let _ = tx.send(ended);
                        return;
                    }
                }
            }
        });
        Ok(unit)
    }

    /// Waits for the unit to end. Cancel-safe.
    pub async fn wait(&mut self) -> Ended {
        if let Some(done) = &self.done {
            return done.clone();
        }
        let ended = match self.ended.as_mut() {
            Some(rx) => rx.await.unwrap_or_else(|_| Ended::lost("the unit's watch ended")),
            None => Ended::lost("the unit's watch ended"),
        };
        self.ended = None;
        self.done = Some(ended.clone());
        ended
    }

    /// Whether it has ended, without waiting.
    pub fn try_ended(&mut self) -> Option<Ended> {
        if self.done.is_none() {
            if let Some(Ok(ended)) = self.ended.as_mut().map(|rx| rx.try_recv()) {
                self.done = Some(ended);
                self.ended = None;
            }
        }
        self.done.clone()
    }

    /// Sends `signal` to every process in the unit.
    pub async fn signal(&self, signal: i32) {
        if self.done.is_none() {
            if let Err(e) = self.systemd.kill(&self.name, signal).await {
                teneral_core::log::warn(format!("cannot signal {}: {e}", self.name));
            }
        }
    }
}

/// Asks the manager for the unit; the job's path.
async fn ask(
    systemd: &Systemd,
    name: &str,
    spec: &Spec,
    limits: &Limits,
    stdout: &OwnedFd,
    stderr: &OwnedFd,
) -> Result<zbus::zvariant::OwnedObjectPath, SystemdError> {
    let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    let mut argv = vec![text(spec.program.as_os_str())];
    argv.extend(spec.args.iter().map(|a| text(a)));
    let exec = vec![(text(program_path(spec).as_os_str()), argv, false)];
    let env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
    // Everything the manager would add (its own environment, which a
    // session may have filled with anything) is taken away again.
    let manager_env = systemd.manager.environment().await?;
    let unset: Vec<String> = manager_env
        .iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .chain(SERVICE_VARIABLES.iter().copied())
        .filter(|k| !spec.env.iter().any(|(name, _)| name == k))
        .map(str::to_owned)
        .collect();
    let mut props: Vec<(&str, Value<'_>)> =
        properties::common(systemd.describe(name), systemd.own_unit.as_deref(), limits, true);
    props.extend([
        ("Type", Value::from("exec")),
        ("ExecStart", Value::from(exec)),
        ("WorkingDirectory", Value::from(text(spec.cwd.as_os_str()))),
        ("Environment", Value::from(env)),
        ("UnsetEnvironment", Value::from(unset)),
        ("StandardOutputFileDescriptor", Value::from(Fd::from(stdout.as_fd()))),
        ("StandardErrorFileDescriptor", Value::from(Fd::from(stderr.as_fd()))),
    ]);
    if let Some(stdin) = &spec.stdin {
        props.push(("StandardInputFileDescriptor", Value::from(Fd::from(stdin.as_fd()))));
    }
    if limits.background {
        props.push(("Nice", Value::from(BACKGROUND_NICE)));
        props.push(("IOSchedulingClass", Value::from(IOPRIO_CLASS_IDLE)));
    }
    let aux: &[(&str, &[(&str, Value<'_>)])] = &[];
    match systemd.manager.start_transient_unit(name, "fail", &props, aux).await {
        Ok(job) => Ok(job),
        Err(zbus::Error::MethodError(error, message, _))
            if error.as_str() == "org.freedesktop.systemd1.UnitExists" =>
        {
            let _ = message;
            Err(SystemdError::Exists { unit: name.to_owned() })
        }
        Err(zbus::Error::MethodError(error, message, _)) => Err(SystemdError::Refused {
            unit: name.to_owned(),
            message: message.unwrap_or_else(|| error.to_string()),
        }),
        Err(e) => Err(e.into()),
    }
}

/// The program as an absolute path, which the manager requires: a bare
/// name is looked up in the spec's `PATH` (else the kernel's), a relative
/// path is taken from the working directory, as a direct spawn would.
fn program_path(spec: &Spec) -> std::path::PathBuf {
    let program = &spec.program;
    if program.is_absolute() {
        return program.clone();
    }
    if program.components().count() > 1 {
        return spec.cwd.join(program);
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| program.clone())
}

/// What the watch of one unit needs.
struct Watcher {
    systemd: Systemd,
    name: String,
    props: zbus::fdo::PropertiesProxy<'static>,
}

impl Watcher {
    async fn service_all(&self) -> Option<HashMap<String, OwnedValue>> {
        let iface =
            zbus::names::InterfaceName::from_static_str("org.freedesktop.systemd1.Service").ok()?;
        self.props.get_all(iface).await.ok()
    }

    async fn service_value(&self, property: &str) -> Option<u64> {
        let all = self.service_all().await?;
        let value = all.get(property)?;
        value.downcast_ref::<u32>().map(u64::from).ok()
    }

    /// How the run ended, when the main process has exited.
    async fn ended(&self) -> Option<Ended> {
        let all = self.service_all().await?;
        let int = |k: &str| all.get(k).and_then(|v| v.downcast_ref::<i32>().ok());
        let code = int("ExecMainCode")?;
        let status = int("ExecMainStatus").unwrap_or(-1);
        let result =
            all.get("Result").and_then(|v| v.downcast_ref::<String>().ok()).unwrap_or_default();
        // siginfo's CLD_EXITED is 1; CLD_KILLED and CLD_DUMPED (2, 3) are signals.
        let exit = match code {
            0 => return None,
            1 => Exit::Code(status),
            _ => Exit::Signal(status),
        };
        Some(Ended { exit, over_time: result == "timeout", result })
    }

    /// Lets the unit go: forgets a failure and drops the kernel's reference.
    async fn release(&self) {
        self.systemd.let_go(&self.name, true).await;
    }
}
