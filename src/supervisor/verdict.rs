//! What follows when a generation fails, when the owner sends it back, and
//! when the gate has judged what it asked for: going back one step,
//! switching generations, and the answer to every mutation request; and the
//! gate's warm-up once a body runs, which a mutation stops ([`Warm`]).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

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
use teneral_core::status::Reporter;
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
        // A mutation never waits for the warm-up: what cargo finished stays
        // in the gate's target directory, and the next start warms again.
        if self.stop_warm_up().await {
            log::info(
                "gate: stopped the warm-up of the running tree; the mutation is judged first",
            );
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

impl Kernel {
    /// Starts the gate's warm-up of generation `commit`, whose body has just
    /// started (so the warm-up never competes with the build of the body
    /// the owner waits on), unless the owner turned it off, one runs, or
    /// this generation's began and no mutation stopped it.
    pub(super) fn warm_up(&mut self, commit: &Commit) {
        let running = self.warming.as_ref().is_some_and(|w| !w.is_finished());
        if !self.settings.warm_gate || running || self.warmed.as_ref() == Some(commit) {
            return;
        }
        let warm = Warm {
            home: self.home.clone(),
            settings: self.settings.clone(),
            runner: self.runner.clone(),
            journal: Arc::clone(&self.journal),
            status: Arc::clone(&self.status),
            running: commit.clone(),
        };
        self.warmed = Some(commit.clone());
        self.warming = Some(tokio::task::spawn_local(warm.run()));
    }

    /// Stops the warm-up if it still runs: its task is dropped and awaited,
    /// so its checks' processes are killed before this returns. The
    /// generation is warmed again at its next start. Whether one ran.
    pub(super) async fn stop_warm_up(&mut self) -> bool {
        let Some(warming) = self.warming.take().filter(|w| !w.is_finished()) else {
            return false;
        };
        warming.abort();
        let _ = warming.await;
        self.warmed = None;
        self.status.set_background(None);
        true
    }
}

/// Warming the gate: once a generation's body has started, the checks of
/// the running tree run in the background at the lowest priority, the
/// body's first (a body change then reuses their compiled dependencies),
/// then the kernel's (they warm the compiler for a change outside
/// `body/`). A mutation asked for meanwhile stops it ([`Kernel::mutation`]).
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
    /// Runs the warm-up; call inside the supervisor's local set.
    async fn run(self) {
        let result = self.checks().await;
        self.status.set_background(None);
        match result {
            Ok(0) => log::info("gate: the checks of the running tree were done before"),
            Ok(n) => log::info(format!("gate: warmed, {n} checks of the running tree passed")),
            // A failure here decides nothing: a mutation's gate runs its own checks.
            Err(why) => log::info(format!("gate: warming did not pass ({why})")),
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
        let of = short(&self.running).to_owned();
        let say = |checks: &str, expected: Option<std::time::Duration>| {
            self.status.set_background(Some(background_line(&of, checks, expected)));
        };
        gate.warm(&say).await
    }
}

/// What the status says beside the main work while the gate warms up.
fn background_line(of: &str, checks: &str, expected: Option<std::time::Duration>) -> String {
    match expected {
        Some(took) => format!(
            "the gate warms up ({checks} of {of}, {}, from the last run)",
            teneral_core::status::about(took)
        ),
        None => format!("the gate warms up ({checks} of {of})"),
    }
}

#[cfg(test)]
mod warm_tests {
    use super::background_line;
    use std::time::Duration;

    #[test]
    fn the_background_line_says_what_warms_and_for_how_long() {
        let table = [
            (None, "the gate warms up (format-body, lint-body, body-tests of 0123abc)"),
            (
                Some(Duration::from_secs(41)),
                "the gate warms up (format-body, lint-body, body-tests of 0123abc, about 40 s, from the last run)",
            ),
        ];
        for (expected, want) in table {
            assert_eq!(
                background_line("0123abc", "format-body, lint-body, body-tests", expected),
                want
            );
        }
    }
}
