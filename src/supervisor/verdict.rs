//! What follows when a generation fails, when the owner sends it back, and
//! when the gate has judged what it asked for: going back one step,
//! switching generations, and the answer to every mutation request; and the
//! gate's warm-up before the first one ([`Warm`]).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tokio::task::JoinHandle;

use super::{io, Kernel, KernelError, Next, EXIT_GAVE_UP, EXIT_STOPPED};
use crate::events::{kernel_event, SharedJournal};
use crate::gate::{Gate, Verdict};
use crate::lifecycle::{after_refusal, AfterRefusal};
use crate::repo;
use crate::runner::Runner;
use crate::settings::Settings;
use teneral_core::commit::{short, Commit};
use teneral_core::journal::EventKind;
use teneral_core::state::{Refused, Trial};
use teneral_core::status::{Doing, Reporter};
use teneral_core::{back_request as back, log};

/// Tells the agent a mutation it asked for got no verdict, so it asks again.
/// `request` is the `seq` of its `mutation.requested`.
pub(super) fn answer_undecided(
    journal: &SharedJournal,
    commit: &Commit,
    candidate: &str,
    request: Option<u64>,
    why: &str,
) {
    kernel_event(
        journal,
        commit,
        EventKind::MutationRejected,
        json!({
            "candidate": candidate,
            "request": request,
            "check": "undecided",
            "undecided": true,
            "output": format!("nothing was decided about {}: {why}; ask again", short(candidate)),
        }),
    );
    teneral_core::crash::point("undecided.journaled");
}

impl Kernel {
    /// A generation failed: one step back when there is one, else stop.
    pub(super) fn fail(
        &mut self,
        commit: &Commit,
        reason: String,
        tail: String,
    ) -> Result<Next, KernelError> {
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
                    EventKind::GenerationRolledback,
                    json!({"from": commit, "to": to, "reason": reason, "stderr": tail}),
                );
                teneral_core::crash::point("rolledback.journaled");
                Ok(Next::Switch { to, trial: false })
            }
            None => {
                let text = format!(
                    "generation {} failed: {reason}\nwhat it last wrote to stderr:\n{tail}",
                    short(commit)
                );
                kernel_event(&self.journal, commit, EventKind::KernelNotice, json!({"text": text}));
                Ok(Next::End(
                    EXIT_GAVE_UP,
                    format!("generation {} failed: {reason}; nothing to go back to", short(commit)),
                ))
            }
        }
    }

    /// Makes `to` the generation, after the journal says so (the start
    /// finishes a switch a crash cut short: [`super::reconcile`]). After a
    /// promotion the one before it is kept to go back to, and `to` is on
    /// trial; after going back there is none (one step, not a history).
    pub(super) fn switch(&mut self, to: &Commit, promoted: bool) -> Result<(), KernelError> {
        let from = self.current();
        let oid = repo::commit_id(&self.git, &self.home, to)?;
        self.state.pending = None;
        self.state.previous = if promoted { Some(from) } else { None };
        self.state.generation = Some(to.clone());
        self.state.trial = promoted.then(|| Trial { commit: to.clone(), reply_by: None });
        if promoted {
            self.state.refused = None;
        }
        self.state.save(&self.home)?;
        teneral_core::crash::point("switched");
        log::set_commit(to);
        self.status.set_generation(to);
        repo::move_lineage(&self.git, &self.home, oid)?;
        teneral_core::crash::point("lineage.moved");
        Ok(())
    }

    /// Whether switching to `to` hands over to another kernel (the launcher
    /// starts it after exit 85); a promotion that brings a new kernel writes
    /// `.teneral/trial.json` first (`crate::launcher::handover`).
    pub(super) fn handover(&self, to: &Commit, promoted: bool) -> Result<bool, KernelError> {
        let from = repo::commit_id(&self.git, &self.home, &self.current())?;
        let to = repo::commit_id(&self.git, &self.home, to)?;
        crate::launcher::handover::prepare(&self.home, &self.git, from, to, promoted)
            .map_err(|e| KernelError::Io(e.to_string()))
    }

    /// The body exited 75: judge what it asked for.
    pub(super) async fn mutation(
        &mut self,
        commit: &Commit,
        requested: Option<(Commit, u64)>,
    ) -> Result<Next, KernelError> {
        let Some((candidate, request)) = requested else {
            kernel_event(
                &self.journal,
                commit,
                EventKind::MutationRejected,
                json!({"check": "request", "output": "the body exited 75 without asking for a mutation (send mutation.requested first)"}),
            );
            return Ok(Next::Same);
        };
        self.state.pending = Some(candidate.clone());
        self.state.save(&self.home)?;
        if let Some(warming) = self.warming.take().filter(|w| !w.is_finished()) {
            self.status.set(Doing::Checking {
                candidate: candidate.to_string(),
                step: "waiting for the gate's warm-up".into(),
            });
            log::info("gate: waiting for the warm-up's checks of the running kernel to end");
            tokio::select! {
                _ = warming => {}
                _ = self.sigterm.recv() => return self.stopped_while_checking(commit, &candidate, request),
                _ = self.sigint.recv() => return self.stopped_while_checking(commit, &candidate, request),
            }
        }
        let exe = std::env::current_exe().map_err(io("the kernel's own binary"))?;
        let gate = Gate {
            home: &self.home,
            repo: &self.git,
            settings: &self.settings,
            journal: &self.journal,
            running: commit,
            kernel_exe: &exe,
            runner: &self.runner,
            status: Some(&*self.status),
        };
        let verdict = tokio::select! {
            v = gate.judge(&candidate) => v,
            _ = self.sigterm.recv() => return self.stopped_while_checking(commit, &candidate, request),
            _ = self.sigint.recv() => return self.stopped_while_checking(commit, &candidate, request),
        };
        match verdict {
            Verdict::Accepted { .. } => {
                kernel_event(
                    &self.journal,
                    commit,
                    EventKind::MutationAccepted,
                    json!({"from": commit, "to": candidate, "request": request}),
                );
                teneral_core::crash::point("verdict.journaled");
                Ok(Next::Switch { to: candidate, trial: true })
            }
            Verdict::Undecided { check, output } => {
                // Not counted: the agent waits for its owner or the network.
                self.state.pending = None;
                answer_undecided(&self.journal, commit, &candidate, Some(request), &output);
                self.state.save(&self.home)?;
                log::info(format!("gate: nothing decided about {} at {check}", short(&candidate)));
                Ok(if self.pause(self.settings.test.timing.backoff_unit).await {
                    Next::End(EXIT_STOPPED, "asked to stop".into())
                } else {
                    Next::Same
                })
            }
            Verdict::Rejected { check, output } => {
                self.state.pending = None;
                // The count is journaled with the refusal, so a kill before
                // the state is saved cannot lose it (the start reads it back).
                let last = self.state.refused.as_ref().map(|r| (&r.commit, r.times));
                let (times, after) =
                    after_refusal(last, &candidate, self.settings.test.timing.backoff_unit);
                kernel_event(
                    &self.journal,
                    commit,
                    EventKind::MutationRejected,
                    json!({"candidate": candidate, "request": request, "check": check, "output": tail_of(&output, 4000), "refusals": times}),
                );
                teneral_core::crash::point("verdict.journaled");
                self.state.refused = Some(Refused { commit: candidate.clone(), times });
                self.state.save(&self.home)?;
                let wait = match after {
                    AfterRefusal::GiveUp => {
                        return Ok(Next::End(
                            EXIT_GAVE_UP,
                            format!(
                            "the same commit {} was refused {} times in a row (last at {check})",
                            short(&candidate),
                            words(times)
                        ),
                        ))
                    }
                    AfterRefusal::Retry { after } => after,
                };
                Ok(if self.pause(wait).await {
                    Next::End(EXIT_STOPPED, "asked to stop".into())
                } else {
                    Next::Same
                })
            }
        }
    }

    /// Asked to stop in the middle of a judgement: the request is answered
    /// now ("nothing decided"), so a clean stop leaves none open.
    fn stopped_while_checking(
        &mut self,
        commit: &Commit,
        candidate: &Commit,
        request: u64,
    ) -> Result<Next, KernelError> {
        self.state.pending = None;
        let why = "the kernel was asked to stop while it checked the mutation";
        answer_undecided(&self.journal, commit, candidate, Some(request), why);
        self.state.save(&self.home)?;
        Ok(Next::End(EXIT_STOPPED, "asked to stop while checking a mutation".into()))
    }

    /// The owner's request to go back, if SIGHUP brought one that may be
    /// followed; a refusal is journaled for the owner to see.
    pub(super) fn back_request(&self, commit: &Commit) -> Option<Commit> {
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
            let chosen = l.choose(Some(&to), in_git).map_err(|e| e.to_string())?;
            Commit::parse(&chosen.commit).map_err(|e| e.to_string())
        });
        match chosen {
            Ok(target) => Some(target),
            Err(why) => {
                kernel_event(
                    &self.journal,
                    commit,
                    EventKind::KernelNotice,
                    json!({"text": format!("not going back: {why}")}),
                );
                None
            }
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

/// The count of refusals a stop names, in words where it is the usual one.
fn words(n: u32) -> String {
    if n == crate::lifecycle::GIVE_UP_AFTER {
        "three".into()
    } else {
        n.to_string()
    }
}

/// Warming the gate: after a start, the kernel's own checks of the running
/// tree (its type check and tests) run in the background at the lowest
/// priority, so the agent's first mutation finds their passes kept and
/// waits only for the body's checks. A mutation asked for while they still
/// run waits for them rather than running them a second time.
///
/// What the background task needs, owned.
pub(super) struct Warm {
    pub home: PathBuf,
    pub settings: Settings,
    pub runner: Runner,
    pub journal: SharedJournal,
    pub status: Arc<Reporter>,
    /// The running generation's commit.
    pub running: Commit,
}

impl Warm {
    /// Starts warming, when the owner has not turned it off. Call inside
    /// the supervisor's local set.
    pub(super) fn start(self) -> Option<JoinHandle<()>> {
        self.settings.warm_gate.then(|| tokio::task::spawn_local(self.run()))
    }

    async fn run(self) {
        let what = format!("the gate warms up (the kernel's checks of {})", short(&self.running));
        self.status.set_background(Some(what));
        let result = self.checks().await;
        self.status.set_background(None);
        match result {
            Ok(0) => log::info("gate: the kernel's checks of the running tree were done before"),
            Ok(n) => log::info(format!("gate: warmed, {n} of the kernel's checks passed")),
            // A failure here decides nothing: the mutation's gate runs them again.
            Err(why) => log::info(format!(
                "gate: warming did not pass ({why}); the first mutation runs the kernel's checks"
            )),
        }
    }

    async fn checks(&self) -> Result<usize, String> {
        let repo = repo::open(&self.home).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let gate = Gate {
            home: &self.home,
            repo: &repo,
            settings: &self.settings,
            journal: &self.journal,
            running: &self.running,
            kernel_exe: &exe,
            runner: &self.runner,
            status: None,
        };
        gate.warm().await
    }
}
