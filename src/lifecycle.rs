//! When to restart a generation, when to give up on it: pure rules over what
//! happened and a clock.
//!
//! The supervisor feeds [`Lifecycle`] what it sees (a start, `ready`, a
//! reply, an interrupt, an exit, a deadline passing) and does what the
//! returned [`Decision`] says. Nothing here reads a clock or does I/O, so
//! every rule is a table test below.
//!
//! The rules:
//! - a run must report ready within the ready window, or it is killed;
//! - a crash is followed by a restart that waits one backoff unit longer for
//!   each crash in a row; a reply ends the row;
//! - three crashes in a row without a reply, or more than ten restarts, and
//!   the generation has failed; the restarts are given back when a run
//!   lasted the long-run threshold before it ended;
//! - a generation on trial (just promoted, no reply yet) fails at once when
//!   it exits before ready, is not ready in time, or is silent past the
//!   first-reply window after it was first ready; an interrupt gives that
//!   window anew. The window's end ([`Lifecycle::reply_due`]) belongs to the
//!   trial, not to one run: the supervisor keeps it on disk, and a trial
//!   resumed after a restart ([`Lifecycle::resume_trial`]) keeps its end;
//! - a failed generation is rolled back when there is one to go back to,
//!   else the supervisor stops and says why.

mod refusals;

pub use refusals::{after_refusal, journaled_row, AfterRefusal, GIVE_UP_AFTER};

use std::time::{Duration, Instant};

/// The windows the rules use (Settings gives them; tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub ready: Duration,
    pub first_reply: Duration,
    pub backoff_unit: Duration,
    pub long_run: Duration,
}

impl Default for Windows {
    fn default() -> Self {
        Self {
            ready: Duration::from_secs(60),
            first_reply: Duration::from_secs(600),
            backoff_unit: Duration::from_secs(1),
            long_run: Duration::from_secs(3600),
        }
    }
}

/// What the supervisor saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The body process was started.
    Started,
    /// It journaled `generation.ready`.
    Ready,
    /// It journaled a reply to someone.
    Replied,
    /// The owner interrupted a turn.
    Interrupted,
    /// It ended. `code` is its exit status, `None` for a signal.
    Exited { code: Option<i32> },
    /// The deadline from [`Lifecycle::deadline`] passed.
    Deadline,
}

/// What the supervisor must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing; go on watching.
    Wait,
    /// Kill the running body; its exit will follow as `Exited`.
    Kill { reason: String },
    /// Start the same generation again after `after`.
    Restart { after: Duration, reason: String },
    /// The body asked for a mutation (exit 75): the gate decides.
    Gate,
    /// The generation failed; go back to the one before it.
    RollBack { reason: String },
    /// The generation failed and there is nothing to go back to.
    Stop { reason: String },
}

/// Exit status a body uses to ask for a mutation.
pub const EXIT_MUTATE: i32 = 75;

/// The counts the rules read, carried across a restart of the kernel: the
/// crashes since the last reply and the restarts since the last long run.
/// Each `generation.exited` journals them as they stand after its decision
/// and each `kernel.started` as they stand when it starts, so a kill never
/// resets them (`supervisor::counts` rebuilds them from the journal).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCounts {
    pub crashes_in_row: u32,
    pub restarts: u32,
}

/// The state of one generation under supervision.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    windows: Windows,
    /// Promoted and not yet replied: the trial rules apply.
    on_trial: bool,
    can_roll_back: bool,
    crashes_in_row: u32,
    restarts: u32,
    run: Option<Run>,
    /// On trial and ready once: when the first reply is due.
    reply_due: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Run {
    started: Instant,
    ready: bool,
    /// Why the kernel killed this run, if it did.
    killed_for: Option<String>,
}

impl Lifecycle {
    /// A generation that is already established (not on trial).
    pub fn new(windows: Windows, can_roll_back: bool) -> Self {
        Self {
            windows,
            on_trial: false,
            can_roll_back,
            crashes_in_row: 0,
            restarts: 0,
            run: None,
            reply_due: None,
        }
    }

    /// A generation just promoted: on trial until its first reply.
    pub fn on_trial(windows: Windows, can_roll_back: bool) -> Self {
        Self { on_trial: true, ..Self::new(windows, can_roll_back) }
    }

    /// A trial that began before a restart of the kernel: its first reply
    /// is due at `reply_due` when it was ever ready (a time already past
    /// fails the generation at its next deadline).
    pub fn resume_trial(windows: Windows, can_roll_back: bool, reply_due: Option<Instant>) -> Self {
        Self { reply_due, ..Self::on_trial(windows, can_roll_back) }
    }

    /// While on trial: when its first reply is due, once it was ready.
    pub fn reply_due(&self) -> Option<Instant> {
        self.reply_due.filter(|_| self.on_trial)
    }

    pub fn is_on_trial(&self) -> bool {
        self.on_trial
    }

    #[cfg(test)]
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// The counts as they stand, to journal.
    pub fn counts(&self) -> RunCounts {
        RunCounts { crashes_in_row: self.crashes_in_row, restarts: self.restarts }
    }

    /// Takes up the counts an earlier kernel left for this generation.
    pub fn with_counts(self, counts: RunCounts) -> Self {
        Self { crashes_in_row: counts.crashes_in_row, restarts: counts.restarts, ..self }
    }

    /// When the supervisor must come back with [`Input::Deadline`], if ever.
    pub fn deadline(&self) -> Option<Instant> {
        let run = self.run.as_ref()?;
        if run.killed_for.is_some() {
            return None;
        }
        let due = self.reply_due();
        if !run.ready {
            let ready_by = run.started + self.windows.ready;
            return Some(due.map_or(ready_by, |due| due.min(ready_by)));
        }
        due
    }

    /// Takes in what happened at `now` and says what to do.
    pub fn on(&mut self, input: Input, now: Instant) -> Decision {
        match input {
            Input::Started => {
                self.run = Some(Run { started: now, ready: false, killed_for: None });
                Decision::Wait
            }
            Input::Ready => {
                if let Some(run) = self.run.as_mut() {
                    run.ready = true;
                    if self.on_trial && self.reply_due.is_none() {
                        self.reply_due = Some(now + self.windows.first_reply);
                    }
                }
                Decision::Wait
            }
            Input::Replied => {
                self.on_trial = false;
                self.reply_due = None;
                self.crashes_in_row = 0;
                Decision::Wait
            }
            Input::Interrupted => {
                if self.run.as_ref().is_some_and(|r| r.ready) && self.reply_due().is_some() {
                    self.reply_due = Some(now + self.windows.first_reply);
                }
                Decision::Wait
            }
            Input::Deadline => self.deadline_passed(now),
            Input::Exited { code } => self.exited(code, now),
        }
    }

    fn deadline_passed(&mut self, now: Instant) -> Decision {
        let Some(deadline) = self.deadline() else { return Decision::Wait };
        if now < deadline {
            return Decision::Wait;
        }
        let ready_secs = self.windows.ready.as_secs();
        let reply_secs = self.windows.first_reply.as_secs();
        let due = self.reply_due();
        let Some(run) = self.run.as_mut() else { return Decision::Wait };
        let reason = if run.ready {
            format!("no reply within {reply_secs} s of becoming ready after its promotion")
        } else if due.is_some_and(|due| due <= now && due < run.started + self.windows.ready) {
            format!(
                "not ready again before its trial's first reply was due ({reply_secs} s after \
                 it was first ready)"
            )
        } else {
            format!("not ready within {ready_secs} s")
        };
        run.killed_for = Some(reason.clone());
        Decision::Kill { reason }
    }

    fn exited(&mut self, code: Option<i32>, now: Instant) -> Decision {
        let Some(run) = self.run.take() else { return Decision::Wait };
        if code == Some(EXIT_MUTATE) && run.ready && run.killed_for.is_none() {
            return Decision::Gate;
        }
        let what = match (&run.killed_for, code) {
            (Some(reason), _) => reason.clone(),
            (None, Some(c)) if !run.ready => format!("exited with status {c} before it was ready"),
            (None, Some(c)) => format!("exited with status {c}"),
            (None, None) if !run.ready => "was killed by a signal before it was ready".to_owned(),
            (None, None) => "was killed by a signal".to_owned(),
        };
        if self.on_trial && (!run.ready || run.killed_for.is_some()) {
            return self.fail(format!("the new generation {what}"));
        }
        if now.duration_since(run.started) >= self.windows.long_run {
            self.restarts = 0;
        }
        self.crashes_in_row += 1;
        self.restarts += 1;
        if self.crashes_in_row >= 3 {
            return self.fail(format!("three crashes in a row without a reply; the last {what}"));
        }
        if self.restarts > 10 {
            return self.fail(format!("more than ten restarts; the last {what}"));
        }
        Decision::Restart { after: self.windows.backoff_unit * self.crashes_in_row, reason: what }
    }

    fn fail(&self, reason: String) -> Decision {
        if self.can_roll_back {
            Decision::RollBack { reason }
        } else {
            Decision::Stop { reason }
        }
    }
}

#[cfg(test)]
mod tests;
