//! `teneral run`: the supervisor of one individual.
//!
//! It holds the individual's lock, keeps `.teneral/state.json`, owns the
//! journal, builds and starts the current generation, serves it the model
//! and its event channel, and applies the lifecycle rules
//! ([`crate::lifecycle`]) to what it sees. SIGTERM and SIGINT stop the body
//! (SIGTERM, a grace period, SIGKILL to its group) and then the kernel.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;

use crate::events::{self, kernel_event, Channel, Seen, SharedJournal};
use crate::generation::{self, short, Start};
use crate::journal::{writer::Journal, JOURNAL_PATH};
use crate::lifecycle::{Decision, Input, Lifecycle, Windows};
use crate::settings::{Provider, Settings};
use crate::state::{BodyProcess, State, Stopped};
use crate::{lock, log, proxy, repo, spawn, standin};

/// `teneral run` ended because it was asked to.
pub const EXIT_STOPPED: i32 = 0;
/// The kernel gave up by its rules and waits for its owner.
pub const EXIT_GAVE_UP: i32 = 3;

/// Why `run` could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(transparent)]
    Lock(#[from] lock::LockError),
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(transparent)]
    Repo(#[from] repo::RepoError),
    #[error(transparent)]
    Journal(#[from] crate::journal::writer::JournalError),
    #[error(transparent)]
    Cage(#[from] crate::confine::CageError),
    #[error("{0}")]
    Io(String),
}

fn io(what: &str) -> impl Fn(std::io::Error) -> KernelError + '_ {
    move |e| KernelError::Io(format!("{what}: {e}"))
}

/// Supervises the individual at `home` until asked to stop or until the
/// rules give up. Returns the process's exit status.
pub async fn run(home: &Path) -> Result<i32, KernelError> {
    let home = home.canonicalize().map_err(io("the individual's directory"))?;
    let _lock = lock::acquire(&home)?;
    spawn::start_reaper().map_err(io("cannot become a child subreaper"))?;
    let settings = Settings::load(&home)?;
    // Refuse before building anything when the body could not be caged.
    crate::confine::decide(settings.unsafe_unconfined, &settings.pretend_missing)?;
    // Same-uid processes (a body among them) cannot read the kernel's
    // memory or /proc/<pid>/environ, nor ptrace it, without CAP_SYS_PTRACE.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| KernelError::Io(format!("cannot make the kernel non-dumpable: {e}")))?;
    let mut state = State::load(&home)?;
    if let Some(stopped) = &state.stopped {
        log::info(format!(
            "last time the kernel stopped by itself ({}), with status {}: {}",
            stopped.at, stopped.status, stopped.reason
        ));
    }
    if let Some(body) = state.body.take() {
        if spawn::kill_leftover(body.pid, body.start_time) {
            log::info(format!(
                "stopped a body (pid {}) that a killed supervisor left behind",
                body.pid
            ));
        }
    }
    let git = repo::open(&home)?;
    let commit = match &state.generation {
        Some(hex) => repo::commit_id(&git, &home, hex)?,
        None => repo::head_commit(&git, &home)?,
    };
    repo::ensure_lineage(&git, &home, commit)?;
    let commit = commit.to_string();
    state.generation = Some(commit.clone());
    state.stopped = None;
    state.save(&home)?;
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    kernel_event(&journal, &commit, "kernel.started", json!({"pid": std::process::id()}));
    log::info(format!("supervising {} at generation {}", home.display(), short(&commit)));

    let mut k = Kernel {
        home,
        settings,
        state,
        journal,
        git,
        sigterm: signal(SignalKind::terminate()).map_err(io("SIGTERM handler"))?,
        sigint: signal(SignalKind::interrupt()).map_err(io("SIGINT handler"))?,
    };
    let (status, reason) = k.supervise(commit.clone()).await?;
    kernel_event(
        &k.journal,
        &commit,
        "kernel.stopped",
        json!({"reason": reason, "status": status}),
    );
    if status != EXIT_STOPPED {
        k.state.stopped = Some(Stopped { reason: reason.clone(), status, at: now_text() });
        log::info(format!("stopping: {reason}"));
    }
    k.state.body = None;
    k.state.save(&k.home)?;
    Ok(status)
}

struct Kernel {
    home: PathBuf,
    settings: Settings,
    state: State,
    journal: SharedJournal,
    git: git2::Repository,
    sigterm: Signal,
    sigint: Signal,
}

/// How one run of a body ended, as far as the loop is concerned.
enum RunEnd {
    Decided(Decision),
    AskedToStop,
}

impl Kernel {
    fn windows(&self) -> Windows {
        let t = &self.settings.timing;
        Windows {
            ready: t.ready,
            first_reply: t.first_reply,
            backoff_unit: t.backoff_unit,
            long_run: t.long_run,
        }
    }

    /// Runs generation `commit` until the kernel is asked to stop or gives up.
    async fn supervise(&mut self, commit: String) -> Result<(i32, String), KernelError> {
        let oid = repo::commit_id(&self.git, &self.home, &commit)?;
        let live = repo::reset_live(&self.git, &self.home, oid)?;
        repo::ensure_candidate(&self.home)?;
        let mode = crate::confine::decide(
            self.settings.unsafe_unconfined,
            &self.settings.pretend_missing,
        )?;
        let build = generation::build(&self.home, &live, &commit, mode);
        let binary = tokio::select! {
            built = build => match built {
                Ok(path) => path,
                Err(e) => {
                    kernel_event(&self.journal, &commit, "kernel.notice", json!({"text": e.to_string()}));
                    return Ok((EXIT_GAVE_UP, format!("generation {} cannot be started: {e}", short(&commit))));
                }
            },
            _ = self.sigterm.recv() => return Ok((EXIT_STOPPED, "asked to stop (SIGTERM)".into())),
            _ = self.sigint.recv() => return Ok((EXIT_STOPPED, "asked to stop (SIGINT)".into())),
        };
        let body_key = random_key()?;
        let model_url = self.serve_model(&body_key).await?;
        let mut life = Lifecycle::new(self.windows(), self.state.previous.is_some());
        let mut runs = 0u32;
        loop {
            runs += 1;
            // Reset the live checkout before every start, as the contract says.
            repo::reset_live(&self.git, &self.home, oid)?;
            let end =
                self.one_run(&binary, &commit, &model_url, &body_key, &mut life, runs).await?;
            let decision = match end {
                RunEnd::AskedToStop => return Ok((EXIT_STOPPED, "asked to stop".into())),
                RunEnd::Decided(d) => d,
            };
            match decision {
                Decision::Restart { after, reason } => {
                    log::info(format!(
                        "the body {reason}; starting it again in {} s",
                        after.as_secs_f32()
                    ));
                    if self.pause(after).await {
                        return Ok((EXIT_STOPPED, "asked to stop".into()));
                    }
                }
                Decision::Gate => {
                    // The gate is its own issue; until it lands every request
                    // gets this answer, so none goes unanswered.
                    kernel_event(
                        &self.journal,
                        &commit,
                        "mutation.rejected",
                        json!({"check": "gate", "output": "this kernel cannot check mutations yet; nothing was changed"}),
                    );
                }
                Decision::RollBack { reason } | Decision::Stop { reason } => {
                    return Ok((
                        EXIT_GAVE_UP,
                        format!("generation {} failed: {reason}", short(&commit)),
                    ));
                }
                Decision::Wait | Decision::Kill { .. } => {}
            }
        }
    }

    /// Starts the model endpoint the body will use; returns its base URL.
    async fn serve_model(&self, body_key: &str) -> Result<String, KernelError> {
        let loopback: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
        let addr = match self.settings.provider {
            Provider::Standin => {
                let config = standin::Config {
                    key: Some(body_key.to_owned()),
                    script: self.settings.standin_script.as_ref().map(|p| self.home.join(p)),
                    log: None,
                };
                let server = standin::Standin::bind(loopback, config)
                    .await
                    .map_err(|e| KernelError::Io(format!("the stand-in model: {e}")))?;
                let addr = server.local_addr();
                tokio::spawn(server.serve());
                addr
            }
            Provider::Compatible | Provider::OpenAi => {
                let Some(upstream) = proxy::Upstream::from_settings(&self.settings) else {
                    return Err(KernelError::Io(
                        "TENERAL_BASE_URL and TENERAL_API_KEY are needed".into(),
                    ));
                };
                let server = proxy::Proxy::bind(loopback, upstream, body_key.to_owned())
                    .await
                    .map_err(|e| KernelError::Io(format!("the model proxy: {e}")))?;
                let addr = server.local_addr();
                tokio::spawn(server.serve());
                addr
            }
            Provider::ChatGpt => return Err(KernelError::Io(
                "the ChatGPT sign-in is not built yet; use TENERAL_PROVIDER=openai or compatible"
                    .into(),
            )),
        };
        Ok(format!("http://{addr}/v1"))
    }

    /// Starts the body once and watches it until the rules decide.
    async fn one_run(
        &mut self,
        binary: &Path,
        commit: &str,
        model_url: &str,
        body_key: &str,
        life: &mut Lifecycle,
        run: u32,
    ) -> Result<RunEnd, KernelError> {
        let socket = self.home.join(format!(".teneral/run/events-{}-{run}.sock", short(commit)));
        let listener = events::bind(&socket).map_err(io("the event socket"))?;
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let channel = Channel {
            home: self.home.clone(),
            commit: commit.to_owned(),
            journal: Arc::clone(&self.journal),
            seen: seen_tx,
        };
        let server = tokio::spawn(channel.serve(listener));
        let start = Start {
            home: &self.home,
            commit,
            events: &socket,
            model_url,
            body_key,
            settings: &self.settings,
            clock: true,
        };
        let mut body = generation::start(binary, &start).map_err(io("cannot start the body"))?;
        let start_time = spawn::process_start_time(body.child.pid).unwrap_or_default();
        self.state.body = Some(BodyProcess { pid: body.child.pid, start_time });
        self.state.save(&self.home)?;
        kernel_event(&self.journal, commit, "generation.started", json!({"pid": body.child.pid}));
        life.on(Input::Started, Instant::now());

        let grace = self.settings.timing.stop_grace;
        let end = loop {
            let deadline = life.deadline();
            let sleep = async move {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                Some(event) = seen.recv() => {
                    let input = match event {
                        Seen::Ready => Input::Ready,
                        Seen::Replied => Input::Replied,
                        Seen::Interrupted => Input::Interrupted,
                        Seen::TurnEnded | Seen::MutationRequested { .. } => continue,
                    };
                    life.on(input, Instant::now());
                }
                exit = body.child.wait() => {
                    let code = match exit { spawn::Exit::Code(c) => Some(c), spawn::Exit::Signal(_) => None };
                    // Events the body sent before it ended count first.
                    while let Ok(event) = seen.try_recv() {
                        if event == Seen::Ready { life.on(Input::Ready, Instant::now()); }
                        if event == Seen::Replied { life.on(Input::Replied, Instant::now()); }
                    }
                    kernel_event(&self.journal, commit, "generation.exited", json!({"status": exit.to_string()}));
                    let decision = life.on(Input::Exited { code }, Instant::now());
                    if let Decision::Stop { reason } | Decision::RollBack { reason } = &decision {
                        let tail = generation::tail_text(&body.stderr_tail);
                        let cage = code.and_then(crate::confine::describe_exit).map(|d| format!(" ({d})")).unwrap_or_default();
                        let text = format!("{reason}{cage}\nwhat it last wrote to stderr:\n{tail}");
                        kernel_event(&self.journal, commit, "kernel.notice", json!({"text": text}));
                    }
                    break RunEnd::Decided(decision);
                }
                () = sleep => {
                    if let Decision::Kill { reason } = life.on(Input::Deadline, Instant::now()) {
                        log::info(format!("stopping the body: {reason}"));
                        body.child.signal(rustix::process::Signal::KILL);
                    }
                }
                _ = self.sigterm.recv() => { body.child.stop(grace).await; break RunEnd::AskedToStop; }
                _ = self.sigint.recv() => { body.child.stop(grace).await; break RunEnd::AskedToStop; }
            }
        };
        server.abort();
        let _ = std::fs::remove_file(&socket);
        self.state.body = None;
        self.state.save(&self.home)?;
        Ok(end)
    }

    /// Waits `after`; true when asked to stop meanwhile.
    async fn pause(&mut self, after: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(after) => false,
            _ = self.sigterm.recv() => true,
            _ = self.sigint.recv() => true,
        }
    }
}

/// A key made for one generation: 32 random bytes, hex.
fn random_key() -> Result<String, KernelError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| KernelError::Io(format!("no random bytes for a key: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("tnl-gen-{hex}"))
}

fn now_text() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
