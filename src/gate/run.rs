//! Running what the gate planned: the checks side by side
//! ([`super::parallel`]) and, beside them, the candidate's release build,
//! each pass kept in the memo and each step journaled in plan order; then
//! the smoke run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::checks::{self, Outcome};
use super::memo::Memo;
use super::parallel::{self, Job};
use super::plan::{PlannedCheck, Reads};
use super::{build, reject, smoke, Gate, Ground, Step, Verdict};
use crate::commit::short;
use crate::commit::Commit;
use crate::log;
use crate::runner::Limits;

impl Gate<'_> {
    /// Runs the checks of `planned` that no kept pass covers, side by side,
    /// each pass kept in the memo; the first failure in plan order refuses
    /// and stops the checks after it. `judging` a candidate (not warming),
    /// each step is journaled and said, and the body's release build runs
    /// beside the checks, last in plan order; returns how long it took.
    pub(super) async fn run_planned(
        &self,
        candidate: &Commit,
        checkout: &Path,
        ground: &Ground,
        planned: &[PlannedCheck],
        judging: bool,
    ) -> Result<Option<f64>, Verdict> {
        let to_run: Vec<usize> = (0..planned.len()).filter(|&i| !planned[i].reused).collect();
        let reads = |tree| to_run.iter().any(|&i| planned[i].reads == tree);
        self.fetch(
            candidate,
            checkout,
            ground,
            reads(Reads::Kernel),
            reads(Reads::Body) || judging,
        )
        .await?;
        let names: Vec<&str> = to_run.iter().map(|&i| planned[i].name).collect();
        if !names.is_empty() {
            log::info(format!("gate: {} of {}", names.join(", "), short(candidate)));
            if judging {
                self.doing(candidate, &names.join(", "));
            }
        }
        let mut jobs: Vec<Job> = to_run
            .iter()
            .map(|&i| {
                let check = &planned[i];
                // The short link the kernel's tests make their sockets through
                // (TENERAL_SOCKET_DIR) must exist in the check's new root too.
                let mut writable = vec![ground.target.clone()];
                writable.extend(
                    check
                        .env
                        .iter()
                        .filter(|(k, _)| k == crate::events::SOCKET_DIR_VAR)
                        .map(|(_, v)| PathBuf::from(v)),
                );
                let (unit, launch) =
                    checks::launch(candidate, check, &ground.env, checkout, &writable);
                Job { unit, launch, lane: check.lane as usize }
            })
            .collect();
        let build_limits = Limits::for_build(self.settings);
        let (env, target, caged) = (&ground.env, &ground.target, self.runner.caged());
        jobs.extend(
            judging
                .then(|| {
                    build::job(self.home, checkout, candidate, env, target, build_limits, caged)
                })
                .flatten(),
        );
        let mut built: Option<(Result<(), String>, f64)> = None;
        let mut outcomes: Vec<Option<Outcome>> = vec![None; planned.len()];
        let mut said = 0;
        let mut memo = Memo::load(self.home);
        let grace = ground.limits.stop_timeout;
        parallel::run_all(self.runner, jobs, grace, |job, ending| {
            let Some(&i) = to_run.get(job) else {
                let end = match ending {
                    Ok((ended, running, seconds)) => {
                        (build::ended(candidate, ended, running), seconds)
                    }
                    Err(e) => (Err(format!("cannot start cargo to build the body: {e}")), 0.0),
                };
                let passed = end.0.is_ok();
                built = Some(end);
                return passed;
            };
            let outcome = match ending {
                Ok((ended, running, seconds)) => {
                    checks::outcome(&planned[i], ended, running, seconds)
                }
                Err(e) => {
                    Outcome::Failed { seconds: 0.0, output: format!("cannot start cargo: {e}") }
                }
            };
            let passed = outcome.passed();
            if passed {
                memo.record(planned[i].memo_key.clone());
            }
            outcomes[i] = Some(outcome);
            if judging {
                self.say_in_order(candidate, planned, &outcomes, &mut said);
            }
            passed
        })
        .await;
        let passed: Vec<Option<bool>> =
            outcomes.iter().map(|o| o.as_ref().map(Outcome::passed)).collect();
        if let Some((i, Outcome::Failed { output, .. } | Outcome::OverTime { output, .. })) =
            parallel::first_failure(&passed).and_then(|i| Some((i, outcomes[i].take()?)))
        {
            return Err(reject(planned[i].name, output));
        }
        match built {
            Some((Err(why), seconds)) => {
                self.step(candidate, "smoke", Step::Failed, Duration::from_secs_f64(seconds));
                Err(reject("smoke", why))
            }
            Some((Ok(()), seconds)) => Ok(Some(seconds)),
            None => Ok(None),
        }
    }

    /// Fetches the crates of the kernel's and the body's lockfiles, as
    /// needed, side by side, outside the cage (a check inside runs
    /// `--offline`).
    async fn fetch(
        &self,
        candidate: &Commit,
        checkout: &Path,
        ground: &Ground,
        kernel: bool,
        body: bool,
    ) -> Result<(), Verdict> {
        if !self.runner.caged() {
            return Ok(());
        }
        let body_dir = checkout.join("body");
        let one = |needed: bool, dir: &Path, name: &str| {
            let unit = self.unit(candidate, name);
            let dir = dir.to_owned();
            async move {
                if !needed {
                    return Ok(());
                }
                checks::fetch(self.runner, &unit, &dir, &ground.env, ground.limits).await
            }
        };
        let (k, b) =
            tokio::join!(one(kernel, checkout, "fetch-kernel"), one(body, &body_dir, "fetch-body"));
        k.and(b).map_err(|why| reject("fetch", why))
    }

    /// Journals the steps of `planned` from `said` on whose outcome is known,
    /// in plan order, up to and including the first failure.
    fn say_in_order(
        &self,
        candidate: &Commit,
        planned: &[PlannedCheck],
        outcomes: &[Option<Outcome>],
        said: &mut usize,
    ) {
        while let Some(check) = planned.get(*said) {
            let secs = Duration::from_secs_f64;
            match &outcomes[*said] {
                _ if check.reused => self.step(candidate, check.name, Step::Reused, Duration::ZERO),
                Some(Outcome::Passed { took }) => {
                    let mut extra = vec![];
                    extra.extend(took.compile.map(|s| ("compile_seconds", s)));
                    extra.extend(took.tests.map(|s| ("tests_seconds", s)));
                    self.step_with(candidate, check.name, Step::Passed, secs(took.seconds), &extra);
                }
                Some(failed) => {
                    self.step(candidate, check.name, Step::Failed, secs(failed.seconds()));
                    *said = planned.len();
                    return;
                }
                None => return,
            }
            *said += 1;
        }
    }

    /// Keeps the candidate's body, built beside the checks in
    /// `build_seconds` (`None`: it was kept before), then lets go of the
    /// gate's target directory (`lock`) and runs the body once on a
    /// throwaway individual.
    pub(super) async fn smoke(
        &self,
        candidate: &Commit,
        checkout: &Path,
        ground: &Ground,
        organs: Option<&Path>,
        (build_seconds, lock): (Option<f64>, std::fs::File),
    ) -> Result<Verdict, Verdict> {
        let started = Instant::now();
        self.doing(candidate, "smoke");
        let failed = |why: String| {
            self.step(candidate, "smoke", Step::Failed, started.elapsed());
            reject("smoke", why)
        };
        let binary = build::keep(self.home, candidate, &ground.target).map_err(failed)?;
        drop(lock);
        let limit = match self.settings.smoke_seconds {
            0 => None,
            s => Some(Duration::from_secs(u64::from(s))),
        };
        let run = smoke::Smoke {
            home: self.home,
            checkout,
            binary: &binary,
            commit: candidate,
            settings: self.settings,
            runner: self.runner,
            organs,
            limit,
            kernel_exe: self.kernel_exe,
        };
        let timeline = run.run().await.map_err(failed)?;
        let mut extra =
            vec![("started_seconds", timeline.started), ("answered_seconds", timeline.answered)];
        extra.extend(timeline.ready.map(|r| ("ready_seconds", r)));
        extra.extend(build_seconds.map(|b| ("build_seconds", b)));
        self.step_with(candidate, "smoke", Step::Passed, started.elapsed(), &extra);
        Ok(Verdict::Accepted { binary })
    }
}
