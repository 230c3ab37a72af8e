//! Which kernel runs a generation, and the building of a generation's own.
//!
//! A generation's *kernel key* is the git tree of its commit without what
//! never makes a new kernel: `body/`, `BACKLOG.md` and the documents the
//! species rule takes like a body change (README, LICENSE*, docs/, CI). A
//! generation runs the install's kernel (the launcher's own binary) when its
//! key is the install's (the owner's checkout, HEAD of the individual's
//! directory), or when it never got a kernel of its own (a generation from
//! before the launcher); it runs its own kernel when a species mutation
//! brought one: the trial names it, or it was built and kept before.
//!
//! A generation's kernel is built from `.teneral/live` with cargo, through
//! the runner, in the cage's gate profile (the checkout and the kernels'
//! target directory writable, nothing else of the individual), `--offline
//! --locked` after a `cargo fetch` outside the cage, and kept per key in
//! `.teneral/kernels/<key>/teneral`: a key built once is never built again.
//! A tree that has the owner's client (`crates/ctl`) gets its `teneralctl`
//! built in the same cargo run and kept beside it, so that the generation's
//! `talk`, `back` and `accept` are its own ([`RUNNING_FILE`]).
//! The kernels' target directory is their own (`.teneral/kernels/target`),
//! never the gate's, which the checks of any candidate may write.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::generation::{lock_target, toolchain_env, touch_tree};
use crate::runner::{self, Launch, Limits, Profile, Runner};
use crate::spawn::Spec;
use teneral_core::{fsutil, log};

/// Where built kernels are kept, one directory per kernel key.
pub const KERNELS_DIR: &str = ".teneral/kernels";
/// The cargo target directory of kernel builds.
pub const KERNELS_TARGET: &str = ".teneral/kernels/target";
/// Which kernel the launcher started last: its key, or `install`. The
/// owner's `teneralctl` reads it to run that kernel's own client.
pub const RUNNING_FILE: &str = ".teneral/kernels/running";
/// A kernel tree with this manifest has the owner's client, `teneralctl`,
/// which is built and kept beside its kernel.
const CLIENT_MANIFEST: &str = "crates/ctl/Cargo.toml";

/// Top-level entries of a tree that never make a new kernel. Kept equal to
/// the species rule's changeable paths and documents (asserted in
/// `species::rule_tests`).
pub fn not_kernel(top: &str) -> bool {
    matches!(top, "body" | "BACKLOG.md" | "README.md" | "docs" | ".github" | ".ci" | "site")
        || top.starts_with("LICENSE")
}

/// The kernel key of `commit`: its tree without what [`not_kernel`] names.
pub fn key_of(repo: &Repository, commit: Oid) -> Result<String, git2::Error> {
    let tree = repo.find_commit(commit)?.tree()?;
    let mut builder = repo.treebuilder(Some(&tree))?;
    let drop: Vec<String> =
        tree.iter().filter_map(|e| e.name().map(str::to_owned)).filter(|n| not_kernel(n)).collect();
    for name in drop {
        builder.remove(&name)?;
    }
    Ok(builder.write()?.to_string())
}

/// The launch file of `commit`, if its tree has one.
pub fn launch_file(repo: &Repository, commit: Oid) -> Result<Option<Vec<u8>>, git2::Error> {
    let tree = repo.find_commit(commit)?.tree()?;
    let Some(entry) = tree.get_name(super::contract::LAUNCH_FILE) else { return Ok(None) };
    let blob = entry.to_object(repo)?.peel_to_blob()?;
    Ok(Some(blob.content().to_vec()))
}

/// Which kernel runs a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// The install's: the launcher's own binary.
    Install,
    /// The generation's own, built from its tree, by kernel key.
    Own(String),
}

impl Which {
    /// The value of [`super::contract::KERNEL_VARIABLE`] for this kernel.
    pub fn word(&self) -> &str {
        match self {
            Which::Install => "install",
            Which::Own(key) => key,
        }
    }

    /// The kernel this process is, as its launcher said.
    pub fn here() -> Which {
        match std::env::var(super::contract::KERNEL_VARIABLE) {
            Ok(key) if !key.is_empty() && key != "install" => Which::Own(key),
            _ => Which::Install,
        }
    }
}

/// The pure rule: `key` is the generation's, `install` the install's,
/// `trial` the kernel on trial when this generation is on trial, `kept`
/// whether a kernel of this key was built before.
pub fn choose(key: &str, install: Option<&str>, trial: Option<&str>, kept: bool) -> Which {
    if install == Some(key) {
        Which::Install
    } else if trial == Some(key) || kept {
        Which::Own(key.to_owned())
    } else {
        Which::Install
    }
}

/// Which kernel runs generation `commit` of the individual at `home`.
pub fn which(home: &Path, repo: &Repository, commit: Oid) -> Result<Which, git2::Error> {
    let key = key_of(repo, commit)?;
    let install = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .and_then(|c| key_of(repo, c.id()).ok());
    let trial = super::trial::Trial::load(home)
        .ok()
        .flatten()
        .filter(|t| t.commit == commit.to_string())
        .map(|t| t.kernel);
    Ok(choose(&key, install.as_deref(), trial.as_deref(), kept(home, &key).is_file()))
}

/// Where the kernel of `key` is kept.
pub fn kept(home: &Path, key: &str) -> PathBuf {
    home.join(KERNELS_DIR).join(key).join("teneral")
}

/// Where the client (`teneralctl`) of the kernel of `key` is kept, if its
/// tree has one.
pub fn kept_client(home: &Path, key: &str) -> PathBuf {
    home.join(KERNELS_DIR).join(key).join("teneralctl")
}

/// Notes which kernel the launcher starts (`teneralctl` reads it).
pub fn note_running(home: &Path, which: &Which) -> std::io::Result<()> {
    let path = home.join(RUNNING_FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    fsutil::write_atomic(&path, format!("{}\n", which.word()).as_bytes())
}

/// Why a generation's kernel could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot start cargo to build the kernel: {0}; is cargo on PATH?")]
    Run(#[from] runner::RunError),
    #[error("cannot prepare the kernel's build ({what}): {source}")]
    Io { what: String, source: std::io::Error },
    #[error("the kernel does not build ({exit}):\n{tail}")]
    Failed { exit: crate::spawn::Exit, tail: String },
}

fn io(what: &str) -> impl Fn(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io { what: what.to_owned(), source }
}

/// The kernel of `key`, built from `checkout` (the generation's
/// `.teneral/live`) unless kept already.
pub async fn build(
    runner: &Runner,
    home: &Path,
    checkout: &Path,
    key: &str,
    limits: Limits,
) -> Result<PathBuf, BuildError> {
    let kept = kept(home, key);
    if kept.is_file() {
        return Ok(kept);
    }
    let target = home.join(KERNELS_TARGET);
    let _lock = lock_target(&target).await.map_err(io("lock its target dir"))?;
    if kept.is_file() {
        return Ok(kept);
    }
    let began = std::time::Instant::now();
    log::info(format!("building the kernel {} from {}", short(key), checkout.display()));
    touch_tree(checkout).map_err(io("touch the checkout"))?;
    let tmp = target.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(io("make its temp dir"))?;
    let mut env = toolchain_env();
    env.push(("CARGO_TARGET_DIR".into(), target.clone().into()));
    env.push(("TMPDIR".into(), tmp.into()));
    let cargo = |args: &[&str]| {
        let mut spec = Spec::new("cargo", checkout);
        spec.args = args.iter().map(OsString::from).collect();
        spec.env = env.clone();
        spec
    };
    let unit = |step| runner::systemd::build_unit_of(key, step, "kernel");
    // With its client when the tree has one: one build, the same cage.
    let client = checkout.join(CLIENT_MANIFEST).is_file();
    let args: &[&str] = if client {
        &["build", "--locked", "--workspace", "--bin", "teneral", "--bin", "teneralctl"]
    } else {
        &["build", "--locked", "--bin", "teneral"]
    };
    let mut build = Launch::new(cargo(args), limits);
    if runner.caged() {
        let fetch = Launch::new(cargo(&["fetch", "--locked"]), limits);
        runner.run(&unit("fetch"), fetch).await?;
        if let Err(e) = crate::confine::sources::readable_by_checks() {
            teneral_core::log::warn(format!(
                "cannot open the fetched crate sources to the cage: {e}"
            ));
        }
        build.spec.args.push("--offline".into());
        build = build
            .caged(Profile::Gate { checkout: checkout.to_owned(), writable: vec![target.clone()] });
    }
    let (ended, run) = runner.run(&unit("build"), build).await?;
    if !ended.exit.success() {
        return Err(BuildError::Failed { exit: ended.exit, tail: run.stderr_tail() });
    }
    // The client first: a kept kernel is what says the key was built.
    if client {
        let kept_client = kept_client(home, key);
        keep(&target, "teneralctl", &kept_client).map_err(io("keep the built teneralctl"))?;
    }
    keep(&target, "teneral", &kept).map_err(io("keep the built kernel"))?;
    log::info(format!("built the kernel {} in {:.2} s", short(key), began.elapsed().as_secs_f64()));
    Ok(kept)
}

/// Copies the built kernel out of the target directory (written by the
/// kernel's build scripts): beneath it, following no link, a regular file.
fn keep(target: &Path, name: &str, kept: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = kept.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = kept.with_extension("tmp");
    let mut built = fsutil::open_beneath(target, &Path::new("debug").join(name))?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&tmp)?;
    std::io::copy(&mut built, &mut out)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&tmp, kept)
}

fn short(key: &str) -> &str {
    key.get(..12).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_of_a_generation() {
        let own = |k: &str| Which::Own(k.to_owned());
        // (generation's key, install's, trial's, kept) -> which
        let table = [
            ("a", Some("a"), None, false, Which::Install),
            ("a", Some("a"), Some("a"), true, Which::Install),
            ("b", Some("a"), Some("b"), false, own("b")),
            ("b", Some("a"), None, true, own("b")),
            ("b", Some("a"), Some("c"), false, Which::Install),
            ("b", None, None, false, Which::Install),
            ("b", None, Some("b"), false, own("b")),
        ];
        for (key, install, trial, kept, want) in table {
            assert_eq!(
                choose(key, install, trial, kept),
                want,
                "{key} {install:?} {trial:?} {kept}"
            );
        }
    }

    #[test]
    fn what_makes_no_kernel() {
        for top in
            ["body", "BACKLOG.md", "README.md", "docs", ".github", ".ci", "site", "LICENSE-MIT"]
        {
            assert!(not_kernel(top), "{top}");
        }
        for top in ["src", "Cargo.toml", "Cargo.lock", "launch.json", "SIGNERS", "units", "bodyx"] {
            assert!(!not_kernel(top), "{top}");
        }
    }
}
