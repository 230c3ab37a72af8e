//! `teneral run`: the supervisor of one individual.
//!
//! It holds the individual's lock, keeps `.teneral/state.json`, owns the
//! journal, serves the model, builds and starts the current generation and
//! applies the lifecycle rules ([`crate::lifecycle`]) to what it sees. A body
//! that asks for a mutation has its candidate judged by the gate
//! ([`crate::gate`]): refused, the same generation starts again and is told;
//! accepted, the candidate becomes the generation, on trial until its first
//! reply. A generation that fails goes back one step, or the kernel stops.
//! SIGHUP carries the owner's request to go back (`teneralctl back`).
//! SIGTERM and SIGINT stop the body (SIGTERM, a grace period, SIGKILL to all
//! of it) and then the kernel. The body runs through the [`Runner`] chosen at
//! the start (a transient unit under systemd); what the kernel does is said
//! through [`crate::status`] (systemd's STATUS, `.teneral/status`), and
//! READY=1 goes to systemd once the journal and the owner's channel are open.

mod model;
mod run;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::commit::short;
use crate::events::{kernel_event, SharedJournal};
use crate::gate::{Gate, Verdict};
use crate::generation;
use crate::journal::{writer::Journal, JOURNAL_PATH};
use crate::lifecycle::{Decision, Lifecycle, Windows};
use crate::runner::{Limits, Runner};
use crate::settings::Settings;
use crate::state::{Refused, State, Stopped};
use crate::status::{Doing, Reporter};
use crate::{back, lock, log, organs, repo, spawn};
use model::Model;
use run::{RunEnd, RunOf};

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
    Run(#[from] crate::runner::RunError),
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
    let status = Reporter::new(&home);
    status.set(Doing::Starting);
    let settings = Settings::load(&home)?;
    // Refuse before building anything when the body could not be caged.
    let exe = std::env::current_exe().map_err(io("the kernel's own binary"))?;
    let cage =
        crate::confine::Cage::decide(settings.unsafe_unconfined, &settings.pretend_missing, exe)?;
    // Same-uid processes (a body among them) cannot read the kernel's
    // memory or /proc/<pid>/environ, nor ptrace it, without CAP_SYS_PTRACE.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| KernelError::Io(format!("cannot make the kernel non-dumpable: {e}")))?;
    let mut state = State::load(&home)?;
    if let Some(stopped) = &state.stopped {
        log::at(
            log::Priority::Notice,
            format!(
                "last time the kernel stopped by itself ({}), with status {}: {}",
                stopped.at, stopped.status, stopped.reason
            ),
        );
    }
    let runner = Runner::choose(settings.runner, cage).await?;
    if let Some(body) = state.body.take() {
        runner.stop_leftover(&body).await;
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
    log::set_commit(&commit);
    status.set_generation(&commit);
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    kernel_event(&journal, &commit, "kernel.started", json!({"pid": std::process::id()}));
    if let Some(candidate) = state.pending.take() {
        answer_undecided(
            &journal,
            &commit,
            &candidate,
            "the kernel stopped while it checked this commit",
        );
    }
    state.save(&home)?;
    log::info(format!("supervising {} at generation {}", home.display(), short(&commit)));
    // The journal and the owner's channel are open: lines sent from now on
    // are taken in, so the kernel counts as serving.
    status.ready();

    let mut k = Kernel {
        model: Model::start(&settings, &home, &runner).await?,
        home,
        settings,
        state,
        journal,
        git,
        runner,
        status,
        sigterm: signal(SignalKind::terminate()).map_err(io("SIGTERM handler"))?,
        sigint: signal(SignalKind::interrupt()).map_err(io("SIGINT handler"))?,
        sighup: signal(SignalKind::hangup()).map_err(io("SIGHUP handler"))?,
    };
    let (status, reason) = k.supervise().await?;
    let now = k.current();
    kernel_event(&k.journal, &now, "kernel.stopped", json!({"reason": reason, "status": status}));
    if status != EXIT_STOPPED {
        k.state.stopped = Some(Stopped { reason: reason.clone(), status, at: now_text() });
        log::at(log::Priority::Error, format!("stopping: {reason}"));
        k.status.set(Doing::GaveUp(reason.clone()));
    } else {
        k.status.set(Doing::Stopping);
    }
    k.status.stopping();
    k.state.body = None;
    k.state.save(&k.home)?;
    Ok(status)
}

/// Tells the agent a mutation it asked for got no verdict, so it asks again.
fn answer_undecided(journal: &SharedJournal, commit: &str, candidate: &str, why: &str) {
    kernel_event(
        journal,
        commit,
        "mutation.rejected",
        json!({
            "candidate": candidate,
            "check": "undecided",
            "undecided": true,
            "output": format!("nothing was decided about {}: {why}; ask again", short(candidate)),
        }),
    );
}

pub(crate) struct Kernel {
    home: PathBuf,
    settings: Settings,
    state: State,
    journal: SharedJournal,
    git: git2::Repository,
    model: Model,
    runner: Runner,
    status: Reporter,
    sigterm: Signal,
    sigint: Signal,
    sighup: Signal,
}

/// How the generation after a decision starts.
enum Next {
    /// The same generation, started again.
    Same,
    /// Another generation: promoted (on trial), or gone back to.
    Switch { to: String, trial: bool },
    /// The kernel ends with this status and reason.
    End(i32, String),
}

impl Kernel {
    fn current(&self) -> String {
        self.state.generation.clone().unwrap_or_default()
    }

    fn windows(&self) -> Windows {
        let t = &self.settings.timing;
        Windows {
            ready: t.ready,
            first_reply: t.first_reply,
            backoff_unit: t.backoff_unit,
            long_run: t.long_run,
        }
    }

    /// Runs generations until asked to stop or the rules give up.
    async fn supervise(&mut self) -> Result<(i32, String), KernelError> {
        let mut trial = false;
        loop {
            let commit = self.current();
            let oid = repo::commit_id(&self.git, &self.home, &commit)?;
            let live = repo::reset_live(&self.git, &self.home, oid)?;
            repo::ensure_candidate(&self.home)?;
            let mut organ_set = match self.organs(&commit, &live).await? {
                Ok(set) => set,
                Err(next) => match next {
                    Next::Switch { to, trial: t } => {
                        self.switch(&to, t)?;
                        trial = t;
                        continue;
                    }
                    Next::End(status, reason) => return Ok((status, reason)),
                    Next::Same => None,
                },
            };
            self.status.set(Doing::Building);
            let limits = Limits::for_build(&self.settings);
            let build = generation::build(&self.runner, &self.home, &live, &commit, &limits);
            let binary = tokio::select! {
                built = build => match built {
                    Ok(path) => path,
                    Err(e) => {
                        kernel_event(&self.journal, &commit, "kernel.notice", json!({"text": e.to_string()}));
                        match self.fail(&commit, format!("it cannot be built: {e}"), String::new())? {
                            Next::Switch { to, trial: t } => { self.switch(&to, t)?; trial = t; continue; }
                            Next::End(status, reason) => return Ok((status, reason)),
                            Next::Same => continue,
                        }
                    }
                },
                _ = self.sigterm.recv() => return Ok((EXIT_STOPPED, "asked to stop (SIGTERM)".into())),
                _ = self.sigint.recv() => return Ok((EXIT_STOPPED, "asked to stop (SIGINT)".into())),
            };
            let body_key = random_key()?;
            let model_url = self.model.url_for(&body_key, &self.settings).await?;
            let can_roll_back = self.state.previous.is_some();
            let mut life = if trial {
                Lifecycle::on_trial(self.windows(), can_roll_back)
            } else {
                Lifecycle::new(self.windows(), can_roll_back)
            };
            let mut runs = 0u32;
            let next = loop {
                runs += 1;
                repo::reset_live(&self.git, &self.home, oid)?;
                if runs > 1 {
                    organ_set = match self.organs(&commit, &live).await? {
                        Ok(set) => set,
                        Err(next) => break next,
                    };
                }
                let of = RunOf {
                    binary: &binary,
                    commit: &commit,
                    model_url: &model_url,
                    body_key: &body_key,
                    run: runs,
                    organs: organ_set.as_deref(),
                };
                let end = self.one_run(of, &mut life).await?;
                let next = match end {
                    RunEnd::AskedToStop => Next::End(EXIT_STOPPED, "asked to stop".into()),
                    RunEnd::SentBack { to } => {
                        kernel_event(
                            &self.journal,
                            &commit,
                            "generation.sentback",
                            json!({"from": commit, "to": to, "by": "owner"}),
                        );
                        Next::Switch { to, trial: false }
                    }
                    RunEnd::Decided { decision, requested, tail } => {
                        self.decided(&commit, decision, requested, tail).await?
                    }
                };
                if !matches!(next, Next::Same) {
                    break next;
                }
            };
            match next {
                Next::End(status, reason) => return Ok((status, reason)),
                Next::Switch { to, trial: t } => {
                    self.switch(&to, t)?;
                    trial = t;
                }
                Next::Same => {}
            }
        }
    }

    /// What follows a decision of the rules about generation `commit`.
    async fn decided(
        &mut self,
        commit: &str,
        decision: Decision,
        requested: Option<String>,
        tail: String,
    ) -> Result<Next, KernelError> {
        if !matches!(decision, Decision::Gate) {
            if let Some(candidate) = &requested {
                answer_undecided(
                    &self.journal,
                    commit,
                    candidate,
                    "the body ended before it could hand the commit over",
                );
            }
        }
        match decision {
            Decision::Restart { after, reason } => {
                self.status.set(Doing::Restarting { after });
                log::info(format!(
                    "the body {reason}; starting it again in {} s",
                    after.as_secs_f32()
                ));
                Ok(if self.pause(after).await {
                    Next::End(EXIT_STOPPED, "asked to stop".into())
                } else {
                    Next::Same
                })
            }
            Decision::Gate => self.mutation(commit, requested).await,
            Decision::RollBack { reason } | Decision::Stop { reason } => {
                self.fail(commit, reason, tail)
            }
            Decision::Wait | Decision::Kill { .. } => Ok(Next::Same),
        }
    }

    /// The organ set of the generation at `live`, prepared before each start
    /// (a tree that went missing is unpacked again from its archive). A
    /// missing archive stops the kernel without going back: the install lost
    /// a file and the generation is sound. Any other organ error fails the
    /// generation. `Ok(Err(next))` says what follows instead of a start.
    async fn organs(
        &mut self,
        commit: &str,
        live: &Path,
    ) -> Result<Result<Option<PathBuf>, Next>, KernelError> {
        let (home, checkout) = (self.home.clone(), live.to_owned());
        let prepared = tokio::task::spawn_blocking(move || organs::prepare(&home, &checkout))
            .await
            .map_err(|e| KernelError::Io(format!("preparing the organs failed: {e}")))?;
        let e = match prepared {
            Ok(set) => return Ok(Ok(set)),
            Err(e) => e,
        };
        kernel_event(&self.journal, commit, "kernel.notice", json!({"text": e.to_string()}));
        if e.archive_missing() {
            return Ok(Err(Next::End(EXIT_GAVE_UP, format!("{e}; then start the kernel again"))));
        }
        Ok(Err(self.fail(commit, format!("its organs cannot be prepared: {e}"), String::new())?))
    }

    /// A generation failed: one step back when there is one, else stop.
    fn fail(&mut self, commit: &str, reason: String, tail: String) -> Result<Next, KernelError> {
        match self.state.previous.clone() {
            Some(to) => {
                log::info(format!(
                    "rolling back from {} to {}: {reason}",
                    short(commit),
                    short(&to)
                ));
                kernel_event(
                    &self.journal,
                    commit,
                    "generation.rolledback",
                    json!({"from": commit, "to": to, "reason": reason, "stderr": tail}),
                );
                Ok(Next::Switch { to, trial: false })
            }
            None => {
                let text = format!(
                    "generation {} failed: {reason}\nwhat it last wrote to stderr:\n{tail}",
                    short(commit)
                );
                kernel_event(&self.journal, commit, "kernel.notice", json!({"text": text}));
                Ok(Next::End(
                    EXIT_GAVE_UP,
                    format!("generation {} failed: {reason}; nothing to go back to", short(commit)),
                ))
            }
        }
    }

    /// Makes `to` the generation. After a promotion the one before it is kept
    /// to go back to; after going back there is none (one step, not a history).
    fn switch(&mut self, to: &str, promoted: bool) -> Result<(), KernelError> {
        let from = self.current();
        self.state.pending = None;
        self.state.previous = if promoted { Some(from) } else { None };
        self.state.generation = Some(to.to_owned());
        log::set_commit(to);
        self.status.set_generation(to);
        let oid = repo::commit_id(&self.git, &self.home, to)?;
        repo::move_lineage(&self.git, &self.home, oid)?;
        self.state.save(&self.home)?;
        Ok(())
    }

    /// The body exited 75: judge what it asked for.
    async fn mutation(
        &mut self,
        commit: &str,
        requested: Option<String>,
    ) -> Result<Next, KernelError> {
        let Some(candidate) = requested else {
            kernel_event(
                &self.journal,
                commit,
                "mutation.rejected",
                json!({"check": "request", "output": "the body exited 75 without asking for a mutation (send mutation.requested first)"}),
            );
            return Ok(Next::Same);
        };
        self.state.pending = Some(candidate.clone());
        self.state.save(&self.home)?;
        let exe = std::env::current_exe().map_err(io("the kernel's own binary"))?;
        let gate = Gate {
            home: &self.home,
            repo: &self.git,
            settings: &self.settings,
            journal: &self.journal,
            running: commit,
            kernel_exe: &exe,
            runner: &self.runner,
            status: Some(&self.status),
        };
        let verdict = tokio::select! {
            v = gate.judge(&candidate) => v,
            _ = self.sigterm.recv() => return Ok(Next::End(EXIT_STOPPED, "asked to stop while checking a mutation".into())),
            _ = self.sigint.recv() => return Ok(Next::End(EXIT_STOPPED, "asked to stop while checking a mutation".into())),
        };
        match verdict {
            Verdict::Accepted { .. } => {
                kernel_event(
                    &self.journal,
                    commit,
                    "mutation.accepted",
                    json!({"from": commit, "to": candidate}),
                );
                self.state.refused = None;
                Ok(Next::Switch { to: candidate, trial: true })
            }
            Verdict::Rejected { check, output } => {
                self.state.pending = None;
                kernel_event(
                    &self.journal,
                    commit,
                    "mutation.rejected",
                    json!({"candidate": candidate, "check": check, "output": tail_of(&output, 4000)}),
                );
                let times = match &self.state.refused {
                    Some(r) if r.commit == candidate => r.times + 1,
                    _ => 1,
                };
                self.state.refused = Some(Refused { commit: candidate.clone(), times });
                self.state.save(&self.home)?;
                if times >= 3 {
                    return Ok(Next::End(
                        EXIT_GAVE_UP,
                        format!(
                            "the same commit {} was refused three times in a row (last at {check})",
                            short(&candidate)
                        ),
                    ));
                }
                let wait = self.settings.timing.backoff_unit * times;
                Ok(if self.pause(wait).await {
                    Next::End(EXIT_STOPPED, "asked to stop".into())
                } else {
                    Next::Same
                })
            }
        }
    }

    /// The owner's request to go back, if SIGHUP brought one that may be
    /// followed; a refusal is journaled for the owner to see.
    fn back_request(&self, commit: &str) -> Option<String> {
        let to = match back::read_request(&self.home) {
            Ok(Some(to)) => to,
            Ok(None) => return None,
            Err(e) => {
                log::info(format!("a request to go back was not readable: {e}"));
                return None;
            }
        };
        let in_git = |c: &str| repo::commit_id(&self.git, &self.home, c).is_ok();
        let chosen = back::lineage(&self.home).map_err(|e| e.to_string()).and_then(|l| {
            l.choose(Some(&to), in_git).map(|g| g.commit.clone()).map_err(|e| e.to_string())
        });
        match chosen {
            Ok(target) => Some(target),
            Err(why) => {
                kernel_event(
                    &self.journal,
                    commit,
                    "kernel.notice",
                    json!({"text": format!("not going back: {why}")}),
                );
                None
            }
        }
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

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
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
