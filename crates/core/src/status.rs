//! What the kernel is doing, said where an owner looks: as systemd's
//! `STATUS=` (so `systemctl --user status teneral` shows it) and in
//! `.teneral/status`, replaced whole by a rename, so `teneralctl status` can tell
//! without systemd too.
//!
//! The supervisor and the gate call [`Reporter::set`] with a [`Doing`];
//! [`Reporter::ready`] tells systemd the kernel serves (`READY=1`, for
//! `Type=notify`), [`Reporter::stopping`] that it is on its way out.
//! Invariants: the file always holds one whole JSON object (the last state
//! set), and a failure to write it or to notify is logged, never fatal: the
//! status is for people, the journal is the record.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use sd_notify::NotifyState;
use serde::{Deserialize, Serialize};

use crate::commit::short;
use crate::log;

pub const STATUS_PATH: &str = ".teneral/status";

/// What the kernel is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// Started; nothing running yet.
    Starting,
    /// Building the body of the generation.
    Building,
    /// Starting the body.
    StartingBody,
    /// The body runs and the agent is at rest.
    Resting,
    /// The agent is thinking (a turn is under way).
    Thinking,
    /// The agent runs a tool.
    RunningTool(String),
    /// A mutation is being checked: the candidate, the step under way
    /// (`paths`, `organs`, the checks running side by side, `smoke`), and
    /// how long it is expected to take, when the last run's times tell.
    Checking { candidate: String, step: String, expected: Option<Duration> },
    /// The body ended and starts again after a pause.
    Restarting { after: Duration },
    /// The kernel was asked to stop.
    Stopping,
    /// The kernel stopped by itself and waits for its owner.
    GaveUp(String),
}

impl std::fmt::Display for Doing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Doing::Starting => f.write_str("starting"),
            Doing::Building => f.write_str("building the body"),
            Doing::StartingBody => f.write_str("starting the body"),
            Doing::Resting => f.write_str("resting"),
            Doing::Thinking => f.write_str("thinking"),
            Doing::RunningTool(name) => write!(f, "running a tool ({name})"),
            Doing::Checking { candidate, step, expected } => {
                write!(f, "checking mutation {}: {step}", short(candidate))?;
                match expected {
                    Some(took) => write!(f, " ({}, from the last run)", about(*took)),
                    None => Ok(()),
                }
            }
            Doing::Restarting { after } => {
                write!(f, "the body ended; starting it again in {:.1} s", after.as_secs_f32())
            }
            Doing::Stopping => f.write_str("stopping"),
            Doing::GaveUp(reason) => write!(f, "stopped by itself: {reason}"),
        }
    }
}

/// An expected duration in round words: "about 40 s", "about 7 min".
pub fn about(took: Duration) -> String {
    let secs = took.as_secs_f64();
    if secs < 10.0 {
        format!("about {} s", secs.round().max(1.0))
    } else if secs < 90.0 {
        format!("about {} s", (secs / 5.0).round() * 5.0)
    } else {
        format!("about {} min", (secs / 60.0).round())
    }
}

/// What `.teneral/status` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusFile {
    /// The kernel that wrote it.
    pub pid: u32,
    /// The generation's commit, once known.
    pub generation: Option<String>,
    /// The text systemd shows as its STATUS.
    pub status: String,
    /// When it was set (RFC 3339, UTC).
    pub since: String,
    /// The systemd unit the kernel ran in (`teneral.service`, an instance of
    /// `teneral@.service`), when it ran in one: hints name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Whether the kernel serves (between its `READY=1` and its
    /// `STOPPING=1`): its journal and the owner's channel are open, so a
    /// line sent is taken in. A readiness probe asks this.
    #[serde(default)]
    pub serving: bool,
}

/// Says what the kernel is doing; one per kernel.
pub struct Reporter {
    path: PathBuf,
    generation: Mutex<Option<String>>,
    /// The text last set, so an unchanged state is not written again.
    last: Mutex<String>,
    /// What the kernel last said it does, to say it again with `background`.
    doing: Mutex<Option<Doing>>,
    /// What the kernel does beside it, if anything (warming the gate).
    background: Mutex<Option<String>>,
    /// Between [`Reporter::ready`] and [`Reporter::stopping`].
    serving: Mutex<bool>,
}

impl Reporter {
    pub fn new(home: &Path) -> Reporter {
        Reporter {
            path: home.join(STATUS_PATH),
            generation: Mutex::new(None),
            last: Mutex::new(String::new()),
            doing: Mutex::new(None),
            background: Mutex::new(None),
            serving: Mutex::new(false),
        }
    }

    /// The generation the following states are about.
    pub fn set_generation(&self, commit: &str) {
        *self.generation.lock().unwrap_or_else(|p| p.into_inner()) = Some(commit.to_owned());
    }

    /// The text systemd and the file get for `doing`.
    pub fn text(&self, doing: &Doing) -> String {
        let text = match (&*self.generation.lock().unwrap_or_else(|p| p.into_inner()), doing) {
            (_, Doing::Checking { .. } | Doing::GaveUp(_)) | (None, _) => doing.to_string(),
            (Some(commit), _) => format!("generation {}: {doing}", short(commit)),
        };
        match &*self.background.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(beside) => format!("{text}; meanwhile {beside}"),
            None => text,
        }
    }

    /// Says what the kernel does beside its main work (`None`: nothing),
    /// and says the whole status again.
    pub fn set_background(&self, beside: Option<String>) {
        *self.background.lock().unwrap_or_else(|p| p.into_inner()) = beside;
        let doing = self.doing.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.set(doing.unwrap_or(Doing::Starting));
    }

    /// Records and announces what the kernel does now.
    pub fn set(&self, doing: Doing) {
        let text = self.text(&doing);
        *self.doing.lock().unwrap_or_else(|p| p.into_inner()) = Some(doing);
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if *last == text {
                return;
            }
            last.clone_from(&text);
        }
        self.write(&text);
        notify(&[NotifyState::Status(&text)]);
    }

    /// Writes the status file: `text` and whether the kernel serves.
    fn write(&self, text: &str) {
        let file = StatusFile {
            pid: std::process::id(),
            generation: self.generation.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            status: text.to_owned(),
            since: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            unit: log::own_unit(),
            serving: *self.serving.lock().unwrap_or_else(|p| p.into_inner()),
        };
        let written =
            serde_json::to_vec(&file).map_err(std::io::Error::other).and_then(|mut bytes| {
                bytes.push(b'\n');
                replace(&self.path, &bytes)
            });
        if let Err(e) = written {
            log::warn(format!("cannot write {}: {e}", self.path.display()));
        }
    }

    /// Says again the status last set, with `serving`.
    fn set_serving(&self, serving: bool) {
        *self.serving.lock().unwrap_or_else(|p| p.into_inner()) = serving;
        let text = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.write(&text);
    }

    /// The kernel serves: `READY=1`, and `serving` in the file.
    pub fn ready(&self) {
        self.set_serving(true);
        notify(&[NotifyState::Ready]);
    }

    /// The kernel is on its way out: `STOPPING=1`, and no longer `serving`.
    pub fn stopping(&self) {
        self.set_serving(false);
        notify(&[NotifyState::Stopping]);
    }
}

/// Replaces `path` by renaming a new file over it: a reader sees the old
/// text or the new, never a part. Not synced: after a crash the status is
/// stale at worst, and the next kernel writes it anew.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = crate::fsutil::temp_path(path);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Tells systemd, when it listens (`NOTIFY_SOCKET`); nothing otherwise.
fn notify(state: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(state) {
        log::info(format!("cannot notify systemd: {e}"));
    }
}

/// The last status the kernel of `home` wrote, if any.
pub fn read(home: &Path) -> Option<StatusFile> {
    let bytes = std::fs::read(home.join(STATUS_PATH)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// What `teneralctl status` prints for the individual at `home`, and its
/// exit status: 0 when a kernel runs, 3 when none does (as `systemctl status`).
pub fn report(home: &Path) -> (String, i32) {
    let running = crate::lock::is_held(home);
    let state = crate::state::State::load(home);
    let last = read(home);
    let mut out = Vec::new();
    match (&last, running) {
        (Some(s), true) => {
            out.push(format!("teneral in {}: running (kernel pid {})", home.display(), s.pid))
        }
        (None, true) => out.push(format!("teneral in {}: running", home.display())),
        (_, false) => out.push(format!("teneral in {}: not running", home.display())),
    }
    let generation = state.as_ref().ok().and_then(|s| s.generation.clone());
    if let Some(commit) = &generation {
        out.push(format!("generation: {} ({commit})", short(commit)));
    }
    match (&last, running) {
        (Some(s), true) => out.push(format!("doing: {} (since {})", s.status, s.since)),
        (Some(s), false) => out.push(format!("last said: {} (at {})", s.status, s.since)),
        (None, _) => {}
    }
    if let Ok(state) = &state {
        if let (Some(body), true) = (&state.body, running) {
            match &body.unit {
                Some(unit) => out.push(format!("body: {unit} (pid {})", body.pid)),
                None => out.push(format!("body: pid {}", body.pid)),
            }
        }
        if let (Some(stopped), false) = (&state.stopped, running) {
            out.push(format!(
                "it stopped by itself at {}, with status {}: {}",
                stopped.at, stopped.status, stopped.reason
            ));
        }
    }
    if let Err(e) = &state {
        out.push(format!("state: {e}"));
    }
    if !running {
        out.push(format!("start it with: {}", start_hint(home)));
    }
    (out.join("\n"), if running { 0 } else { 3 })
}

/// How to start the kernel for `home`, as this machine allows: the unit it
/// last ran in, and `teneral run` by the name that finds the program.
pub fn start_hint(home: &Path) -> String {
    let unit = read(home).and_then(|s| s.unit);
    start_hint_for(home, unit.as_deref(), find_kernel().as_deref())
}

/// The `teneral` program: `teneral` when it is on the PATH, else the one
/// beside the running program (a build's `target/release/`), by its path.
fn find_kernel() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("teneral").is_file()));
    if on_path {
        return Some(PathBuf::from("teneral"));
    }
    let beside = std::env::current_exe().ok()?.parent()?.join("teneral");
    beside.is_file().then_some(beside)
}

/// [`start_hint`] from what it found: `unit`, the unit the kernel last ran
/// in; `kernel`, how to name the `teneral` program (None: not found).
pub fn start_hint_for(home: &Path, unit: Option<&str>, kernel: Option<&Path>) -> String {
    let dir = home.display();
    let run = kernel.map(|k| format!("{} run --dir {dir}", k.display()));
    match (unit, run) {
        (Some(unit), Some(run)) => format!("systemctl --user start {unit}, or {run}"),
        (Some(unit), None) => format!("systemctl --user start {unit}"),
        (None, Some(run)) => format!(
            "{run} (or, with the units installed by scripts/install-units, \
             systemctl --user start \"teneral@$(systemd-escape --path {dir})\")"
        ),
        (None, None) => format!(
            "scripts/install in the checkout (it builds teneral and starts it as a unit), \
             or build it with `cargo build --release` and run target/release/teneral run --dir \
             {dir}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let r = Reporter::new(dir.path());
        assert_eq!(r.text(&Doing::Starting), "starting");
        r.set_generation(&"a".repeat(40));
        let table = [
            (Doing::Resting, "generation aaaaaaa: resting"),
            (Doing::RunningTool("shell".into()), "generation aaaaaaa: running a tool (shell)"),
            (
                Doing::Checking {
                    candidate: "b".repeat(40),
                    step: "kernel-tests".into(),
                    expected: None,
                },
                "checking mutation bbbbbbb: kernel-tests",
            ),
            (
                Doing::Checking {
                    candidate: "1a2b3c4".repeat(6),
                    step: "body-tests".into(),
                    expected: Some(Duration::from_secs_f64(41.3)),
                },
                "checking mutation 1a2b3c4: body-tests (about 40 s, from the last run)",
            ),
            (
                Doing::Checking {
                    candidate: "b".repeat(40),
                    step: "lint-body, body-tests".into(),
                    expected: Some(Duration::from_secs(400)),
                },
                "checking mutation bbbbbbb: lint-body, body-tests (about 7 min, from the last run)",
            ),
            (Doing::GaveUp("three crashes".into()), "stopped by itself: three crashes"),
        ];
        for (doing, want) in table {
            assert_eq!(r.text(&doing), want);
        }
        let rounded = [
            (0.2, "about 1 s"),
            (7.4, "about 7 s"),
            (12.6, "about 15 s"),
            (89.0, "about 90 s"),
            (95.0, "about 2 min"),
            (1742.0, "about 29 min"),
        ];
        for (secs, want) in rounded {
            assert_eq!(about(Duration::from_secs_f64(secs)), want, "{secs}");
        }
    }

    #[test]
    fn the_start_hint_names_what_exists() {
        let home = Path::new("/srv/agents/ada");
        let built = Path::new("/src/teneral/target/release/teneral");
        let table = [
            (Some("teneral@-srv-agents-ada.service"), Some(Path::new("teneral")),
             "systemctl --user start teneral@-srv-agents-ada.service, or teneral run --dir /srv/agents/ada"),
            (Some("teneral.service"), None, "systemctl --user start teneral.service"),
            (None, Some(built),
             "/src/teneral/target/release/teneral run --dir /srv/agents/ada (or, with the units \
              installed by scripts/install-units, systemctl --user start \
              \"teneral@$(systemd-escape --path /srv/agents/ada)\")"),
            (None, None,
             "scripts/install in the checkout (it builds teneral and starts it as a unit), or \
              build it with `cargo build --release` and run target/release/teneral run --dir \
              /srv/agents/ada"),
        ];
        for (unit, kernel, want) in table {
            assert_eq!(start_hint_for(home, unit, kernel), want, "{unit:?} {kernel:?}");
        }
    }

    #[test]
    fn the_file_holds_the_last_state() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        std::fs::create_dir_all(dir.path().join(".teneral")).unwrap_or_default();
        let r = Reporter::new(dir.path());
        r.set_generation(&"c".repeat(40));
        r.set(Doing::Thinking);
        r.set(Doing::Resting);
        let file = read(dir.path()).expect("the reporter wrote the status file");
        assert_eq!(file.status, "generation ccccccc: resting");
        assert_eq!(file.generation, Some("c".repeat(40)));
        assert_eq!(file.pid, std::process::id());
    }
}
