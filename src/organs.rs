//! Organs: native dependencies a commit pins in `body/organs.json`, found by
//! the body through `TENERAL_ORGANS`.
//!
//! - [`pins`]: the pin file's schema (pure);
//! - [`unpack`]: the unpacker, a security boundary against hostile archives,
//!   with its pure rules in [`unpack::resolve`];
//! - [`unpacker`]: the unpacker run as a caged process of its own (the
//!   `unpack` profile), the archive given as its stdin;
//! - [`staged`]: the kernel's check of the tree the caged unpacker left;
//! - [`steps`]: marks of where making a tree spends its time, for a benchmark;
//! - [`cache`]: `.teneral/organs/` (archives, trees, sets);
//! - [`gate`]: running an organ's check.
//!
//! [`prepare`] is what a generation's start needs; [`gate()`] is what the
//! mutation gate needs; `teneral organs` runs the gate's steps for a
//! workspace. The kernel never fetches an archive and never removes an
//! archive or a tree, so a rolled-back generation finds its tree. A commit
//! that pins nothing (no pin file, or `{}`) gets `None` and nothing else
//! happens.

pub mod cache;
pub mod gate;
pub mod pins;
pub mod staged;
pub mod steps;
pub mod unpack;
pub mod unpacker;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cache::{ArchiveError, Cache, TreeError};
use gate::CheckError;
use pins::{Pin, PinError, MAX_PIN_FILE, PIN_FILE};
pub use unpacker::Unpacker;

/// How long an organ's check may run.
pub const CHECK_LIMIT: Duration = Duration::from_secs(60);
/// How long unpacking one organ's archive may take, at the gate and at a
/// generation's start: the caged unpacker's own deadline (the runner stops
/// it [`unpacker::STOP_AFTER`] later). The largest archive allowed
/// (256 MiB, at most 1 GiB and 20,000 entries unpacked) takes a few
/// seconds on an ordinary disk; a hostile archive is stopped here, naming
/// the entry it reached.
pub const UNPACK_LIMIT: Duration = Duration::from_secs(60);

/// Why a commit's organs cannot be used. Every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OrganError {
    #[error(
        "{path}: {reason}; mend the pin file: each organ name (a-z, 0-9, -) maps to url, sha256 \
         and optionally dir and check, and nothing else"
    )]
    Pins { path: PathBuf, reason: PinError },
    #[error("{path}: {what}; body/organs.json must be a regular file of at most 64 KiB")]
    PinFile { path: PathBuf, what: String },
    #[error(
        "organ {organ}: {}archive {sha256} is not in the cache at {}; download {url} there first",
        if *.unpacked { "" } else { "it is not unpacked, and " }, path.display()
    )]
    ArchiveMissing { organ: String, sha256: String, path: PathBuf, url: String, unpacked: bool },
    #[error("organ {organ}: the archive at {}: {reason}; download {url} there again", path.display())]
    Archive { organ: String, path: PathBuf, url: String, reason: ArchiveError },
    #[error(
        "organ {organ}: the archive at {} hashes to {got}, not to the pinned {want}; download \
         {url} again and compare it with the hash its publisher gives, or pin the hash it has",
        path.display()
    )]
    WrongHash { organ: String, path: PathBuf, url: String, want: String, got: String },
    #[error(
        "organ {organ}: archive {sha256} cannot be unpacked: {error}; an organ must be a release \
         archive of plain files, directories and links that stay inside it: pin another release"
    )]
    Unpack { organ: String, sha256: String, error: TreeError },
    #[error(
        "organ {organ}: dir {dir:?} is not a directory in its archive; set dir to the directory \
         that wraps the archive's contents (tar -tzf lists them), or remove it"
    )]
    Dir { organ: String, dir: String },
    #[error(
        "organ {organ}: its check {words:?} did not pass: {error}\nmake it pass with `teneral \
         organs` in the workspace, or change the pin's check"
    )]
    Check { organ: String, words: Vec<String>, error: CheckError },
    #[error("the organ cache at {}: {source}; the user running teneral must be able to write it", path.display())]
    Cache { path: PathBuf, source: std::io::Error },
}

impl OrganError {
    /// An archive is gone with its tree: at a generation's start this stops
    /// the supervisor (the install lost a file; the generation is sound).
    pub fn archive_missing(&self) -> bool {
        matches!(self, OrganError::ArchiveMissing { .. })
    }
}

/// Reads the pins of the checkout at `checkout`; empty when it pins nothing.
pub fn read_pins(checkout: &Path) -> Result<Vec<Pin>, OrganError> {
    let path = checkout.join(PIN_FILE);
    let bad = |what: String| OrganError::PinFile { path: path.clone(), what };
    let meta = match path.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(bad(format!("cannot be read ({e})"))),
    };
    if !meta.is_file() {
        return Err(bad("is not a regular file".into()));
    }
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_PIN_FILE + 1).read_to_string(&mut text))
        .map_err(|e| bad(format!("cannot be read as UTF-8 text ({e})")))?;
    if text.len() as u64 > MAX_PIN_FILE {
        return Err(bad("is larger than 64 KiB".into()));
    }
    pins::parse(&text).map_err(|reason| OrganError::Pins { path: path.clone(), reason })
}

/// When an existing tree is enough, and when the archive must be there too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A generation's start: a tree that exists is used as it is; a missing
    /// one is unpacked again from its archive.
    Start,
    /// The gate: the archive must be there and hash to the pin, always.
    Gate,
}

/// What [`prepare_as`] made ready.
struct Prepared {
    set: PathBuf,
    roots: Vec<(Pin, PathBuf)>,
}

/// For the tree at `checkout` (a checkout of some commit; its
/// `body/organs.json`): unpack every tree that is missing from its archive
/// with `unpacker` (the archive's hash checked), and link the set. An
/// existing tree is used as it is (it was unpacked from an archive with
/// that hash). Ok(None) when nothing is pinned.
pub async fn prepare(
    home: &Path,
    checkout: &Path,
    unpacker: &Unpacker<'_>,
) -> Result<Option<PathBuf>, OrganError> {
    Ok(prepare_as(home, checkout, Mode::Start, unpacker).await?.map(|p| p.set))
}

/// The gate step: every archive present with the pinned hash, unpacked
/// with `unpacker` unless it was before, the set linked; then each pin's
/// `check` run in the organ's root with `env` (the bare check environment
/// the caller gives) through the unpacker's runner within `limits` (at
/// most [`CHECK_LIMIT`] of running), as a unit named after `tag` (the
/// short form of the commit checked) and the organ.
pub async fn gate(
    home: &Path,
    checkout: &Path,
    env: &[(String, OsString)],
    unpacker: &Unpacker<'_>,
    limits: crate::runner::Limits,
    tag: &str,
) -> Result<Option<PathBuf>, OrganError> {
    let runner = unpacker.runner;
    let prepared = prepare_as(home, checkout, Mode::Gate, unpacker).await?;
    let Some(prepared) = prepared else { return Ok(None) };
    let limit = limits.runtime_max.map_or(CHECK_LIMIT, |l| l.min(CHECK_LIMIT));
    let limits = limits.with_runtime_max(Some(limit));
    for (pin, root) in &prepared.roots {
        if let Some(words) = &pin.check {
            let unit = crate::runner::systemd::check_unit(tag, &format!("organ-{}", pin.name));
            gate::run_check(runner, &unit, root, words, env, limits).await.map_err(|error| {
                OrganError::Check { organ: pin.name.clone(), words: words.clone(), error }
            })?;
        }
    }
    Ok(Some(prepared.set))
}

async fn prepare_as(
    home: &Path,
    checkout: &Path,
    mode: Mode,
    unpacker: &Unpacker<'_>,
) -> Result<Option<Prepared>, OrganError> {
    let pins = read_pins(checkout)?;
    if pins.is_empty() {
        return Ok(None);
    }
    let cache = Cache::new(home);
    let mut roots = Vec::new();
    for pin in &pins {
        let tree = ensure_tree(&cache, pin, mode, unpacker).await?;
        let root = match &pin.dir {
            Some(dir) => tree.join(dir),
            None => tree,
        };
        if !root.metadata().is_ok_and(|m| m.is_dir()) {
            let dir = pin.dir.clone().unwrap_or_default();
            return Err(OrganError::Dir { organ: pin.name.clone(), dir });
        }
        roots.push((pin.clone(), root));
    }
    let set = cache::link_set(&cache, &pins)
        .map_err(|source| OrganError::Cache { path: cache.sets(), source })?;
    Ok(Some(Prepared { set, roots }))
}

/// The organ's tree, unpacked if missing; in the gate, its archive checked.
async fn ensure_tree(
    cache: &Cache,
    pin: &Pin,
    mode: Mode,
    unpacker: &Unpacker<'_>,
) -> Result<PathBuf, OrganError> {
    let tree = cache.tree(&pin.sha256);
    let unpacked = tree.is_dir();
    if unpacked && mode == Mode::Start {
        return Ok(tree);
    }
    let path = cache.archive(&pin.sha256);
    let organ = pin.name.clone();
    let file = match cache::open_archive(&path) {
        Ok(f) => f,
        Err(ArchiveError::Missing) => {
            let (sha256, url) = (pin.sha256.clone(), pin.url.clone());
            return Err(OrganError::ArchiveMissing { organ, sha256, path, url, unpacked });
        }
        Err(reason) => {
            return Err(OrganError::Archive { organ, path, url: pin.url.clone(), reason })
        }
    };
    let read_err = |e: std::io::Error| OrganError::Archive {
        organ: organ.clone(),
        path: path.clone(),
        url: pin.url.clone(),
        reason: ArchiveError::Read(e),
    };
    let wrong_hash = |got: String| OrganError::WrongHash {
        organ: organ.clone(),
        path: path.clone(),
        url: pin.url.clone(),
        want: pin.sha256.clone(),
        got,
    };
    if unpacked {
        let got = tokio::task::spawn_blocking(move || cache::hash(file))
            .await
            .map_err(|e| read_err(std::io::Error::other(e)))?
            .map_err(read_err)?;
        return if got == pin.sha256 { Ok(tree) } else { Err(wrong_hash(got)) };
    }
    match cache::make_tree(cache, &pin.sha256, file, unpacker).await {
        Ok(tree) => Ok(tree),
        Err(TreeError::WrongHash(got)) => Err(wrong_hash(got)),
        Err(TreeError::Run(unpacker::RunFailed::Read(e))) => Err(read_err(e)),
        Err(error) => Err(OrganError::Unpack { organ, sha256: pin.sha256.clone(), error }),
    }
}

/// The individual a checkout belongs to, for the cache: the nearest
/// directory at or above `checkout` that holds `.teneral/` (the workspace
/// `.teneral/candidate` is two levels below it).
pub fn individual_of(checkout: &Path) -> Option<PathBuf> {
    checkout.ancestors().find(|dir| dir.join(".teneral").is_dir()).map(Path::to_owned)
}
