//! `teneral offer-gates --dir D <commit> [--also '<command>']`: the gate's
//! checks on a commit as on a fresh seed ([`super::gates`]), and a witness's
//! extra command in the same cage on the same tree ([`also`]), printed as
//! one JSON object on stdout (what happened along the way goes to stderr).
//! `teneralctl offer check` and `teneralctl offer witness` run it: they do
//! not link the kernel, which alone makes cages and runs the gate.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::gates::{self, Kernel};
use crate::gate::checks::bare_env;
use crate::runner::{self, Launch, Limits, Profile, Runner};
use crate::settings::Settings;
use crate::spawn::Spec;
use teneral_core::commit::Commit;
use teneral_offer::gates::Also;

/// How long the owner's extra command may run when the check limit is off.
pub const ALSO_LIMIT: Duration = Duration::from_secs(1800);

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error(transparent)]
    Repo(#[from] crate::repo::RepoError),
    #[error(transparent)]
    Cage(#[from] crate::confine::CageError),
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0:?} is no commit of this repository; fetch it first")]
    Unknown(String),
}

/// Runs `command` with `sh -c` in the cage's gate profile on a fresh
/// checkout of `commit`, with the checks' bare environment and limits.
pub async fn also(kernel: &Kernel<'_>, commit: &Commit, command: &str) -> Result<Also, CliError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| CliError::Io { what, source }
    };
    let repo = crate::repo::open(kernel.home)?;
    let oid = crate::repo::commit_id(&repo, kernel.home, commit.as_str())?;
    let place =
        kernel.home.join(teneral_offer::OFFERS_DIR).join(format!(".also-{}", commit.as_str()));
    let checkout = place.join("checkout");
    crate::repo::checkout_at(&repo, &checkout, oid)?;
    let tmp = checkout.join(".tmp");
    std::fs::create_dir_all(&tmp).map_err(io("cannot make the command's temp dir"))?;
    let target = kernel.home.join(crate::gate::TARGET_DIR);
    std::fs::create_dir_all(&target).map_err(io("cannot make the gate's target dir"))?;
    let mut spec = Spec::new("sh", &checkout).arg("-c").arg(command);
    spec.env = bare_env(&tmp, &target);
    let limits = Limits::for_check(kernel.settings);
    let limits = limits.with_runtime_max(Some(limits.runtime_max.unwrap_or(ALSO_LIMIT)));
    let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![target] };
    let unit = runner::systemd::gate_unit(commit, "also");
    let started = Instant::now();
    let ran = kernel.runner.run(&unit, Launch::new(spec, limits).caged(profile)).await;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&place);
    let (ended, running) = ran?;
    let exit = match (ended.over_time, ended.cage_step()) {
        (true, _) => format!("stopped after {:.0} s, its limit", seconds),
        (false, Some(step)) => format!("{} ({step})", ended.exit),
        (false, None) => ended.exit.to_string(),
    };
    Ok(Also {
        command: command.to_owned(),
        passed: ended.exit.success() && !ended.over_time,
        exit,
        seconds,
        output: running.output_tail(),
    })
}

/// `teneral offer-gates`: the gates on `commit` of the individual at `home`,
/// then `also` when given (whatever the gates said); one JSON object on stdout.
/// Exits 0 when everything passed, 1 when anything failed.
pub async fn main(home: &Path, commit: &str, also_command: Option<&str>) -> Result<i32, CliError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| CliError::Io { what, source }
    };
    let settings = Settings::load(home)?;
    let repo = crate::repo::open(home)?;
    let oid = repo
        .revparse_single(commit)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| CliError::Unknown(commit.to_owned()))?
        .id();
    let commit = crate::repo::commit_of(oid);
    crate::spawn::start_reaper().map_err(io("cannot become a child subreaper"))?;
    let exe = std::env::current_exe().map_err(io("the kernel's own program"))?;
    let cage = crate::confine::Cage::decide(
        settings.unsafe_unconfined,
        &settings.test.pretend_missing,
        exe.clone(),
    )?;
    let runner = Runner::choose(settings.runner, cage).await?.for_individual(home);
    let kernel = Kernel { home, settings: &settings, runner: &runner, kernel_exe: &exe };
    let gates = gates::run(&kernel, &commit).await;
    let also = match also_command {
        Some(command) => Some(also(&kernel, &commit, command).await?),
        None => None,
    };
    let passed = gates.passed() && also.as_ref().is_none_or(|a| a.passed);
    let out = json!({
        "commit": commit.as_str(),
        "gates": gates.to_json(),
        "also": also.as_ref().map(Also::to_json),
        "caged": runner.caged(),
    });
    println!("{out}");
    Ok(if passed { 0 } else { 1 })
}
