//! One run of a body: its organs prepared and its copy of the scorecard
//! written, start it with its event channel, watch it until the lifecycle
//! rules decide, the owner sends it back, or the kernel is asked to stop.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::sync::mpsc;

use super::verdict::answer_undecided;
use super::{Kernel, KernelError, Next, EXIT_GAVE_UP};
use crate::events::{self, kernel_event, Channel, Seen};
use crate::generation::{self, Start};
use crate::lifecycle::{Decision, Input, Lifecycle};
use crate::runner::Limits;
use crate::{organs, spawn};
use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;
use teneral_core::scorecard::{self, SCORECARD_PATH};
use teneral_core::state::{unix_ms_now, BodyProcess};
use teneral_core::status::Doing;
use teneral_core::{fsutil, log};

mod rest;

/// How one run ended.
pub enum RunEnd {
    /// The rules decided; `requested` is the mutation the body asked for in
    /// this run, if any, with its `seq`; `tail` is the end of its stderr.
    Decided { decision: Decision, requested: Option<(Commit, u64)>, tail: String },
    /// SIGTERM or SIGINT: the body is stopped, the kernel ends.
    AskedToStop,
    /// The owner asked to go back to `to` (SIGHUP with a request); the body is stopped.
    SentBack { to: Commit },
}

/// What the run needs to start a body.
pub struct RunOf<'a> {
    pub binary: &'a Path,
    pub commit: &'a Commit,
    pub model_url: &'a str,
    pub body_key: &'a str,
    pub run: u32,
    /// The directory for `TENERAL_ORGANS`, when the commit pins organs.
    pub organs: Option<&'a Path>,
}

impl Kernel {
    /// Starts the body once and watches it.
    pub(super) async fn one_run(
        &mut self,
        of: RunOf<'_>,
        life: &mut Lifecycle,
    ) -> Result<RunEnd, super::KernelError> {
        let commit = of.commit;
        keep_scorecard(&self.home).await;
        crate::evals::keep_own_results(&self.home, commit);
        let socket = events::socket_path(&self.home, commit, &of.run.to_string())
            .map_err(super::io("the event socket"))?;
        let listener = events::bind(&socket).map_err(super::io("the event socket"))?;
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let channel = Channel {
            home: self.home.clone(),
            commit: commit.clone(),
            journal: Arc::clone(&self.journal),
            seen: seen_tx,
        };
        let admit = events::Admit::new();
        let server = tokio::spawn(channel.serve_admitting(listener, admit.clone()));
        let start = Start {
            home: &self.home,
            commit,
            events: &socket,
            model_url: of.model_url,
            body_key: of.body_key,
            settings: &self.settings,
            clock: true,
            organs: of.organs,
        };
        self.status.set(Doing::StartingBody);
        let limits = Limits::for_body(&self.settings);
        let mut body = generation::start(&self.runner, of.binary, &start, &limits).await?;
        let pid = body.pid().unwrap_or_default();
        let start_time = spawn::process_start_time(pid).unwrap_or_default();
        let unit = body.is_unit().then(|| body.unit().to_owned());
        // Only now is the body known: until here the channel admits no one.
        if let Some(pid) = body.pid() {
            admit.set_body(pid, unit.as_deref());
        }
        self.state.body = Some(BodyProcess { pid, start_time, unit: unit.clone() });
        self.state.save(&self.home)?;
        teneral_core::crash::point("body.recorded");
        let mut started = json!({"pid": pid, "events": socket.to_string_lossy()});
        if let Some(unit) = &unit {
            started["unit"] = json!(unit);
        }
        kernel_event(&self.journal, commit, EventKind::GenerationStarted, started);
        life.on(Input::Started, Instant::now());
        // The body is built and started: the gate's warm-up may take the cores.
        self.warm_up(commit);
        // The start is behind: what only it used goes back to Linux.
        rest::let_go();

        let grace = self.settings.test.timing.stop_grace;
        let mut requested = None;
        let mut kept_due = life.reply_due();
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
                    if let Some(doing) = event.doing() { self.status.set(doing); }
                    self.see(event, commit, life, &mut requested)?;
                    self.keep_trial(life, &mut kept_due)?;
                }
                ended = body.wait() => {
                    // Events the body sent before it ended count first.
                    while let Ok(event) = seen.try_recv() {
                        self.see(event, commit, life, &mut requested)?;
                    }
                    self.keep_trial(life, &mut kept_due)?;
                    let exit = ended.exit;
                    let code = match exit { spawn::Exit::Code(c) => Some(c), spawn::Exit::Signal(_) => None };
                    let decision = life.on(Input::Exited { code }, Instant::now());
                    // Journaled with the counts its decision left, before it is acted on.
                    let counts = life.counts();
                    kernel_event(&self.journal, commit, EventKind::GenerationExited, json!({
                        "status": exit.to_string(), "result": ended.result,
                        super::counts::CRASHES_IN_ROW: counts.crashes_in_row,
                        super::counts::RESTARTS: counts.restarts,
                    }));
                    teneral_core::crash::point("exited.journaled");
                    // A cage step that failed says which, before the body's own words.
                    let cage = ended.cage_step().map(|d| format!("{d}\n")).unwrap_or_default();
                    break RunEnd::Decided { decision, requested: requested.take(), tail: format!("{cage}{}", body.stderr_tail()) };
                }
                () = sleep => {
                    if let Decision::Kill { reason } = life.on(Input::Deadline, Instant::now()) {
                        log::info(format!("stopping the body: {reason}"));
                        body.signal(rustix::process::Signal::KILL).await;
                    }
                }
                _ = self.sigterm.recv() => { self.asked_to_stop(); body.stop(grace).await; break RunEnd::AskedToStop; }
                _ = self.sigint.recv() => { self.asked_to_stop(); body.stop(grace).await; break RunEnd::AskedToStop; }
                _ = self.sighup.recv() => {
                    if let Some(to) = self.back_request(commit) {
                        body.stop(grace).await;
                        break RunEnd::SentBack { to };
                    }
                }
            }
        };
        server.abort();
        if std::fs::remove_file(&socket).is_ok() {
            teneral_core::crash::point("socket.removed");
        }
        if matches!(end, RunEnd::AskedToStop | RunEnd::SentBack { .. }) {
            if let Some((candidate, seq)) = requested.take() {
                self.state.pending = None;
                let why = "the body was stopped before it handed the commit over";
                answer_undecided(&self.journal, commit, &candidate, Some(seq), why);
            }
        }
        self.state.body = None;
        self.state.save(&self.home)?;
        Ok(end)
    }

    /// Feeds what the channel saw into the rules. A mutation request is
    /// kept in the state at once (the journal already holds it); one that
    /// replaces another still unanswered answers that one.
    fn see(
        &mut self,
        event: Seen,
        commit: &Commit,
        life: &mut Lifecycle,
        requested: &mut Option<(Commit, u64)>,
    ) -> Result<(), super::KernelError> {
        let input = match event {
            Seen::Ready => Input::Ready,
            Seen::Replied => Input::Replied,
            Seen::Interrupted => Input::Interrupted,
            Seen::MutationRequested { candidate, seq } => {
                if let Some((before, seq)) = requested.take() {
                    let why = "the body asked for another commit after it";
                    answer_undecided(&self.journal, commit, &before, Some(seq), why);
                }
                self.state.pending = Some(candidate.clone());
                *requested = Some((candidate, seq));
                self.state.save(&self.home)?;
                teneral_core::crash::point("pending.saved");
                return Ok(());
            }
            Seen::OfferRequested { name, commit: offered, seq } => {
                let limits = Limits::for_check(&self.settings);
                let kernel = (self.home.as_path(), &self.journal, &self.runner, limits);
                crate::offer::spawn_answer(kernel, commit, seq, name, offered);
                return Ok(());
            }
            Seen::OwnerLine | Seen::TurnEnded | Seen::Thinking | Seen::Tool(_) => return Ok(()),
        };
        life.on(input, Instant::now());
        Ok(())
    }

    /// Keeps the trial's end on disk: when its first reply is due (wall
    /// clock, so a restart keeps it), and that it is over after a reply.
    fn keep_trial(
        &mut self,
        life: &Lifecycle,
        kept: &mut Option<Instant>,
    ) -> Result<(), super::KernelError> {
        let Some(trial) = self.state.trial.as_mut() else { return Ok(()) };
        if !life.is_on_trial() {
            self.state.trial = None;
            self.state.save(&self.home)?;
            teneral_core::crash::point("trial.ended");
            return Ok(());
        }
        let due = life.reply_due();
        if due == *kept {
            return Ok(());
        }
        *kept = due;
        trial.reply_by = due.map(|due| {
            let left = due.saturating_duration_since(Instant::now());
            unix_ms_now() + left.as_millis() as u64
        });
        self.state.save(&self.home)?;
        teneral_core::crash::point("trial.saved");
        Ok(())
    }
}

impl Kernel {
    /// Says, before the body is stopped, that the kernel is on its way out.
    fn asked_to_stop(&self) {
        self.status.set(Doing::Stopping);
        self.status.stopping();
    }

    /// The organ set of the generation at `live`, prepared before each start
    /// (a tree that went missing is unpacked again from its archive). A
    /// missing archive stops the kernel without going back: the install lost
    /// a file and the generation is sound. Any other organ error fails the
    /// generation. `Ok(Err(next))` says what follows instead of a start.
    pub(super) async fn organs(
        &mut self,
        commit: &Commit,
        live: &Path,
    ) -> Result<Result<Option<PathBuf>, Next>, KernelError> {
        let program = std::env::current_exe()
            .map_err(|e| KernelError::Io(format!("the kernel's own binary: {e}")))?;
        let mut unpacker = organs::Unpacker::new(&self.runner, &program);
        unpacker.stop_timeout = self.settings.test.timing.stop_grace;
        let prepared = organs::prepare(&self.home, live, &unpacker).await;
        let e = match prepared {
            Ok(set) => return Ok(Ok(set)),
            Err(e) => e,
        };
        kernel_event(
            &self.journal,
            commit,
            EventKind::KernelNotice,
            json!({"text": e.to_string()}),
        );
        if e.archive_missing() {
            return Ok(Err(Next::End(EXIT_GAVE_UP, format!("{e}; then start the kernel again"))));
        }
        Ok(Err(self.fail(commit, format!("its organs cannot be prepared: {e}"), String::new())?))
    }
}

/// The copy of the scorecard a body may read: `memory/scorecard.json`,
/// written by the kernel before each start of a body, from the kernel's own
/// journal (`teneral_core::scorecard`), and held read-only in the
/// generation's cage, so the figures an agent argues from are the kernel's.
///
/// Counts the journal and writes the copy; a failure is logged and the body
/// starts anyway (with the copy it had, or none).
async fn keep_scorecard(home: &Path) {
    let home = home.to_owned();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let all = scorecard::of_individual(&home, None)?;
        let text = serde_json::to_string_pretty(&scorecard::document(&all))
            .map_err(std::io::Error::other)?;
        fsutil::write_atomic(&home.join(SCORECARD_PATH), text.as_bytes())
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log::warn(format!("cannot write {SCORECARD_PATH} for the body: {e}")),
        Err(e) => log::warn(format!("cannot write {SCORECARD_PATH} for the body: {e}")),
    }
}
