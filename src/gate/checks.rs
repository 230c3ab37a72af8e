//! Running what the gate planned: each check a cargo command in the gate's
//! checkout, with a bare environment and a temp dir of its own inside the
//! checkout, in the cage's `gate` profile, through the runner (a transient
//! unit with `RuntimeMaxSec` under systemd, a child with a deadline
//! otherwise), stopped with everything it started when its time is up.
//! Also the two things the gate runs outside the cage, none of the
//! candidate's code: `cargo fetch` and the toolchain probe.
//!
//! A check passes when the command exits 0 and, for a test run, when at
//! least one test passed and none failed ([`super::rules::check_test_count`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::plan::{Lane, PlannedCheck, CHECK_TARGET};
use super::profile::Took;
use super::rules::{check_test_count, count_tests};
use crate::runner::{self, Ended, Launch, Limits, Profile, Runner, Running};
use crate::spawn::Spec;
use teneral_core::commit::Commit;

/// How a check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed { took: Took },
    Failed { seconds: f64, output: String },
    OverTime { seconds: f64, output: String },
}

impl Outcome {
    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed { .. })
    }

    pub fn seconds(&self) -> f64 {
        match self {
            Outcome::Passed { took } => took.seconds,
            Outcome::Failed { seconds, .. } | Outcome::OverTime { seconds, .. } => *seconds,
        }
    }
}

/// The environment of every check: the toolchain's variables and nothing
/// else of the kernel's (no key, no settings), plus a temp dir of its own.
pub fn bare_env(tmp: &Path, target: &Path) -> Vec<(String, OsString)> {
    let mut env = crate::generation::toolchain_env();
    env.push(("TMPDIR".into(), tmp.into()));
    env.push(("CARGO_TARGET_DIR".into(), target.into()));
    env
}

/// What starts `check` of `candidate` with `env`: its unit and its launch
/// in the `gate` profile over `checkout` with `writable` (the cargo target
/// directory, of which a [`Lane::Check`] check uses [`CHECK_TARGET`]).
pub fn launch(
    candidate: &Commit,
    check: &PlannedCheck,
    env: &[(String, OsString)],
    checkout: &Path,
    writable: &[PathBuf],
) -> (String, Launch) {
    let mut spec = Spec::new("cargo", &check.dir);
    spec.args = check.args.iter().map(OsString::from).collect();
    spec.env = env.to_vec();
    if check.lane == Lane::Check {
        for (name, value) in &mut spec.env {
            if name == "CARGO_TARGET_DIR" {
                *value = Path::new(value).join(CHECK_TARGET).into_os_string();
            }
        }
    }
    spec.env.extend(check.env.iter().cloned());
    let profile = Profile::Gate { checkout: checkout.to_owned(), writable: writable.to_vec() };
    let unit = runner::systemd::gate_unit(candidate, check.name);
    (unit, Launch::new(spec, check.limits).caged(profile))
}

/// How `check`, which ended as `ended` after `seconds`, went.
pub fn outcome(check: &PlannedCheck, ended: &Ended, running: &Running, seconds: f64) -> Outcome {
    let output = running.output_tail();
    if ended.over_time {
        let limit = check.limits.runtime_max.map(|l| l.as_secs()).unwrap_or_default();
        let output = format!(
            "{output}\nstopped after {limit} s, the limit of one check (TENERAL_CHECK_MINUTES in .env raises it)"
        );
        return Outcome::OverTime { seconds, output };
    }
    if !ended.exit.success() {
        let cage = ended.cage_step().map(|s| format!("; {s}")).unwrap_or_default();
        return Outcome::Failed {
            seconds,
            output: format!("{output}\n{} ({}{cage})", check.name, ended.exit),
        };
    }
    let results = running.test_results();
    if check.counts_tests {
        if let Err(why) = check_test_count(count_tests(&results)) {
            return Outcome::Failed { seconds, output: format!("{output}\n{why}") };
        }
    }
    Outcome::Passed { took: Took::read(seconds, &running.stderr_tail(), &results) }
}

/// Fetches and unpacks the crates the lockfile of the checkout at `dir`
/// names, outside the cage (a check inside runs `--offline` and cannot reach
/// the network). `cargo fetch` runs none of the candidate's code.
pub async fn fetch(
    runner: &Runner,
    unit: &str,
    dir: &Path,
    env: &[(String, OsString)],
    limits: Limits,
) -> Result<(), String> {
    let mut spec = Spec::new("cargo", dir).arg("fetch").arg("--locked");
    spec.env = env.to_vec();
    let (ended, run) = runner
        .run(unit, Launch::new(spec, limits))
        .await
        .map_err(|e| format!("cannot start cargo fetch: {e}"))?;
    if ended.exit.success() {
        crate::confine::sources::readable_by_checks()
            .map(|_| ())
            .map_err(|e| format!("cannot open the fetched crate sources to the cage: {e}"))
    } else {
        let (exit, tail) = (ended.exit, run.stderr_tail());
        Err(format!("cargo fetch --locked in {} failed ({exit}):\n{tail}", dir.display()))
    }
}

/// The toolchain's version, part of every memo key (`rustc -vV`'s release
/// and commit lines).
pub async fn toolchain(
    runner: &Runner,
    unit: &str,
    env: &[(String, OsString)],
    limits: Limits,
) -> String {
    let mut spec = Spec::new("rustc", std::env::temp_dir()).arg("-vV");
    spec.env = env.to_vec();
    let Ok((_, run)) = runner.run(unit, Launch::new(spec, limits)).await else {
        return "unknown rustc".into();
    };
    run.stdout_tail()
        .lines()
        .filter(|l| l.starts_with("release:") || l.starts_with("commit-hash:"))
        .collect::<Vec<_>>()
        .join(" ")
}
