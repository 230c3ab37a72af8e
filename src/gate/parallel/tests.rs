use super::*;
use crate::runner::{Cage, Limits};
use crate::spawn::{self, Exit, Spec};

#[test]
fn the_rules_of_side_by_side_checks() {
    // (what, cut, live, to stop)
    let stops: [(&str, usize, &[usize], &[usize]); 4] = [
        ("none failed", 3, &[0, 1, 2], &[]),
        ("the first failed: stop the rest", 0, &[1, 2], &[1, 2]),
        ("a middle one failed: those before run on", 1, &[0, 2], &[2]),
        ("the last failed", 2, &[0, 1], &[]),
    ];
    for (what, cut, live, want) in stops {
        assert_eq!(to_stop(cut, live), want, "{what}");
    }
    // (what, passed, reported)
    type Report<'a> = (&'a str, &'a [Option<bool>], Option<usize>);
    let reports: [Report; 5] = [
        ("all passed", &[Some(true), Some(true)], None),
        ("one failed", &[Some(true), Some(false)], Some(1)),
        ("two failed: the first in plan order", &[Some(false), Some(false)], Some(0)),
        ("the later ones stopped", &[Some(true), Some(false), None], Some(1)),
        ("nothing ran", &[], None),
    ];
    for (what, passed, want) in reports {
        assert_eq!(first_failure(passed), want, "{what}");
    }
}

/// A job of `script` in `lane`.
fn sh_in(script: &str, lane: usize) -> Job {
    let spec = Spec::new("/bin/sh", "/").arg("-c").arg(script);
    let limits = Limits::none(Duration::from_secs(2));
    let unit = "teneral-gate-x-check.service".into();
    Job { unit, launch: Launch::new(spec, limits), lane }
}

#[test]
fn side_by_side_the_first_failure_in_plan_order_is_reported_and_later_checks_are_stopped() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let dir = tempfile::tempdir().expect("a temp dir");
        let mark = dir.path().join("still-running");
        let jobs = vec![
            // Fails last: still the one reported, being first in plan order.
            sh_in("sleep 1; echo first; exit 3", 0),
            // Fails at once, while the first still runs.
            sh_in("echo second; exit 4", 1),
            // Would run for ten minutes unless stopped.
            sh_in(&format!("sleep 600; touch {}", mark.display()), 2),
            // Waits for the one before it in its lane: never started.
            sh_in(&format!("touch {}", mark.display()), 2),
        ];
        let began = Instant::now();
        let mut ends: Vec<Option<(Exit, String)>> = vec![None; jobs.len()];
        let mut order = Vec::new();
        let stopped = run_all(&Runner::direct(Cage::Off), jobs, Duration::from_secs(2), |i, e| {
            let (ended, running, _) = e.expect("sh starts");
            ends[i] = Some((ended.exit, running.output_tail()));
            order.push(i);
            ended.exit.success()
        })
        .await;
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "stopped promptly: {:?}",
            began.elapsed()
        );
        assert_eq!(order, [1, 0], "the second ended first, the first was left to end");
        assert_eq!(stopped, [2, 3], "the checks after the failure were stopped");
        let passed: Vec<Option<bool>> =
            ends.iter().map(|e| e.as_ref().map(|(exit, _)| exit.success())).collect();
        assert_eq!(first_failure(&passed), Some(0));
        assert_eq!(ends[0], Some((Exit::Code(3), "first".into())));
        assert_eq!(ends[1], Some((Exit::Code(4), "second".into())));
        assert!(!mark.exists());
        let leftover = processes_naming(&mark.to_string_lossy());
        assert!(leftover.is_empty(), "no stopped check lives on: {leftover:?}");
    });
}

#[test]
fn side_by_side_a_check_that_cannot_start_refuses_without_starting_the_rest() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let missing = Spec::new("/nonexistent/cargo", "/");
        let jobs = vec![
            sh_in("exit 0", 0),
            Job {
                unit: "teneral-gate-x-missing.service".into(),
                launch: Launch::new(missing, Limits::none(Duration::from_secs(2))),
                lane: 1,
            },
            sh_in("exec sleep 600", 2),
        ];
        let mut why = String::new();
        let stopped =
            run_all(&Runner::direct(Cage::Off), jobs, Duration::from_secs(2), |i, e| match e {
                Ok((ended, ..)) => ended.exit.success(),
                Err(e) => {
                    why = format!("{i}: {e}");
                    false
                }
            })
            .await;
        assert_eq!(stopped, [2]);
        assert!(why.starts_with("1: "), "{why}");
    });
}

/// The command lines of the processes that name `what`.
fn processes_naming(what: &str) -> Vec<String> {
    let procs = std::fs::read_dir("/proc").expect("/proc can be read");
    procs
        .filter_map(|p| std::fs::read(p.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(what))
        .collect()
}

#[test]
fn the_jobs_of_one_lane_run_one_after_the_other_in_plan_order() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let dir = tempfile::tempdir().expect("a temp dir");
        let log = dir.path().join("log");
        let say = |what: &str, lane| {
            let log = log.display();
            sh_in(&format!("echo {what}-start >> {log}; sleep 0.3; echo {what}-end >> {log}"), lane)
        };
        let jobs = vec![say("a", 0), say("b", 1), say("c", 0)];
        let mut order = Vec::new();
        let stopped = run_all(&Runner::direct(Cage::Off), jobs, Duration::from_secs(2), |i, e| {
            order.push(i);
            e.is_ok_and(|(ended, ..)| ended.exit.success())
        })
        .await;
        assert!(stopped.is_empty());
        let log = std::fs::read_to_string(&log).expect("the jobs wrote their log");
        let at = |line: &str| log.lines().position(|l| l == line).expect(line);
        assert!(at("a-end") < at("c-start"), "one lane, one after the other:\n{log}");
        assert!(at("b-start") < at("a-end"), "two lanes, side by side:\n{log}");
        assert_eq!(order.last(), Some(&2));
    });
}
