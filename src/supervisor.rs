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
//! SIGTERM and SIGINT stop the body (SIGTERM, a grace, SIGKILL to all of it),
//! then the kernel. The body runs through the [`Runner`] chosen at the start;
//! what the kernel does is said through [`teneral_core::status`] (STATUS, the file
//! `.teneral/status`); READY=1 once the journal and owner's channel are open.

mod counts;
mod model;
mod reconcile;
mod run;
mod start;
mod verdict;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::events::{kernel_event, SharedJournal};
use crate::generation;
use crate::lifecycle::{Decision, Lifecycle, RunCounts, Windows};
use crate::runner::{Limits, Runner};
use crate::settings::Settings;
use crate::{repo, spawn};
use model::{random_key, Model};
use run::{RunEnd, RunOf};
use teneral_core::commit::{short, Commit};
use teneral_core::journal::{writer::Journal, EventKind, JOURNAL_PATH};
use teneral_core::state::{State, Stopped};
use teneral_core::status::{Doing, Reporter};
use teneral_core::{lock, log};
use verdict::answer_undecided;

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
    Evals(#[from] crate::evals::EvalsError),
    #[error(transparent)]
    State(#[from] teneral_core::state::StateError),
    #[error(transparent)]
    Repo(#[from] repo::RepoError),
    #[error(transparent)]
    Journal(#[from] teneral_core::journal::writer::JournalError),
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    #[error(transparent)]
    Cage(#[from] crate::confine::CageError),
    #[error(transparent)]
    AboveCeiling(#[from] crate::runner::ceiling::AboveCeiling),
    #[error("{0}")]
    Io(String),
}

fn io(what: &str) -> impl Fn(std::io::Error) -> KernelError + '_ {
    move |e| KernelError::Io(format!("{what}: {e}"))
}

/// Supervises the individual at `home` until asked to stop or until the
/// rules give up. Returns the process's exit status.
pub async fn run(home: &Path) -> Result<i32, KernelError> {
    // A local set, so that background work holding a git repository (which
    // is not `Sync`) can run beside the supervisor on its one thread.
    tokio::task::LocalSet::new().run_until(supervise_at(home)).await
}

async fn supervise_at(home: &Path) -> Result<i32, KernelError> {
    let home = home.canonicalize().map_err(io("the individual's directory"))?;
    // Taken before the lock publishes this pid: from then on `teneralctl
    // back` may send SIGHUP, and a stop SIGTERM, at any moment of the
    // start; their default would end the kernel. Held until the loop that
    // answers them asks (the request file waits beside the signal).
    let sigterm = signal(SignalKind::terminate()).map_err(io("SIGTERM handler"))?;
    let sigint = signal(SignalKind::interrupt()).map_err(io("SIGINT handler"))?;
    let sighup = signal(SignalKind::hangup()).map_err(io("SIGHUP handler"))?;
    let _lock = lock::acquire(&home)?;
    start::name_in_the_log(&home);
    spawn::start_reaper().map_err(io("cannot become a child subreaper"))?;
    let status = Arc::new(Reporter::new(&home));
    status.set(Doing::Starting);
    let settings = Settings::load(&home)?;
    log::set_format(settings.log_format);
    // The owner's evaluations are read whole now, so a file that cannot be
    // used stops the start before anything changes, not a later judgement.
    crate::evals::load_all(&home)?;
    // Refuse before building anything when the body could not be caged.
    let exe = std::env::current_exe().map_err(io("the kernel's own binary"))?;
    let cage = crate::confine::Cage::decide(
        settings.unsafe_unconfined,
        &settings.test.pretend_missing,
        exe,
    )?;
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
    let runner = Runner::choose(settings.runner, cage.clone()).await?.for_individual(&home);
    // Children run below the kernel, in its cgroup: their limits must fit
    // under the kernel's own (a container's, a pod's).
    if !runner.is_systemd() {
        let ceilings = crate::runner::ceiling::of_this_process();
        crate::runner::ceiling::check(&settings.quota, &ceilings)?;
    }
    // Under systemd too: a scope adopts what the zygote forks (runner.rs).
    if settings.cage_zygote {
        match cage.start_zygote() {
            Ok(true) => log::info("confined launches are forked by the cage's zygote"),
            Ok(false) => {}
            Err(e) => log::warn(format!(
                "the cage's zygote did not start ({e}); confined launches execute the helper"
            )),
        }
    }
    if let Some(body) = state.body.take() {
        runner.stop_leftover(&body).await;
    }
    runner.sweep_units().await;
    spawn::sweep_leftover_groups(&home);
    start::sweep_files(&home);
    let git = repo::open(&home)?;
    if repo::remove_stale_lineage_lock(&git)? {
        log::info("removed the lock of lineage/local that a killed kernel left");
    }
    let oid = match &state.generation {
        Some(commit) => repo::commit_id(&git, &home, commit)?,
        None => repo::head_commit(&git, &home)?,
    };
    repo::ensure_lineage(&git, &home, oid)?;
    let started_at = repo::commit_of(oid);
    state.generation = Some(started_at.clone());
    state.stopped = None;
    let journal: SharedJournal = Arc::new(Mutex::new(Journal::open(&home.join(JOURNAL_PATH))?));
    // Written ahead, finished here: what the last kernel began and a kill
    // cut short is done (or answered) before anything new begins.
    let reconciled = start::reconcile_at_start(&home, &git, &mut state, &journal)?;
    if reconciled.hand_over {
        return Ok(crate::launcher::contract::EXIT_NEXT_KERNEL);
    }
    let commit = state.generation.clone().unwrap_or_else(|| started_at.clone());
    log::set_commit(&commit);
    status.set_generation(&commit);
    let carried = reconciled.counts;
    kernel_event(
        &journal,
        &commit,
        EventKind::KernelStarted,
        json!({
            "pid": std::process::id(),
            counts::CRASHES_IN_ROW: carried.crashes_in_row,
            counts::RESTARTS: carried.restarts,
            reconcile::CUT_TURN: reconciled.cut_line.as_ref().map(|l| l.seq),
        }),
    );
    if let Some(line) = &reconciled.cut_line {
        start::tell_cut_turn(&journal, &commit, line);
    }
    state.save(&home)?;
    spawn::keep_groups(&home).map_err(io("cannot start the keeper of the kernel's children"))?;
    log::info(format!("supervising {} at generation {}", home.display(), short(&commit)));
    // The journal and the owner's channel are open: lines sent from now on
    // are taken in, so the kernel counts as serving.
    status.ready();

    let mut k = Kernel {
        started_at,
        warming: None,
        warmed: None,
        model: Model::start(&settings, &home, &runner).await?,
        home,
        settings,
        state,
        journal,
        git,
        runner,
        status,
        sigterm,
        sigint,
        sighup,
        carried: Some((commit.clone(), carried)),
    };
    let (status, reason) = k.supervise().await?;
    let now = k.current();
    start::tell_cut_turn_at_end(&k.home, &k.journal, &now);
    kernel_event(
        &k.journal,
        &now,
        EventKind::KernelStopped,
        json!({"reason": reason, "status": status}),
    );
    if status != EXIT_STOPPED && status != crate::launcher::contract::EXIT_NEXT_KERNEL {
        k.state.stopped = Some(Stopped { reason: reason.clone(), status, at: now_text() });
        log::at(log::Priority::Error, format!("stopping: {reason}"));
        k.status.set(Doing::GaveUp(reason.clone()));
    } else {
        k.status.set(Doing::Stopping);
    }
    // Handing over to the next kernel is no stop of the unit: STOPPING=1
    // would have systemd stop the launcher too.
    if status != crate::launcher::contract::EXIT_NEXT_KERNEL {
        k.status.stopping();
    }
    // Nothing the kernel started outlives its clean end: the stand-in is
    // stopped and reaped, a warm-up still under way is dropped (its run is
    // killed), and whatever is still listed is killed and the list removed.
    k.model.stop().await;
    if let Some(warming) = k.warming.take() {
        if !warming.is_finished() {
            // Awaited, so that its run is dropped (its group killed) before
            // the sweep, which then finds nothing of it left running.
            warming.abort();
            let _ = warming.await;
            log::info("stopped the gate's warm-up, which the stop cut short");
        }
    }
    teneral_core::crash::point("stop.sweeping");
    spawn::sweep_groups_at_stop(&k.home);
    k.state.body = None;
    k.state.save(&k.home)?;
    Ok(status)
}

pub(crate) struct Kernel {
    /// The generation the kernel started at; the state names the current
    /// one from then on (see [`Kernel::current`]).
    started_at: Commit,
    home: PathBuf,
    settings: Settings,
    state: State,
    journal: SharedJournal,
    git: git2::Repository,
    model: Model,
    runner: Runner,
    status: Arc<Reporter>,
    /// The gate's warm-up, while it may still run ([`verdict::Warm`]).
    warming: Option<tokio::task::JoinHandle<()>>,
    /// The generation whose warm-up began and was not stopped by a
    /// mutation, if any: it is not warmed again at its next start.
    warmed: Option<Commit>,
    sigterm: Signal,
    sigint: Signal,
    sighup: Signal,
    /// The counts an earlier kernel left for the generation this one
    /// started at, taken by its first run.
    carried: Option<(Commit, RunCounts)>,
}

/// How the generation after a decision starts.
enum Next {
    /// The same generation, started again.
    Same,
    /// Another generation: promoted (on trial), or gone back to.
    Switch { to: Commit, trial: bool },
    /// The kernel ends with this status and reason.
    End(i32, String),
}

impl Kernel {
    /// The current generation: the state's, which the start set.
    fn current(&self) -> Commit {
        self.state.generation.clone().unwrap_or_else(|| self.started_at.clone())
    }

    fn windows(&self) -> Windows {
        let t = &self.settings.test.timing;
        Windows {
            ready: t.ready,
            first_reply: t.first_reply,
            backoff_unit: t.backoff_unit,
            long_run: t.long_run,
        }
    }

    /// Runs generations until asked to stop or the rules give up. Every
    /// step ends in a [`Next`], followed here and only here.
    async fn supervise(&mut self) -> Result<(i32, String), KernelError> {
        loop {
            match self.generation().await? {
                Next::End(status, reason) => return Ok((status, reason)),
                Next::Switch { to, trial } => {
                    let next_kernel = self.handover(&to, trial)?;
                    self.switch(&to, trial)?;
                    if next_kernel {
                        let why = format!("generation {} runs another kernel", short(&to));
                        return Ok((crate::launcher::contract::EXIT_NEXT_KERNEL, why));
                    }
                }
                Next::Same => {}
            }
        }
    }

    /// Builds the current generation and runs it until something other than
    /// starting it again follows.
    async fn generation(&mut self) -> Result<Next, KernelError> {
        let commit = self.current();
        start::say_if_install_differs(&self.home, &self.git, &self.journal, &commit);
        let oid = repo::commit_id(&self.git, &self.home, &commit)?;
        let live = repo::reset_live(&self.git, &self.home, oid)?;
        repo::ensure_candidate(&self.home)?;
        let mut organ_set = match self.organs(&commit, &live).await? {
            Ok(set) => set,
            Err(next) => return Ok(next),
        };
        self.status.set(Doing::Building);
        let limits = Limits::for_build(&self.settings);
        let build = generation::build(&self.runner, &self.home, &live, &commit, &limits);
        let binary = tokio::select! {
            built = build => match built {
                Ok(path) => path,
                Err(e) => {
                    kernel_event(&self.journal, &commit, EventKind::KernelNotice, json!({"text": e.to_string()}));
                    return self.fail(&commit, format!("it cannot be built: {e}"), String::new());
                }
            },
            _ = self.sigterm.recv() => return Ok(Next::End(EXIT_STOPPED, "asked to stop (SIGTERM)".into())),
            _ = self.sigint.recv() => return Ok(Next::End(EXIT_STOPPED, "asked to stop (SIGINT)".into())),
        };
        let body_key = random_key()?;
        let model_url =
            self.model.url_for(&body_key, &self.settings, &self.journal, &commit).await?;
        let can_roll_back = self.state.previous.is_some();
        // A trial is the state's, so it outlives the kernel: its due time is
        // wall clock, turned into this kernel's monotonic clock here.
        let trial = self.state.trial.as_ref().filter(|t| t.commit == commit);
        let mut life = match trial {
            Some(t) => {
                let due = t.reply_by.map(|ms| {
                    let left = ms.saturating_sub(teneral_core::state::unix_ms_now());
                    std::time::Instant::now() + Duration::from_millis(left)
                });
                Lifecycle::resume_trial(self.windows(), can_roll_back, due)
            }
            None => Lifecycle::new(self.windows(), can_roll_back),
        };
        if let Some((_, counts)) = self.carried.take_if(|(of, _)| *of == commit) {
            life = life.with_counts(counts);
        }
        for run in 1.. {
            repo::reset_live(&self.git, &self.home, oid)?;
            if run > 1 {
                organ_set = match self.organs(&commit, &live).await? {
                    Ok(set) => set,
                    Err(next) => return Ok(next),
                };
            }
            let of = RunOf {
                binary: &binary,
                commit: &commit,
                model_url: &model_url,
                body_key: &body_key,
                run,
                organs: organ_set.as_deref(),
            };
            let next = match self.one_run(of, &mut life).await? {
                RunEnd::AskedToStop => Next::End(EXIT_STOPPED, "asked to stop".into()),
                RunEnd::SentBack { to } => {
                    kernel_event(
                        &self.journal,
                        &commit,
                        EventKind::GenerationSentback,
                        json!({"from": commit, "to": to, "by": "owner"}),
                    );
                    teneral_core::crash::point("sentback.journaled");
                    Next::Switch { to, trial: false }
                }
                RunEnd::Decided { decision, requested, tail } => {
                    self.decided(&commit, decision, requested, tail).await?
                }
            };
            if !matches!(next, Next::Same) {
                return Ok(next);
            }
        }
        Ok(Next::Same)
    }

    /// What follows a decision of the rules about generation `commit`.
    async fn decided(
        &mut self,
        commit: &Commit,
        decision: Decision,
        requested: Option<(Commit, u64)>,
        tail: String,
    ) -> Result<Next, KernelError> {
        if !matches!(decision, Decision::Gate) {
            if let Some((candidate, seq)) = &requested {
                self.state.pending = None;
                answer_undecided(
                    &self.journal,
                    commit,
                    candidate,
                    Some(*seq),
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

    /// Waits `after`; true when asked to stop meanwhile.
    async fn pause(&mut self, after: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(after) => false,
            _ = self.sigterm.recv() => true,
            _ = self.sigint.recv() => true,
        }
    }
}

fn now_text() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
