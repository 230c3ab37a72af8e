//! The lifecycle rules, one table at a time.
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
    assert!(matches!(&d, Stop { reason } if reason.starts_with("three crashes in a row")), "{d:?}");
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
    assert!(matches!(&d, Stop { reason } if reason.starts_with("more than ten restarts")), "{d:?}");
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
fn a_resumed_trial_keeps_its_due_time() {
    let t0 = Instant::now();
    let due = t0 + Duration::from_secs(30);
    type Case = (&'static str, Option<Instant>, Vec<(u64, Input)>, Option<&'static str>);
    let table: [Case; 4] = [
        (
            "ready, silent past the kept due time",
            Some(due),
            vec![(0, Started), (1, Ready), (30, Deadline), (31, Exited { code: None })],
            Some("no reply within 600 s"),
        ),
        (
            "not ready before the kept due time",
            Some(due),
            vec![(0, Started), (30, Deadline), (31, Exited { code: None })],
            Some("not ready again before its trial's first reply was due"),
        ),
        ("a reply in time ends it", Some(due), vec![(0, Started), (1, Ready), (2, Replied)], None),
        (
            "never ready before: a fresh window",
            None,
            vec![(0, Started), (1, Ready), (30, Deadline)],
            None,
        ),
    ];
    for (name, due, steps, want) in table {
        let mut life = Lifecycle::resume_trial(W, true, due);
        let mut last = Wait;
        for (secs, input) in steps {
            last = life.on(input, t0 + Duration::from_secs(secs));
        }
        match want {
            Some(w) => assert!(
                matches!(&last, RollBack { reason } if reason.contains(w)),
                "{name}: {last:?}"
            ),
            None => assert_eq!(last, Wait, "{name}"),
        }
    }
    let mut life = Lifecycle::on_trial(W, true);
    life.on(Started, t0);
    life.on(Ready, t0 + Duration::from_secs(2));
    assert_eq!(life.reply_due(), Some(t0 + Duration::from_secs(602)));
    life.on(Replied, t0 + Duration::from_secs(3));
    assert_eq!(life.reply_due(), None, "the trial is over");
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
    let (d, _) =
        run(Lifecycle::new(W, false), &[(0, Started), (1, Ready), (2, Exited { code: Some(75) })]);
    assert_eq!(d, Gate);
    let (d, _) = run(Lifecycle::new(W, false), &[(0, Started), (2, Exited { code: Some(75) })]);
    assert!(matches!(d, Restart { .. }), "only a ready generation may mutate: {d:?}");
}
