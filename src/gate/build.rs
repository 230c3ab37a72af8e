//! The candidate's body built for its smoke run and, once accepted, for its
//! generation: `cargo build --release` in the gate's own checkout and target
//! directory, in the cage's `gate` profile like every check. The body's
//! tests are built in the same profile there ([`super::plan`]), so cargo
//! finds the binary they built fresh and this step only copies it out;
//! nothing is compiled twice. The binary is kept where
//! [`crate::generation::build`] keeps a generation's, so the generation
//! starts from the very file the smoke run ran.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::commit::short;
use crate::generation::{copy_built, BIN_DIR};
use crate::runner::{self, Launch, Limits, Profile, Runner};
use crate::spawn::Spec;

/// The built body of `candidate`, from `checkout` with `env` (the checks'
/// bare environment, whose `CARGO_TARGET_DIR` is `target`).
pub async fn release(
    runner: &Runner,
    home: &Path,
    checkout: &Path,
    candidate: &str,
    env: &[(String, OsString)],
    target: &Path,
    limits: Limits,
) -> Result<PathBuf, String> {
    let kept = home.join(BIN_DIR).join(candidate).join("teneral-body");
    if kept.is_file() {
        return Ok(kept);
    }
    let mut spec = Spec::new("cargo", checkout.join("body"));
    spec.args = ["build", "--release", "--locked"].map(OsString::from).to_vec();
    spec.env = env.to_vec();
    let mut launch = Launch::new(spec, limits);
    if runner.caged() {
        // The gate fetched the body's crates before its checks.
        launch.spec.args.push("--offline".into());
        let writable = vec![target.to_owned()];
        launch = launch.caged(Profile::Gate { checkout: checkout.to_owned(), writable });
    }
    let unit = runner::systemd::gate_unit(candidate, "build");
    let (ended, run) = runner
        .run(&unit, launch)
        .await
        .map_err(|e| format!("cannot start cargo to build the body: {e}; is cargo on PATH?"))?;
    if !ended.exit.success() {
        let (exit, tail) = (ended.exit, run.stderr_tail());
        return Err(format!("the body of {} does not build ({exit}):\n{tail}", short(candidate)));
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
