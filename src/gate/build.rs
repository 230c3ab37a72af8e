//! The candidate's body built for its smoke run and, once accepted, for its
//! generation: `cargo build --release` in the gate's own checkout and target
//! directory, in the cage's `gate` profile like every check, and beside the
//! checks (it needs none of them; it is in the release profile, whose
//! directory cargo locks apart from the checks'). The binary is kept where
//! [`crate::generation::build`] keeps a generation's, so the generation
//! starts from the very file the smoke run ran.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::parallel::Job;
use super::plan::Lane;
use crate::generation::{copy_built, BIN_DIR};
use crate::runner::{self, Ended, Launch, Limits, Profile, Running};
use crate::spawn::Spec;
use teneral_core::commit::short;
use teneral_core::commit::Commit;

/// Where the built body of `candidate` is kept.
pub fn kept(home: &Path, candidate: &Commit) -> PathBuf {
    home.join(BIN_DIR).join(candidate).join("teneral-body")
}

/// The build of `candidate` from `checkout` with `env` (the checks' bare
/// environment, whose `CARGO_TARGET_DIR` is `target`); `None` when its
/// body is kept already.
pub fn job(
    home: &Path,
    checkout: &Path,
    candidate: &Commit,
    env: &[(String, OsString)],
    target: &Path,
    limits: Limits,
    caged: bool,
) -> Option<Job> {
    if kept(home, candidate).is_file() {
        return None;
    }
    Some(build(checkout, candidate, env, target, limits, caged))
}

/// The same build of the running generation's body for the gate's
/// warm-up, though its binary is kept: it leaves the body's release
/// dependencies, and the body's incremental cache at the checkout's path,
/// in the gate's target directory, where a body change's build finds them.
pub fn warm_job(
    checkout: &Path,
    running: &Commit,
    env: &[(String, OsString)],
    target: &Path,
    limits: Limits,
    caged: bool,
) -> Job {
    build(checkout, running, env, target, limits, caged)
}

fn build(
    checkout: &Path,
    candidate: &Commit,
    env: &[(String, OsString)],
    target: &Path,
    limits: Limits,
    caged: bool,
) -> Job {
    let mut spec = Spec::new("cargo", checkout.join("body"));
    spec.args = ["build", "--release", "--locked"].map(OsString::from).to_vec();
    spec.env = env.to_vec();
    // Incremental, so a one-line change recompiles what it touched (under a
    // second for the seed body where a full release build of it takes half a
    // minute on two loaded cores), at the cost of a little cross-module
    // inlining in a program that mostly waits on its model.
    spec.env.push(("CARGO_PROFILE_RELEASE_INCREMENTAL".into(), "true".into()));
    let mut launch = Launch::new(spec, limits);
    if caged {
        // The gate fetched the body's crates before its checks.
        launch.spec.args.push("--offline".into());
        let writable = vec![target.to_owned()];
        launch = launch.caged(Profile::Gate { checkout: checkout.to_owned(), writable });
    }
    let unit = runner::systemd::gate_unit(candidate, "build");
    Job { unit, launch, lane: Lane::Build as usize }
}

/// Whether the build ended well; `Err` says how it did not.
pub fn ended(candidate: &Commit, ended: &Ended, run: &Running) -> Result<(), String> {
    if ended.exit.success() {
        return Ok(());
    }
    let (exit, tail) = (ended.exit, run.stderr_tail());
    let over = if ended.over_time { ", stopped at the limit of one build" } else { "" };
    Err(format!("the body of {} does not build ({exit}{over}):\n{tail}", short(candidate)))
}

/// Keeps the binary built in `target` for `candidate`, unless kept already.
pub fn keep(home: &Path, candidate: &Commit, target: &Path) -> Result<PathBuf, String> {
    let kept = kept(home, candidate);
    if kept.is_file() {
        return Ok(kept);
    }
    let keep = |e: std::io::Error| format!("cannot keep the built body at {}: {e}", kept.display());
    if let Some(dir) = kept.parent() {
        std::fs::create_dir_all(dir).map_err(keep)?;
    }
    let tmp = kept.with_extension("tmp");
    copy_built(target, &tmp).map_err(keep)?;
    std::fs::rename(&tmp, &kept).map_err(keep)?;
    Ok(kept)
}
