//! The gate: what a candidate commit must pass before it may run.
//!
//! In order, each step timed and journaled as `mutation.check` (with where
//! its time went: [`profile`]), the first failure ending the gate with its
//! name and the tail of its output:
//! 1. `paths`: only `body/` and `BACKLOG.md` changed; `body/` holds only
//!    regular files ([`rules`]);
//! 2. `organs`: in a fresh checkout of exactly that commit, each pinned organ
//!    is in the cache with its hash, unpacked, and passes its own check
//!    ([`crate::organs::gate`]); nothing of the candidate has run yet;
//! 3. in that checkout, with a bare environment and a temp dir inside the
//!    checkout, each in the cage and limited by the check limit, the checks
//!    [`plan`] lists: the kernel's type check, the body's format and lints
//!    (`clippy -D warnings`), the kernel's tests, the body's tests, all
//!    `--offline --locked`. A check of the kernel's tree does not run when
//!    that tree is the running generation's (a body-only change), nor does
//!    a check whose tree already passed ([`memo`]); each is journaled with
//!    why ([`plan::skip`]). They run side by side ([`parallel`]), and
//!    beside them the body's release build ([`build`]); the refusal is the
//!    first failure in plan order (the build's counts as the smoke run's),
//!    and the jobs after it are stopped;
//! 4. `smoke`: the built candidate started on a throwaway individual
//!    ([`crate::smoke`]);
//! 5. `evals`, under `TENERAL_EVALS=report` or `gate`: the owner's
//!    evaluations on the candidate and on the running generation
//!    ([`evals`], the owner's evaluations of [`crate::evals`]).
//!
//! The organ set, when the candidate pins organs, is `TENERAL_ORGANS` for its
//! tests and its smoke run.

mod build;
pub mod checks;
mod crates;
mod evals;
pub mod fetch;
pub mod memo;
pub mod parallel;
mod places;
pub mod plan;
pub mod profile;
pub mod rules;
mod run;
mod seed;
pub mod times;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use git2::Repository;
use serde_json::json;

use crate::events::{kernel_event, SharedJournal};
use crate::runner::{self, Limits, Runner};
use crate::settings::Settings;
use crate::{generation, repo};
use memo::Memo;
use teneral_core::commit::{short, Commit};
use teneral_core::journal::EventKind;
use teneral_core::log;
use teneral_core::status::{Doing, Reporter};

/// The gate's working directories.
pub const CHECKOUT_DIR: &str = ".teneral/gate/checkout";
pub const TARGET_DIR: &str = ".teneral/gate/target";

/// What every check of one judgement shares.
struct Ground {
    /// The bare environment (plus the organ set, once known).
    env: Vec<(String, std::ffi::OsString)>,
    limits: Limits,
    /// The cargo target directory, the one place a check may write outside its checkout.
    target: PathBuf,
    /// The gate's own steps so far, timed.
    laps: profile::Laps,
}

/// What the gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every check passed; the body is built at `binary`.
    Accepted { binary: PathBuf },
    /// `check` failed; `output` ends with what it printed.
    Rejected { check: String, output: String },
    /// Nothing was decided, and the refusal does not count toward the
    /// three of one commit: the species rule waits for its owner's consent
    /// or could not fetch the species. `output` says what to do.
    Undecided { check: String, output: String },
}

/// One judgement of a candidate against the running generation.
pub struct Gate<'a> {
    pub home: &'a Path,
    pub repo: &'a Repository,
    pub settings: &'a Settings,
    pub journal: &'a SharedJournal,
    /// The running generation's commit.
    pub running: &'a Commit,
    /// The kernel binary the body's tests talk to (`TENERAL_BIN`): the
    /// stand-in model and the event channel they test against.
    pub kernel_exe: &'a Path,
    /// How checks and the smoke run are started (transient units under
    /// systemd), and whether in the cage.
    pub runner: &'a Runner,
    /// Where the step under way is said (systemd's STATUS), if anywhere.
    pub status: Option<&'a Reporter>,
}

fn reject(check: &str, output: impl Into<String>) -> Verdict {
    Verdict::Rejected { check: check.to_owned(), output: output.into() }
}

/// How one step of the gate went, as journaled in `mutation.check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Passed,
    /// A pass of the same tree was kept; nothing ran.
    Reused,
    Failed,
}

impl Step {
    fn word(self) -> &'static str {
        match self {
            Step::Passed => "passed",
            Step::Reused => "reused",
            Step::Failed => "failed",
        }
    }

    fn of(passed: bool) -> Step {
        if passed {
            Step::Passed
        } else {
            Step::Failed
        }
    }
}

impl Gate<'_> {
    /// Judges `candidate`. Dropping the future kills the check in progress.
    pub async fn judge(&self, candidate: &Commit) -> Verdict {
        let started = Instant::now();
        let mut laps = profile::Laps::default();
        let running = match repo::commit_id(self.repo, self.home, self.running) {
            Ok(oid) => oid,
            Err(e) => return reject("fetch", e.to_string()),
        };
        let limits = Limits::for_check(self.settings);
        let bases = [running];
        let taken = fetch::take(self.runner, self.repo, self.home, candidate, &bases, limits);
        let oid = match taken.await {
            Ok(oid) => oid,
            Err(e) => return reject("fetch", e.to_string()),
        };
        laps.lap("take");
        self.doing(candidate, "paths", None);
        // The paths outside body/ and BACKLOG.md, and the species they may
        // come from, before anything of the candidate runs.
        let signers = self.home.join(crate::species::SIGNERS_FILE);
        let species = crate::species::SpeciesContext {
            home: self.home,
            repo: self.repo,
            settings: self.settings,
            journal: self.journal,
            signers: &signers,
            fetch_limit: crate::species::FETCH_LIMIT,
        };
        match crate::species::judge(&species, running, oid).await {
            Ok(judgement) => {
                if judgement != crate::species::Judgement::Ordinary {
                    log::info(format!("gate: {} {judgement:?}", short(candidate)));
                }
            }
            Err(refusal) => {
                self.step(candidate, refusal.check, Step::Failed, started.elapsed());
                let (check, output) = (refusal.check.to_owned(), refusal.message);
                return if refusal.counts {
                    Verdict::Rejected { check, output }
                } else {
                    Verdict::Undecided { check, output }
                };
            }
        }
        let paths = repo::body_entries(self.repo, self.home, oid)
            .map_err(|e| e.to_string())
            .and_then(|entries| rules::check_body_entries(&entries));
        self.step(candidate, "paths", Step::of(paths.is_ok()), started.elapsed());
        laps.lap("paths");
        if let Err(why) = paths {
            return reject("paths", why);
        }
        let checkout = self.home.join(CHECKOUT_DIR);
        let fresh = repo::checkout_at(self.repo, &checkout, oid)
            .map_err(|e| e.to_string())
            .and_then(|()| generation::touch_tree(&checkout).map_err(|e| e.to_string()));
        if let Err(e) = fresh {
            return reject("checkout", e);
        }
        laps.lap("checkout");
        let verdict = match self.checks(candidate, oid, Some(running), &checkout, laps).await {
            Ok(verdict) | Err(verdict) => verdict,
        };
        let _ = std::fs::remove_dir_all(checkout.join(".tmp"));
        log::info(format!(
            "gate: {} for {} after {:.1} s",
            match &verdict {
                Verdict::Accepted { .. } => "accepted".to_owned(),
                Verdict::Rejected { check, .. } => format!("rejected at {check}"),
                Verdict::Undecided { check, .. } => format!("nothing decided at {check}"),
            },
            short(candidate),
            started.elapsed().as_secs_f64()
        ));
        verdict
    }

    /// The steps in the checkout: organs, the planned checks, the smoke run,
    /// judged `against` the running generation's commit, whose kernel needs
    /// no kernel checks (`None`: a tree judged whole, as an offer's).
    /// `Err` is a refusal before the end.
    async fn checks(
        &self,
        candidate: &Commit,
        oid: git2::Oid,
        against: Option<git2::Oid>,
        checkout: &Path,
        mut laps: profile::Laps,
    ) -> Result<Verdict, Verdict> {
        let mut ground = self.ground(checkout, Limits::for_check(self.settings))?;
        let started = Instant::now();
        let mut unpacker = crate::organs::Unpacker::new(self.runner, self.kernel_exe);
        unpacker.stop_timeout = ground.limits.stop_timeout;
        let organ_set = crate::organs::gate(
            self.home,
            checkout,
            &ground.env,
            &unpacker,
            ground.limits,
            candidate.short(),
        )
        .await
        .map_err(|e| {
            self.step(candidate, "organs", Step::Failed, started.elapsed());
            reject("organs", e.to_string())
        })?;
        if let Some(set) = &organ_set {
            self.step(candidate, "organs", Step::Passed, started.elapsed());
            ground.env.push(("TENERAL_ORGANS".into(), set.as_os_str().to_owned()));
        }
        laps.lap("organs");
        let planned = self.plan(candidate, oid, against, checkout, &ground).await?;
        laps.lap("plan");
        // Cargo judges freshness by modification times, and the gate's target
        // directory may be shared (by tests, by individuals of one owner):
        // one judgement at a time checks and builds in it, its files (the
        // kernel's and the body's) touched once it holds the lock, until its
        // binary is kept. Touched before, another's later build of a tree of
        // the same package would be taken as this tree's.
        let lock = generation::lock_target(&ground.target)
            .await
            .and_then(|lock| generation::touch_tree(checkout).map(|()| lock))
            .map_err(|e| reject("checkout", format!("cannot lock the gate's target dir: {e}")))?;
        laps.lap("lock");
        ground.laps = laps;
        let judging = Some(organ_set.as_deref());
        let verdict = self.run_planned(candidate, checkout, &ground, &planned, judging).await;
        drop(lock);
        // The owner's evaluations, once the smoke run passed, outside the
        // target's lock ([`evals`]).
        if let Ok(Verdict::Accepted { binary }) = &verdict {
            use evals::{step, Stop};
            if self.settings.evals != crate::evals::Mode::Off {
                self.doing(candidate, "evals", None);
            }
            match step(self, candidate, oid, binary).await {
                Ok(_) => {}
                Err(Stop::Refused(output)) => return Err(reject("evals", output)),
                Err(Stop::Undecided(output)) => {
                    return Err(Verdict::Undecided { check: "evals".into(), output })
                }
            }
        }
        verdict
    }

    /// Runs the checks of the running generation's tree that no kept pass
    /// covers, at background priority, in the gate's checkout (a judgement
    /// stops the warm-up before it begins, and the paths cargo hashes are
    /// then the judgement's): the body's first (format, lint, tests, and
    /// beside them, when one of those runs, its release build: they compile
    /// the body's dependencies that a body change then reuses), then the
    /// kernel's (they warm the compiler for a change outside `body/`). A
    /// failure of the body's does not stop the kernel's. Journals nothing (no mutation was asked for);
    /// says in the log what it ran, and through `say` which checks run and
    /// how long they are expected to take. Returns how many checks passed.
    pub async fn warm(&self, say: &dyn Fn(&str, Option<Duration>)) -> Result<usize, String> {
        let oid = repo::commit_id(self.repo, self.home, self.running).map_err(|e| e.to_string())?;
        let checkout = self.home.join(CHECKOUT_DIR);
        repo::checkout_at(self.repo, &checkout, oid).map_err(|e| e.to_string())?;
        generation::touch_tree(&checkout).map_err(|e| e.to_string())?;
        let words = |v: Verdict| match v {
            Verdict::Rejected { check, output } | Verdict::Undecided { check, output } => {
                format!("{check}: {output}")
            }
            Verdict::Accepted { .. } => String::new(),
        };
        let limits = Limits::for_check(self.settings).in_background();
        let ground = self.ground(&checkout, limits).map_err(words)?;
        let planned =
            self.plan(self.running, oid, None, &checkout, &ground).await.map_err(words)?;
        let (mut passed, mut failures) = (0, Vec::new());
        for tree in [plan::Reads::Body, plan::Reads::Kernel] {
            let phase: Vec<plan::PlannedCheck> =
                planned.iter().filter(|c| c.reads == tree && c.runs()).cloned().collect();
            // Not when every body check is kept: the judgement or warm-up
            // that kept them built this body here already.
            let build = tree == plan::Reads::Body && !phase.is_empty();
            let mut names: Vec<&str> = phase.iter().map(|c| c.name).collect();
            if build {
                names.push("release build");
            }
            if names.is_empty() {
                continue;
            }
            say(&names.join(", "), expected(&times::Times::load(self.home), &phase));
            // Held for the phase, the tree touched once it is held, as a
            // judgement does: a shared target directory never lends this
            // tree another individual's build of the same package.
            let lock = generation::lock_target(&ground.target)
                .await
                .and_then(|lock| generation::touch_tree(&checkout).map(|()| lock))
                .map_err(|e| format!("cannot lock the gate's target dir: {e}"))?;
            let checks = async {
                if phase.is_empty() {
                    return Ok(());
                }
                let ran = self.run_planned(self.running, &checkout, &ground, &phase, None).await;
                ran.map(|_| ()).map_err(words)
            };
            let built = async {
                if build {
                    self.warm_build(&checkout, &ground).await
                } else {
                    Ok(())
                }
            };
            let (checks, built) = tokio::join!(checks, built);
            drop(lock);
            match checks {
                Ok(()) => passed += phase.len(),
                Err(why) => failures.push(why),
            }
            failures.extend(built.err());
        }
        let _ = std::fs::remove_dir_all(checkout.join(".tmp"));
        if failures.is_empty() {
            Ok(passed)
        } else {
            Err(failures.join("; "))
        }
    }

    /// The running body's release build in the gate's target directory,
    /// for the warm-up, which holds the directory's lock meanwhile.
    async fn warm_build(&self, checkout: &Path, ground: &Ground) -> Result<(), String> {
        let limits = Limits::for_build(self.settings).in_background();
        let caged = self.runner.caged();
        let job =
            build::warm_job(checkout, self.running, &ground.env, &ground.target, limits, caged);
        let mut result = Err("the release build did not end".to_owned());
        parallel::run_all(self.runner, vec![job], ground.limits.stop_timeout, |_, ending| {
            result = match ending {
                Ok((ended, running, _)) => build::ended(self.running, ended, running),
                Err(e) => Err(format!("cannot start cargo to build the body: {e}")),
            };
            result.is_ok()
        })
        .await;
        // What the body's build scripts left loses what means privilege
        // outside, as after a judgement's checks.
        let scrubbed = run::scrub_target(&ground.target).map_err(|v| match v {
            Verdict::Rejected { output, .. } | Verdict::Undecided { output, .. } => output,
            Verdict::Accepted { .. } => String::new(),
        });
        result.and(scrubbed).map_err(|why| format!("release build: {why}"))
    }

    /// A check's temp dir, the gate's target dir, the bare environment.
    fn ground(&self, checkout: &Path, limits: Limits) -> Result<Ground, Verdict> {
        let on_checkout = |what: &str| {
            let what = what.to_owned();
            move |e: std::io::Error| reject("checkout", format!("{what}: {e}"))
        };
        let tmp = checkout.join(".tmp");
        std::fs::create_dir_all(&tmp).map_err(on_checkout("cannot make the check's temp dir"))?;
        let target = self.home.join(TARGET_DIR);
        std::fs::create_dir_all(&target)
            .map_err(on_checkout("cannot make the gate's target dir"))?;
        let env = checks::bare_env(&tmp, &target);
        Ok(Ground { env, limits, target, laps: profile::Laps::default() })
    }

    /// What the checks of the commit `oid` in `checkout` are ([`plan::plan`]),
    /// judged `against` the running generation's commit (`None`: the
    /// running tree itself, warmed).
    async fn plan(
        &self,
        candidate: &Commit,
        oid: git2::Oid,
        against: Option<git2::Oid>,
        checkout: &Path,
        ground: &Ground,
    ) -> Result<Vec<plan::PlannedCheck>, Verdict> {
        let on_checkout = |what: &str| {
            let what = what.to_owned();
            move |e: std::io::Error| reject("checkout", format!("{what}: {e}"))
        };
        let (kernel_tree, body_tree) = repo::tree_ids(self.repo, self.home, oid)
            .map_err(|e| reject("checkout", e.to_string()))?;
        let running_kernel_tree = match against {
            Some(running) => Some(
                repo::tree_ids(self.repo, self.home, running)
                    .map_err(|e| reject("checkout", e.to_string()))?
                    .0,
            ),
            None => None,
        };
        let unit = self.unit(candidate, "rustc");
        let toolchain = checks::toolchain(self.runner, &unit, &ground.env, ground.limits).await;
        // The body's tests run the kernel's stand-in and event channel; in the
        // cage they may execute only what lies in the check's own places.
        let kernel_copy = places::place_kernel(self.kernel_exe, &ground.target)
            .map_err(on_checkout("cannot place the kernel for the body's tests"))?;
        let socket_dir = places::socket_dir(self.home, &ground.target)
            .map_err(on_checkout("cannot make a place for the tests' sockets"))?;
        let kernel_identity = places::kernel_identity(self.kernel_exe);
        let inputs = plan::Inputs {
            checkout,
            kernel_tree: &kernel_tree,
            body_tree: &body_tree,
            running_kernel_tree: running_kernel_tree.as_deref(),
            toolchain: &toolchain,
            kernel_identity: &kernel_identity,
            kernel_copy: &kernel_copy,
            socket_dir: &socket_dir,
            limits: ground.limits,
            test_threads: plan::test_threads(
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            ),
        };
        Ok(plan::plan(&inputs, &Memo::load(self.home)))
    }

    /// The unit a step of the gate other than a check runs in.
    fn unit(&self, candidate: &Commit, what: &str) -> String {
        runner::systemd::gate_unit(candidate, what)
    }

    /// Says which step is under way, and how long it is expected to take
    /// when that is known.
    fn doing(&self, candidate: &Commit, step: &str, expected: Option<Duration>) {
        if let Some(status) = self.status {
            let candidate = candidate.to_string();
            status.set(Doing::Checking { candidate, step: step.to_owned(), expected });
        }
    }

    fn step(&self, candidate: &Commit, check: &str, step: Step, took: Duration) {
        self.step_with(candidate, check, step, took, &[]);
    }

    /// Journals a step with `extra` figures: where its time went, in seconds.
    fn step_with(
        &self,
        candidate: &Commit,
        check: &str,
        step: Step,
        took: Duration,
        extra: &[(&str, f64)],
    ) {
        let round = |s: f64| (s * 100.0).round() / 100.0;
        let mut fields = json!({"candidate": candidate, "check": check, "result": step.word(), "seconds": round(took.as_secs_f64())});
        for (name, seconds) in extra {
            fields[*name] = json!(round(*seconds));
        }
        kernel_event(self.journal, self.running, EventKind::MutationCheck, fields);
    }

    /// Journals a check that did not run, with why (`why`).
    fn skipped(&self, candidate: &Commit, check: &str, why: plan::Skip) {
        let fields = json!({"candidate": candidate, "check": check, "result": Step::Reused.word(), "seconds": 0.0, "why": why.words()});
        kernel_event(self.journal, self.running, EventKind::MutationCheck, fields);
    }
}

/// How long the checks of `planned` that run are expected to take side by
/// side, from their last times ([`times::expected`]).
fn expected(times: &times::Times, planned: &[plan::PlannedCheck]) -> Option<Duration> {
    let checks: Vec<_> =
        planned.iter().filter(|c| c.runs()).map(|c| (c.lane, times.last(c.name))).collect();
    times::expected(&checks)
}
