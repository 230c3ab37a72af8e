//! Running one check of a candidate: a cargo command in the gate's checkout,
//! with a bare environment and a temp dir of its own inside the checkout,
//! through the runner (a transient unit with `RuntimeMaxSec` under systemd,
//! a child with a deadline otherwise), stopped with everything it started
//! when its time is up.
//!
//! A check passes when the command exits 0 and, for a test run, when at
//! least one test passed and none failed ([`super::rules::check_test_count`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::rules::{check_test_count, count_tests};
use crate::confine::{self, Profile};
use crate::runner::{Limits, Runner};
use crate::spawn::Spec;

/// One check to run.
pub struct Check {
    /// The name journaled and shown: `typecheck-kernel`, `body-tests`, ...
    pub name: &'static str,
    /// Where cargo runs.
    pub dir: PathBuf,
    /// cargo's arguments.
    pub args: Vec<&'static str>,
    /// Whether its output must show tests that ran and passed.
    pub counts_tests: bool,
    /// Variables added to the bare environment.
    pub env: Vec<(String, OsString)>,
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed { seconds: f64 },
    Failed { seconds: f64, output: String },
    OverTime { seconds: f64, output: String },
}

/// The environment of every check: the toolchain's variables and nothing
/// else of the kernel's (no key, no settings), plus a temp dir of its own.
pub fn bare_env(tmp: &Path, target: &Path) -> Vec<(String, OsString)> {
    let mut env = crate::generation::toolchain_env();
    env.push(("TMPDIR".into(), tmp.into()));
    env.push(("CARGO_TARGET_DIR".into(), target.into()));
    env
}

/// The cage a check runs in: the `gate` profile over the checkout, with the
/// cargo target directory writable. `None` when the owner runs unconfined.
pub type Cage = Option<(Profile, confine::Options)>;

/// Runs `check` of `candidate` with `env` through `runner`, inside `cage`,
/// stopping it after its time limit.
pub async fn run(
    runner: &Runner,
    candidate: &str,
    check: &Check,
    env: &[(String, OsString)],
    limits: &Limits,
    cage: &Cage,
) -> Outcome {
    let started = Instant::now();
    let mut argv: Vec<OsString> = vec!["cargo".into()];
    argv.extend(check.args.iter().map(OsString::from));
    if let Some((profile, options)) = cage {
        argv = match confine::wrap_with(profile, options, argv) {
            Ok(argv) => argv,
            Err(e) => {
                return Outcome::Failed {
                    seconds: 0.0,
                    output: format!("cannot cage the check: {e}"),
                }
            }
        };
    }
    let Some((program, args)) = argv.split_first() else {
        return Outcome::Failed { seconds: 0.0, output: "nothing to run".into() };
    };
    let mut spec = Spec::new(program, &check.dir);
    spec.args = args.to_vec();
    spec.env = env.to_vec();
    spec.env.extend(check.env.iter().cloned());
    let unit = crate::systemd::gate_unit(candidate, check.name);
    let mut running = match runner.start(&unit, spec, limits).await {
        Ok(running) => running,
        Err(e) => {
            return Outcome::Failed { seconds: 0.0, output: format!("cannot start cargo: {e}") }
        }
    };
    let ended = running.wait().await;
    let seconds = started.elapsed().as_secs_f64();
    let output = running.output_tail();
    if ended.over_time {
        let limit = limits.runtime_max.map(|l| l.as_secs()).unwrap_or_default();
        let output = format!(
            "{output}\nstopped after {limit} s, the limit of one check (TENERAL_CHECK_MINUTES in .env raises it)"
        );
        return Outcome::OverTime { seconds, output };
    }
    if !ended.exit.success() {
        return Outcome::Failed {
            seconds,
            output: format!("{output}\n{} ({})", check.name, ended.exit),
        };
    }
    if check.counts_tests {
        if let Err(why) = check_test_count(count_tests(&running.test_results())) {
            return Outcome::Failed { seconds, output: format!("{output}\n{why}") };
        }
    }
    Outcome::Passed { seconds }
}

/// The limits of one check: the owner's memory and task limits, and the
/// time limit (`TENERAL_CHECK_MINUTES`, 0 for none).
pub fn limits(settings: &crate::settings::Settings) -> Limits {
    let limit = match (settings.timing.check_limit, settings.check_minutes) {
        (Some(limit), _) => Some(limit),
        (None, 0) => None,
        (None, m) => Some(Duration::from_secs(u64::from(m) * 60)),
    };
    Limits::for_check(settings).with_runtime_max(limit)
}

/// Fetches and unpacks the crates the lockfile of the checkout at `dir`
/// names, outside the cage (a check inside runs `--offline` and cannot reach
/// the network). `cargo fetch` runs none of the candidate's code.
pub async fn fetch(dir: &Path, env: &[(String, OsString)]) -> Result<(), String> {
    let mut spec = Spec::new("cargo", dir).arg("fetch").arg("--locked");
    spec.env = env.to_vec();
    spec.stderr = crate::spawn::Output::Pipe;
    let mut child =
        crate::spawn::spawn(spec).map_err(|e| format!("cannot start cargo fetch: {e}"))?;
    let mut err = String::new();
    if let Some(pipe) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = tokio::io::BufReader::new(pipe).read_to_string(&mut err).await;
    }
    let exit = child.wait().await;
    if exit.success() {
        Ok(())
    } else {
        Err(format!("cargo fetch --locked in {} failed ({exit}):\n{err}", dir.display()))
    }
}
