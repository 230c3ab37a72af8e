//! The user manager (`systemd --user`) over D-Bus: transient units for the
//! kernel's children, started, watched and stopped.
//!
//! Invariants:
//! - Only the session bus is used (zbus panics on the manager's private
//!   socket). The connection does not subscribe to the manager's signals
//!   (`Subscribe`): while any client is subscribed, the manager sends every
//!   change of every unit to the bus, and it does so before it runs the
//!   job a start waits for. It sends without one the signals of a unit a
//!   client holds (`AddRef`) and the end of a job to the client that asked
//!   for it; the connection listens to `JobRemoved` once, read by one task
//!   for every start (`jobs`).
//! - A service's start and end are learnt from signals (`JobRemoved` for
//!   the start job, `PropertiesChanged` on the unit for its state), never
//!   by polling. The watch is in place before the unit is asked for, so no
//!   signal can be missed; each stream is read to its end or dropped, so an
//!   unread stream never holds the connection up. A unit the kernel holds
//!   no reference to sends it nothing, so the end of one whose name a start
//!   finds taken is asked for every 5 ms, for at most 3 s
//!   ([`Systemd::ask_for`]).
//! - A service is started with `AddRef`, so it stays loaded until the kernel
//!   has read its exit status and result from it; then the kernel lets it go
//!   (`ResetFailedUnit` for a failed one, and `Unref`), so its name is free
//!   for the next run. A scope is not held: an ended one is unloaded once
//!   the manager has seen its cgroup empty, and a failed one (a memory kill,
//!   its runtime limit), whose result the kernel reads, stays loaded until
//!   the kernel has it forget the failure. Letting go waits for no answer:
//!   the messages are written to the connection before anything the kernel
//!   asks next, and the manager handles them in that order.
//! - Stopping a unit ends everything in it (`KillMode=control-group`).

mod jobs;
mod names;
mod properties;
mod scope;
mod unit;

pub use names::{
    build_unit, build_unit_of, check_unit, description, gate_unit, generation_unit, instance_for,
    leftovers, unit_path,
};
pub use scope::{adopts, scope_name, Scope, ADOPT_WITHIN};
pub use unit::{Unit, BACKGROUND_NICE};

use std::time::Duration;

use zbus::zvariant::OwnedObjectPath;

/// The manager's well-known name on the bus.
const DEST: &str = "org.freedesktop.systemd1";
/// The manager's object, and its interface.
const DEST_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("no user manager on the session bus ({0})")]
    NoManager(String),
    #[error("the user manager refused to start {unit}: {message}")]
    Refused { unit: String, message: String },
    #[error(
        "a unit named {unit} is already running (a body a killed kernel left, or another \
         individual at the same generation); stop it with: systemctl --user stop {unit}"
    )]
    Exists { unit: String },
    #[error("{unit} did not start: the start job ended with \"{result}\" (unit result {unit_result}); journalctl --user-unit {unit} says more")]
    StartFailed { unit: String, result: String, unit_result: String },
    #[error("D-Bus: {0}")]
    Bus(#[from] zbus::Error),
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
pub trait Manager {
    fn subscribe(&self) -> zbus::Result<()>;

    #[allow(clippy::type_complexity)]
    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, zbus::zvariant::Value<'_>)],
        aux: &[(&str, &[(&str, zbus::zvariant::Value<'_>)])],
    ) -> zbus::Result<OwnedObjectPath>;

    fn kill_unit(&self, name: &str, whom: &str, signal: i32) -> zbus::Result<()>;

    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;

    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    /// Units loaded whose names match `patterns` (every state when `states`
    /// is empty): name, description, load, active and sub state, and more.
    #[allow(clippy::type_complexity)]
    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<
        Vec<(
            String,
            String,
            String,
            String,
            String,
            String,
            OwnedObjectPath,
            u32,
            String,
            OwnedObjectPath,
        )>,
    >;

    #[zbus(name = "GetUnitByPID")]
    fn get_unit_by_pid(&self, pid: u32) -> zbus::Result<OwnedObjectPath>;

    /// The environment the manager hands every unit it starts.
    #[zbus(property)]
    fn environment(&self) -> zbus::Result<Vec<String>>;

    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: zbus::zvariant::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// How long a start waits for an ended unit of its name to be unloaded: a
/// scope whose last process has just exited is active until the manager has
/// seen its cgroup empty (the kernel tells it at most every 10 ms, and the
/// manager may be busy).
const SETTLE: Duration = Duration::from_secs(3);
/// How often a start whose name is taken asks whether that unit is over.
const SETTLE_STEP: Duration = Duration::from_millis(5);
/// How many times a start asks again for a name that was taken.
const ASK_AGAIN: u32 = 3;

/// The names of the units the kernel starts for an individual.
const UNIT_PATTERNS: &[&str] = &["teneral-gate-*", "teneral-build-*", "teneral-gen-*"];

fn sigkill() -> i32 {
    rustix::process::Signal::KILL.as_raw()
}

/// A connection to the user manager.
#[derive(Clone)]
pub struct Systemd {
    conn: zbus::Connection,
    manager: ManagerProxy<'static>,
    /// The kernel's own unit, when it runs as `teneral.service` or an
    /// instance of `teneral@.service`: every unit it starts is bound to it
    /// (`BindsTo=`, and `Before=` so that on a stop the kernel goes first and
    /// stops its children itself), so none outlives a killed kernel.
    own_unit: Option<String>,
    /// The end of every start job, heard once for the connection.
    jobs: jobs::Jobs,
    /// The individual (its directory) every unit is started for: each unit's
    /// `Description=` names it, so the next start can find the units of a
    /// killed kernel of this individual and of no other ([`Systemd::sweep`]).
    individual: Option<String>,
}

impl Systemd {
    /// Connects to the user manager on the session bus, if one is there.
    pub async fn connect() -> Result<Systemd, SystemdError> {
        let connect = async {
            let conn = zbus::Connection::session().await?;
            let manager = ManagerProxy::builder(&conn)
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await?;
            let jobs = jobs::Jobs::listen(manager.receive_job_removed().await?);
            let mut systemd = Systemd { conn, manager, own_unit: None, jobs, individual: None };
            systemd.own_unit = systemd.own_unit().await;
            Ok::<_, zbus::Error>(systemd)
        };
        match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Ok(Ok(systemd)) => Ok(systemd),
            Ok(Err(e)) => Err(SystemdError::NoManager(e.to_string())),
            Err(_) => Err(SystemdError::NoManager("no answer within 5 s".into())),
        }
    }

    /// The unit this process runs in, when it is one of teneral's own.
    async fn own_unit(&self) -> Option<String> {
        let path = self.manager.get_unit_by_pid(std::process::id()).await.ok()?;
        let props = zbus::fdo::PropertiesProxy::builder(&self.conn)
            .destination(DEST)
            .ok()?
            .path(path)
            .ok()?
            .build()
            .await
            .ok()?;
        let iface =
            zbus::names::InterfaceName::from_static_str("org.freedesktop.systemd1.Unit").ok()?;
        let id = props.get(iface, "Id").await.ok()?;
        let id = id.downcast_ref::<String>().ok()?;
        (id == "teneral.service" || id.starts_with("teneral@")).then_some(id)
    }

    /// The same, starting every unit for the individual in `home`.
    pub fn for_individual(self, home: &std::path::Path) -> Systemd {
        Systemd { individual: Some(home.display().to_string()), ..self }
    }

    /// The `Description=` of unit `name`, naming the individual.
    pub(crate) fn describe(&self, name: &str) -> String {
        description(name, self.individual.as_deref())
    }

    /// Stops every gate, build and generation unit that a killed kernel of
    /// this individual left running (each process SIGKILLed, then the unit
    /// stopped and its failure forgotten); returns their names. Nothing
    /// without an individual. Call at start, before any unit is started.
    pub async fn sweep(&self) -> Result<Vec<String>, SystemdError> {
        let Some(individual) = self.individual.as_deref() else { return Ok(Vec::new()) };
        let listed = self.manager.list_units_by_patterns(&[], UNIT_PATTERNS).await?;
        let listed: Vec<(String, String, String)> =
            listed.into_iter().map(|u| (u.0, u.1, u.3)).collect();
        let found = leftovers(&listed, individual);
        for name in &found {
            let _ = self.manager.kill_unit(name, "all", sigkill()).await;
            let _ = self.manager.stop_unit(name, "replace").await;
            let _ = self.manager.reset_failed_unit(name).await;
        }
        Ok(found)
    }

    /// The kernel's own unit, if it runs in one of teneral's units.
    pub fn kernel_unit(&self) -> Option<&str> {
        self.own_unit.as_deref()
    }

    /// Sends `signal` to every process of unit `name`.
    pub async fn kill(&self, name: &str, signal: i32) -> Result<(), SystemdError> {
        Ok(self.manager.kill_unit(name, "all", signal).await?)
    }

    /// Lets unit `name` go once it has ended: a failure of it forgotten
    /// (`failed`) and the kernel's reference dropped, so the manager
    /// unloads it and its name is free for the next launch. Neither waits
    /// for the manager's answer (see the invariants above).
    pub async fn let_go(&self, name: &str, failed: bool) {
        if failed {
            self.forget_failure(name).await;
        }
        self.tell(&unit_path(name), "org.freedesktop.systemd1.Unit", "Unref", &()).await;
    }

    /// Has the manager forget a failure of unit `name` (`ResetFailedUnit`),
    /// so it unloads it once it is not running, without waiting for the
    /// answer.
    pub async fn forget_failure(&self, name: &str) {
        self.tell(DEST_PATH, MANAGER, "ResetFailedUnit", &(name,)).await;
    }

    /// Calls `method` of the manager's object `path`, asking for no answer;
    /// one that cannot be sent is logged.
    async fn tell<B>(&self, path: &str, interface: &str, method: &str, body: &B)
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        let message = zbus::Message::method_call(path, method)
            .and_then(|m| m.destination(DEST))
            .and_then(|m| m.interface(interface))
            .and_then(|m| m.with_flags(zbus::message::Flags::NoReplyExpected))
            .and_then(|m| m.build(body));
        let sent = match message {
            Ok(message) => self.conn.send(&message).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            teneral_core::log::warn(format!("cannot send {method} for {path}: {e}"));
        }
    }

    /// Stops unit `name` (everything in it) and forgets a failure of it;
    /// nothing when there is no such unit. For a unit a killed kernel left.
    pub async fn stop_leftover(&self, name: &str) -> Result<bool, SystemdError> {
        if self.manager.get_unit(name).await.is_err() {
            return Ok(false);
        }
        let state = self.property(name, "org.freedesktop.systemd1.Unit", "ActiveState").await;
        let running = matches!(
            state.as_ref().ok().and_then(|v| v.downcast_ref::<&str>().ok()),
            Some("active" | "activating" | "reloading")
        );
        if running {
            // The stop job's end is not awaited: the next start of the same
            // name waits for the name to be free (see `Unit::start`).
            self.manager.stop_unit(name, "replace").await?;
        }
        let _ = self.manager.reset_failed_unit(name).await;
        Ok(running)
    }

    /// Asks for unit `name` with `ask`; when a unit of that name is there
    /// still, and it has ended or ends within [`SETTLE`] (a run of the same
    /// name the kernel has just let go, or one a killed kernel left that
    /// ended), its failure is forgotten, so the manager unloads it, and
    /// `ask` is asked again. A unit that is still running then is left
    /// alone (it may be another individual's): [`SystemdError::Exists`].
    pub(crate) async fn ask_for<T, F>(
        &self,
        name: &str,
        mut ask: impl FnMut() -> F,
    ) -> Result<T, SystemdError>
    where
        F: std::future::Future<Output = Result<T, SystemdError>>,
    {
        let until = tokio::time::Instant::now() + SETTLE;
        let mut asked = 0;
        loop {
            match ask().await {
                Err(SystemdError::Exists { .. })
                    if asked < ASK_AGAIN && self.settle(name, until).await =>
                {
                    let _ = self.manager.reset_failed_unit(name).await;
                    // The manager unloads an ended unit before it reads
                    // the next request; should it not have, a moment more.
                    if asked > 0 {
                        tokio::time::sleep(Duration::from_millis(100) * asked).await;
                    }
                    asked += 1;
                }
                other => return other,
            }
        }
    }

    /// Waits until unit `name` is over (inactive or failed) or unloaded, at
    /// most until `until`; whether it is. Asked every [`SETTLE_STEP`]: the
    /// unit is one the kernel holds no reference to (let go, or left by a
    /// killed kernel), so the manager sends no signal of it to the bus.
    async fn settle(&self, name: &str, until: tokio::time::Instant) -> bool {
        let watch = async {
            loop {
                if self.manager.get_unit(name).await.is_err() || self.is_over(name).await {
                    return true;
                }
                tokio::time::sleep(SETTLE_STEP).await;
            }
        };
        tokio::time::timeout_at(until, watch).await.unwrap_or(false)
    }

    /// Whether unit `name` is loaded but not running (inactive or failed).
    pub async fn is_over(&self, name: &str) -> bool {
        let state = self.property(name, "org.freedesktop.systemd1.Unit", "ActiveState").await;
        state.as_ref().ok().and_then(|v| v.downcast_ref::<&str>().ok()).is_some_and(ended)
    }

    /// The properties of unit `name`, read from the manager at each ask
    /// (a unit's state changes under any cache).
    pub(crate) async fn unit_properties(
        &self,
        name: &str,
    ) -> Result<zbus::fdo::PropertiesProxy<'static>, zbus::Error> {
        zbus::fdo::PropertiesProxy::builder(&self.conn)
            .destination(DEST)?
            .path(unit_path(name))?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
    }

    /// One property of unit `name`, read from the unit.
    pub async fn property(
        &self,
        name: &str,
        interface: &str,
        property: &str,
    ) -> Result<zbus::zvariant::OwnedValue, SystemdError> {
        let props = self.unit_properties(name).await?;
        let iface = zbus::names::InterfaceName::try_from(interface.to_owned())
            .map_err(zbus::Error::from)?;
        Ok(props.get(iface, property).await.map_err(zbus::Error::from)?)
    }
}

/// Whether a unit's `ActiveState` says it has ended.
fn ended(state: &str) -> bool {
    matches!(state, "inactive" | "failed")
}
