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
use super::times::Times;
use super::{build, crates, reject, Gate, Ground, Step, Verdict};
use crate::runner::Limits;
use crate::smoke;
use teneral_core::commit::short;
use teneral_core::commit::Commit;
use teneral_core::log;

impl Gate<'_> {
    /// Runs the checks of `planned` that no kept pass covers, side by side,
    /// each pass kept in the memo; the first failure in plan order refuses
    /// and stops the checks after it. `judging` a candidate (not warming:
    /// `Some` of its organ set), each step is journaled and said, the body's
    /// release build runs beside the checks, last in plan order, and the
    /// smoke run starts as soon as the body is built, beside the checks
    /// still running; it is journaled last, and its failure refuses only
    /// when every check passed.
    pub(super) async fn run_planned(
        &self,
        candidate: &Commit,
        checkout: &Path,
        ground: &Ground,
        planned: &[PlannedCheck],
        judging: Option<Option<&Path>>,
    ) -> Result<Verdict, Verdict> {
        let to_run: Vec<usize> = (0..planned.len()).filter(|&i| planned[i].runs()).collect();
        let reads = |tree| to_run.iter().any(|&i| planned[i].reads == tree);
        self.fetch(
            candidate,
            checkout,
            ground,
            reads(Reads::Kernel),
            reads(Reads::Body) || judging.is_some(),
        )
        .await?;
        let mut laps = ground.laps.clone();
        laps.lap("fetch");
        if judging.is_some() {
            log::info(format!(
                "gate: {} prepared in {:.2} s: {}",
                short(candidate),
                laps.total(),
                laps.words()
            ));
        }
        let names: Vec<&str> = to_run.iter().map(|&i| planned[i].name).collect();
        if !names.is_empty() {
            log::info(format!("gate: {} of {}", names.join(", "), short(candidate)));
            if judging.is_some() {
                let expected = super::expected(&Times::load(self.home), planned);
                self.doing(candidate, &names.join(", "), expected);
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
        let build = judging.and_then(|_| {
            build::job(self.home, checkout, candidate, env, target, build_limits, caged)
        });
        // The smoke run waits on the build's end (its seconds), or on nothing
        // when the body was kept before; a build that fails or is stopped
        // drops the sender, and the smoke run does not start.
        let (built_tx, built_rx) = tokio::sync::oneshot::channel::<f64>();
        let wait_build = build.is_some();
        let mut built_tx = wait_build.then_some(built_tx);
        jobs.extend(build);
        let mut built: Option<(Result<(), String>, f64)> = None;
        let mut outcomes: Vec<Option<Outcome>> = vec![None; planned.len()];
        let mut begans: Vec<f64> = vec![0.0; planned.len()];
        let mut said = 0;
        let mut memo = Memo::load(self.home);
        let mut times = Times::load(self.home);
        let grace = ground.limits.stop_timeout;
        let began = Instant::now();
        let checks = async {
            parallel::run_all(self.runner, jobs, grace, |job, ending| {
                let Some(&i) = to_run.get(job) else {
                    let (end, seconds) = match ending {
                        Ok((ended, running, seconds)) => {
                            (build::ended(candidate, ended, running), seconds)
                        }
                        Err(e) => (Err(format!("cannot start cargo to build the body: {e}")), 0.0),
                    };
                    let passed = end.is_ok();
                    if let (true, Some(tx)) = (passed, built_tx.take()) {
                        let _ = tx.send(seconds);
                    }
                    built = Some((end, seconds));
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
                    times.record(planned[i].name, outcome.seconds());
                }
                // When it began, from the start of the checks (after waiting
                // for its lane, if it did).
                begans[i] = (began.elapsed().as_secs_f64() - outcome.seconds()).max(0.0);
                outcomes[i] = Some(outcome);
                if judging.is_some() {
                    self.say_in_order(candidate, planned, (&outcomes, &begans), &mut said);
                }
                passed
            })
            .await;
            // A build that never ended well lets the smoke run's wait end.
            drop(built_tx.take());
        };
        let smoke = async {
            let organs = judging?;
            let build_seconds = if wait_build { Some(built_rx.await.ok()?) } else { None };
            let smoke_began = began.elapsed().as_secs_f64();
            Some((
                self.smoke(candidate, checkout, ground, organs).await,
                build_seconds,
                smoke_began,
            ))
        };
        let ((), smoked) = tokio::join!(checks, smoke);
        // Nothing of the candidate's runs now: what its build scripts and
        // tests left in the shared target loses what means privilege outside.
        scrub_target(&ground.target)?;
        let passed: Vec<Option<bool>> =
            outcomes.iter().map(|o| o.as_ref().map(Outcome::passed)).collect();
        if let Some((i, Outcome::Failed { output, .. } | Outcome::OverTime { output, .. })) =
            parallel::first_failure(&passed).and_then(|i| Some((i, outcomes[i].take()?)))
        {
            return Err(reject(planned[i].name, output));
        }
        if let Some((Err(why), seconds)) = built {
            self.step(candidate, "smoke", Step::Failed, Duration::from_secs_f64(seconds));
            return Err(reject("smoke", why));
        }
        let Some((smoked, build_seconds, smoke_began)) = smoked else {
            // Warming: no build, no smoke run.
            return Ok(Verdict::Accepted { binary: PathBuf::new() });
        };
        let (binary, timeline, seconds) = smoked.map_err(|(why, seconds)| {
            self.step(candidate, "smoke", Step::Failed, Duration::from_secs_f64(seconds));
            reject("smoke", why)
        })?;
        let mut extra =
            vec![("started_seconds", timeline.started), ("answered_seconds", timeline.answered)];
        extra.extend(timeline.ready.map(|r| ("ready_seconds", r)));
        extra.extend(build_seconds.map(|b| ("build_seconds", b)));
        extra.push(("began_seconds", smoke_began));
        extra.push(("prepared_seconds", laps.total()));
        self.step_with(candidate, "smoke", Step::Passed, Duration::from_secs_f64(seconds), &extra);
        Ok(Verdict::Accepted { binary })
    }

    /// Fetches the crates of the kernel's and the body's lockfiles, as
    /// needed, side by side, outside the cage (a check inside runs
    /// `--offline`); not those whose every crate is cached ([`crates`]).
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
                // Every crate cached already: nothing to fetch, and no cargo
                // to start (its sources are opened to the cage all the same).
                if crates::all_cached(&dir.join("Cargo.lock")) {
                    return crate::confine::sources::readable_by_checks().map(|_| ()).map_err(
                        |e| format!("cannot open the fetched crate sources to the cage: {e}"),
                    );
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
        (outcomes, begans): (&[Option<Outcome>], &[f64]),
        said: &mut usize,
    ) {
        while let Some(check) = planned.get(*said) {
            let secs = Duration::from_secs_f64;
            if let Some(why) = check.skip {
                self.skipped(candidate, check.name, why);
                *said += 1;
                continue;
            }
            match &outcomes[*said] {
                Some(Outcome::Passed { took }) => {
                    let mut extra = vec![];
                    extra.extend(took.compile.map(|s| ("compile_seconds", s)));
                    extra.extend(took.tests.map(|s| ("tests_seconds", s)));
                    extra.push(("began_seconds", begans[*said]));
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

    /// Keeps the candidate's body, built in the gate's target directory
    /// (the judgement holds its lock), and runs it once on a throwaway
    /// individual. Returns the kept binary, the smoke run's timeline and
    /// its seconds; `Err`: why it failed, after how many seconds.
    async fn smoke(
        &self,
        candidate: &Commit,
        checkout: &Path,
        ground: &Ground,
        organs: Option<&Path>,
    ) -> Result<(PathBuf, smoke::Timeline, f64), (String, f64)> {
        let started = Instant::now();
        self.doing(candidate, "smoke", None);
        let failed = |why: String| (why, started.elapsed().as_secs_f64());
        let binary = build::keep(self.home, candidate, &ground.target).map_err(failed)?;
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
        Ok((binary, timeline, started.elapsed().as_secs_f64()))
    }
}

/// Scrubs the gate's target ([`crate::scrub`]); a target that cannot be
/// scrubbed is not trusted with the next check, so the candidate is refused.
pub(super) fn scrub_target(target: &Path) -> Result<(), Verdict> {
    match crate::scrub::scrub(target) {
        Ok(done) => {
            if done != crate::scrub::Scrubbed::default() {
                log::warn(format!(
                    "gate: cleared the set-id bits of {} and removed {} special files or outward links in {}",
                    done.cleared,
                    done.removed,
                    target.display()
                ));
            }
            Ok(())
        }
        Err(e) => Err(reject("checkout", format!("cannot scrub {}: {e}", target.display()))),
    }
}
