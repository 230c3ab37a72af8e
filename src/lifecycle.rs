//! When to restart a generation, when to give up on it: pure rules over what
//! happened and a clock.
//!
//! The supervisor feeds [`Lifecycle`] what it sees (a start, `ready`, a
//! reply, an interrupt, an exit, a deadline passing) and does what the
//! returned [`Decision`] says. Nothing here reads a clock or does I/O, so
//! every rule is a table test below.
//!
//! The rules (the reference's, DESIGN.md section 5):
//! - a run must report ready within the ready window, or it is killed;
//! - a crash is followed by a restart that waits one backoff unit longer for
//!   each crash in a row; a reply ends the row;
//! - three crashes in a row without a reply, or more than ten restarts, and
//!   the generation has failed; the restarts are given back when a run
//!   lasted the long-run threshold before it ended;
//! - a generation on trial (just promoted, no reply yet) fails at once when
//!   it exits before ready, is not ready in time, or is silent past the
//!   first-reply window after it was ready; an interrupt gives that window
//!   anew;
//! - a failed generation is rolled back when there is one to go back to,
//!   else the supervisor stops and says why.

mod refusals;

pub use refusals::{after_refusal, AfterRefusal, GIVE_UP_AFTER};

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
}

#[derive(Debug, Clone)]
struct Run {
    started: Instant,
    ready: bool,
    /// While on trial and ready: when the first-reply window began.
    silence_since: Option<Instant>,
    /// Why the kernel killed this run, if it did.
    killed_for: Option<String>,
}

impl Lifecycle {
    /// A generation that is already established (not on trial).
    pub fn new(windows: Windows, can_roll_back: bool) -> Self {
        Self { windows, on_trial: false, can_roll_back, crashes_in_row: 0, restarts: 0, run: None }
    }

    /// A generation just promoted: on trial until its first reply.
    pub fn on_trial(windows: Windows, can_roll_back: bool) -> Self {
        Self { on_trial: true, ..Self::new(windows, can_roll_back) }
    }

    pub fn is_on_trial(&self) -> bool {
        self.on_trial
    }

    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// When the supervisor must come back with [`Input::Deadline`], if ever.
    pub fn deadline(&self) -> Option<Instant> {
        let run = self.run.as_ref()?;
        if run.killed_for.is_some() {
            return None;
        }
        if !run.ready {
            return Some(run.started + self.windows.ready);
        }
        run.silence_since.map(|since| since + self.windows.first_reply)
    }

    /// Takes in what happened at `now` and says what to do.
    pub fn on(&mut self, input: Input, now: Instant) -> Decision {
        match input {
            Input::Started => {
                self.run =
                    Some(Run { started: now, ready: false, silence_since: None, killed_for: None });
                Decision::Wait
            }
            Input::Ready => {
                let on_trial = self.on_trial;
                if let Some(run) = self.run.as_mut() {
                    run.ready = true;
                    run.silence_since = on_trial.then_some(now);
                }
                Decision::Wait
            }
            Input::Replied => {
                self.on_trial = false;
                self.crashes_in_row = 0;
                if let Some(run) = self.run.as_mut() {
                    run.silence_since = None;
                }
                Decision::Wait
            }
            Input::Interrupted => {
                if let Some(run) = self.run.as_mut() {
                    if run.silence_since.is_some() {
                        run.silence_since = Some(now);
                    }
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
        let Some(run) = self.run.as_mut() else { return Decision::Wait };
        let reason = if run.ready {
            format!(
                "no reply within {} s of becoming ready after its promotion",
                self.windows.first_reply.as_secs()
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
        if self.on_trial && (!run.ready || run.silence_since.is_some() && run.killed_for.is_some())
        {
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
mod tests {
    use super::*;
    use Decision::*;
    use Input::*;

    const W: Windows = Windows {
        ready: Duration::from_secs(60),
        first_reply: Duration::from_secs(600),
        backoff_unit: Duration::from_secs(1),
        long_run: Duration::from_secs(3600),
    };

    /// Feeds `(seconds since the start, input)` pairs and returns the last decision.
    fn run(mut life: Lifecycle, steps: &[(u64, Input)]) -> (Decision, Lifecycle) {
        let t0 = Instant::now();
        let mut last = Wait;
        for (secs, input) in steps {
            last = life.on(input.clone(), t0 + Duration::from_secs(*secs));
        }
        (last, life)
    }

    fn crash() -> Input {
        Exited { code: Some(1) }
    }

    fn starts(n: usize) -> Vec<(u64, Input)> {
        let mut steps = Vec::new();
        for i in 0..n {
            let t = i as u64 * 10;
            steps.push((t, Started));
            steps.push((t + 1, Ready));
            steps.push((t + 2, crash()));
        }
        steps
    }

    #[test]
    fn backoff_grows_by_one_unit_per_crash_in_a_row() {
        let table = [(1, Duration::from_secs(1)), (2, Duration::from_secs(2))];
        for (crashes, want) in table {
            let (d, _) = run(Lifecycle::new(W, false), &starts(crashes));
            assert!(matches!(d, Restart { after, .. } if after == want), "{crashes}: {d:?}");
        }
    }

    #[test]
    fn third_crash_in_a_row_fails() {
        let (d, _) = run(Lifecycle::new(W, false), &starts(3));
        assert!(
            matches!(&d, Stop { reason } if reason.starts_with("three crashes in a row")),
            "{d:?}"
        );
        let (d, _) = run(Lifecycle::new(W, true), &starts(3));
        assert!(matches!(&d, RollBack { reason } if reason.contains("three crashes")), "{d:?}");
    }

    #[test]
    fn a_reply_ends_the_row_but_restarts_add_up() {
        let mut steps = Vec::new();
        for i in 0..11u64 {
            let t = i * 100;
            steps.extend([(t, Started), (t + 1, Ready), (t + 2, Replied), (t + 3, crash())]);
        }
        let (d, life) = run(Lifecycle::new(W, false), &steps[..steps.len() - 4]);
        assert!(matches!(d, Restart { after, .. } if after == Duration::from_secs(1)), "{d:?}");
        assert_eq!(life.restarts(), 10);
        let (d, _) = run(Lifecycle::new(W, false), &steps);
        assert!(
            matches!(&d, Stop { reason } if reason.starts_with("more than ten restarts")),
            "{d:?}"
        );
    }

    #[test]
    fn an_hour_long_run_gives_the_restarts_back() {
        let mut steps = Vec::new();
        for i in 0..10u64 {
            let t = i * 100;
            steps.extend([(t, Started), (t + 1, Ready), (t + 2, Replied), (t + 3, crash())]);
        }
        steps.extend([(2000, Started), (2001, Ready), (2002, Replied), (2000 + 3600, crash())]);
        let (d, life) = run(Lifecycle::new(W, false), &steps);
        assert!(matches!(d, Restart { .. }), "{d:?}");
        assert_eq!(life.restarts(), 1);
    }

    #[test]
    fn not_ready_in_time_is_killed_then_counted() {
        let life = Lifecycle::new(W, false);
        assert_eq!(run(life.clone(), &[(0, Started), (59, Deadline)]).0, Wait);
        let (d, life) = run(life, &[(0, Started), (60, Deadline)]);
        assert_eq!(d, Kill { reason: "not ready within 60 s".into() });
        assert_eq!(life.deadline(), None);
        let (d, _) = run(life, &[(61, Exited { code: None })]);
        assert!(matches!(&d, Restart { reason, .. } if reason == "not ready within 60 s"), "{d:?}");
    }

    #[test]
    fn deadline_is_the_ready_window_then_none() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(W, false);
        assert_eq!(life.deadline(), None);
        life.on(Started, t0);
        assert_eq!(life.deadline(), Some(t0 + W.ready));
        life.on(Ready, t0 + Duration::from_secs(1));
        assert_eq!(life.deadline(), None);
    }

    #[test]
    fn trial_rules() {
        type Case = (&'static str, Vec<(u64, Input)>, &'static str);
        let table: [Case; 4] = [
            (
                "exit before ready",
                vec![(0, Started), (5, crash())],
                "exited with status 1 before it was ready",
            ),
            (
                "not ready in time",
                vec![(0, Started), (60, Deadline), (61, Exited { code: None })],
                "not ready within 60 s",
            ),
            (
                "silent after ready",
                vec![(0, Started), (1, Ready), (601, Deadline), (602, Exited { code: None })],
                "no reply within 600 s",
            ),
            (
                "interrupt renews the window",
                vec![
                    (0, Started),
                    (1, Ready),
                    (500, Interrupted),
                    (1100, Deadline),
                    (1101, Exited { code: None }),
                ],
                "no reply within 600 s",
            ),
        ];
        for (name, steps, want) in table {
            let (d, _) = run(Lifecycle::on_trial(W, true), &steps);
            assert!(matches!(&d, RollBack { reason } if reason.contains(want)), "{name}: {d:?}");
        }
        let (d, _) = run(
            Lifecycle::on_trial(W, true),
            &[(0, Started), (1, Ready), (500, Interrupted), (700, Deadline)],
        );
        assert_eq!(d, Wait, "the interrupt at 500 s moved the deadline to 1100 s");
    }

    #[test]
    fn a_reply_ends_the_trial() {
        let steps = [(0, Started), (1, Ready), (2, Replied), (3, crash())];
        let (d, life) = run(Lifecycle::on_trial(W, true), &steps);
        assert!(matches!(d, Restart { .. }), "{d:?}");
        assert!(!life.is_on_trial());
    }

    #[test]
    fn exit_75_after_ready_goes_to_the_gate() {
        let (d, _) = run(
            Lifecycle::new(W, false),
            &[(0, Started), (1, Ready), (2, Exited { code: Some(75) })],
        );
        assert_eq!(d, Gate);
        let (d, _) = run(Lifecycle::new(W, false), &[(0, Started), (2, Exited { code: Some(75) })]);
        assert!(matches!(d, Restart { .. }), "only a ready generation may mutate: {d:?}");
    }
}
