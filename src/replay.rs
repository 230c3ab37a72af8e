//! Replay: two generations side by side on the same stimuli.
//!
//! `teneral replay --from A --to B --last N` takes the last N owner lines
//! and inbox envelopes of the individual's journal ([`stimuli`]), builds the
//! body of each generation as the kernel and the gate do (caged, kept per
//! commit in `.teneral/bin/`, so a body the gate or a generation built
//! already, for that commit or another with the same `body/` tree, is not
//! built again), and runs each stimulus through each body on
//! a throwaway individual in the cage against a stand-in model scripted
//! with what the model answered at the time ([`run`]). The side-by-side is
//! [`table`].
//!
//! Invariants: it reads the individual's journal and writes nothing of it,
//! its state or its git references; the throwaway individuals live under
//! `.teneral/replay/` and are removed after each run; no body reaches a real
//! provider (its model is the stand-in, its key a dummy one, its network
//! loopback only with the stand-in's port forwarded in). The only lasting
//! effect is the build cache (`.teneral/bin/`, `.teneral/target/`).

pub mod run;
pub mod stimuli;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::runner::{Limits, Runner};
use crate::settings::Settings;
use crate::{generation, repo};
use stimuli::{Collector, NameError, Named};
pub use table::Report;
use teneral_core::commit::Commit;
use teneral_core::journal::{parse_line, JOURNAL_PATH};

/// How long one run may last when `TENERAL_SMOKE_SECONDS` is 0 (no limit
/// for the smoke run; a replay of many stimuli needs one).
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error(transparent)]
    Repo(#[from] crate::repo::RepoError),
    #[error("cannot read the journal {}: {source}; check that it is readable", path.display())]
    Journal { path: PathBuf, source: std::io::Error },
    #[error(
        "the journal holds no owner line or inbox envelope yet, so there is nothing to replay; \
         talk to the agent first (teneralctl talk)"
    )]
    NoStimuli,
    #[error("--last must be 1 or more")]
    NoneAsked,
    #[error("{0}")]
    Name(#[from] NameError),
    #[error(
        "{given:?} is no generation of this individual's journal and no commit git has; \
         `teneralctl generations` lists them"
    )]
    Unknown { given: String },
    #[error(transparent)]
    Cage(#[from] crate::confine::CageError),
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    #[error(transparent)]
    Build(#[from] generation::BuildError),
    #[error("the smoke run to compare with failed: {0}")]
    Smoke(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// What the owner asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub from: String,
    pub to: String,
    pub last: usize,
    /// Also time one smoke run of A's body, as the gate makes it, for
    /// `scripts/bench-generations` (the gate's smoke place is used: not
    /// while the individual's kernel runs).
    pub smoke: bool,
}

/// The replay of the individual at `home`.
pub async fn replay(home: &Path, options: &Options) -> Result<Report, ReplayError> {
    if options.last == 0 {
        return Err(ReplayError::NoneAsked);
    }
    let settings = Settings::load(home)?;
    let git = repo::open(home)?;
    let (stimuli, lineage) = read_journal(home, options.last)?;
    if stimuli.is_empty() {
        return Err(ReplayError::NoStimuli);
    }
    let commits: Vec<&str> = lineage.generations().iter().map(|g| g.commit.as_str()).collect();
    let current = lineage.current().map(|g| g.commit.as_str());
    let from = commit_named(&git, &options.from, &commits, current)?;
    let to = commit_named(&git, &options.to, &commits, current)?;

    let (runner, exe) = caged_runner(home, &settings).await?;
    let body_a = body_of(&runner, &git, home, &from, &settings).await?;
    let body_b = body_of(&runner, &git, home, &to, &settings).await?;

    let limit = match settings.smoke_seconds {
        0 => DEFAULT_LIMIT,
        s => Duration::from_secs(u64::from(s)),
    };
    let ground =
        run::Ground { home, settings: &settings, runner: &runner, kernel_exe: &exe, limit };
    let mut rows = Vec::with_capacity(stimuli.len());
    for (i, stimulus) in stimuli.iter().enumerate() {
        let a = ground.run(&from, &body_a, stimulus, &format!("a-{i}")).await;
        let b = ground.run(&to, &body_b, stimulus, &format!("b-{i}")).await;
        rows.push(table::Row {
            stimulus: stimulus.text().to_owned(),
            seq: stimulus.seq,
            scripted: !stimulus.script.is_empty(),
            a,
            b,
        });
    }
    let smoke_seconds = match options.smoke {
        true => Some(smoke(&ground, &from, &body_a).await.map_err(ReplayError::Smoke)?),
        false => None,
    };
    let _ = std::fs::remove_dir(home.join(run::REPLAY_DIR));
    Ok(Report { from: from.to_string(), to: to.to_string(), rows, smoke_seconds })
}

/// The wall time of one smoke run of `binary`, the body of `commit`, as the
/// gate makes it ([`crate::smoke`]): set-up, start, answer, stop.
pub async fn smoke(
    ground: &run::Ground<'_>,
    commit: &Commit,
    binary: &Path,
) -> Result<f64, String> {
    let checkout = ground.home.join(run::REPLAY_DIR).join("smoke-checkout");
    std::fs::create_dir_all(&checkout).map_err(|e| format!("{}: {e}", checkout.display()))?;
    let run = crate::smoke::Smoke {
        home: ground.home,
        checkout: &checkout,
        binary,
        commit,
        settings: ground.settings,
        runner: ground.runner,
        organs: None,
        limit: Some(ground.limit),
        kernel_exe: ground.kernel_exe,
    };
    let began = std::time::Instant::now();
    let timeline = run.run().await;
    let took = began.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&checkout);
    timeline.map(|_| took)
}

/// One pass over the journal, oldest first: the last `last` stimuli and the
/// generations.
pub fn read_journal(
    home: &Path,
    last: usize,
) -> Result<(Vec<stimuli::Stimulus>, teneral_core::generations::Lineage), ReplayError> {
    let path = home.join(JOURNAL_PATH);
    let failed = |source| ReplayError::Journal { path: path.clone(), source };
    let file = teneral_core::journal::open_file(&path, teneral_core::journal::Access::Read)
        .map_err(failed)?;
    let mut lines = teneral_core::journal::Forwards::new(file);
    let mut collector = Collector::new(last);
    while let Some(line) = lines.next_line().map_err(failed)? {
        if let Some(event) = parse_line(line) {
            collector.take(&event);
        }
    }
    Ok(collector.finish())
}

/// The full commit `given` names: a generation of the journal, or a commit
/// git has.
pub fn commit_named(
    git: &git2::Repository,
    given: &str,
    commits: &[&str],
    current: Option<&str>,
) -> Result<Commit, ReplayError> {
    let unknown = || ReplayError::Unknown { given: given.to_owned() };
    let oid = match stimuli::resolve(given, commits, current)? {
        Named::Known(full) => git2::Oid::from_str(&full).map_err(|_| unknown())?,
        Named::Prefix(prefix) => git.find_commit_by_prefix(&prefix).map_err(|_| unknown())?.id(),
    };
    git.find_commit(oid).map_err(|_| unknown())?;
    Ok(repo::commit_of(oid))
}

/// The runner a replay's or an evaluation's runs go through, with this
/// process as their children's subreaper, and the kernel's own program.
pub async fn caged_runner(
    home: &Path,
    settings: &Settings,
) -> Result<(Runner, PathBuf), ReplayError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| ReplayError::Io { what, source }
    };
    crate::spawn::start_reaper().map_err(io("cannot become a child subreaper"))?;
    let exe = std::env::current_exe().map_err(io("the kernel's own program"))?;
    let cage = crate::confine::Cage::decide(
        settings.unsafe_unconfined,
        &settings.test.pretend_missing,
        exe.clone(),
    )?;
    let runner = Runner::choose(settings.runner, cage).await?.for_individual(home);
    Ok((runner, exe))
}

/// The body of `commit`: the one kept in `.teneral/bin/` (built by a
/// generation's start or the gate), else built now from a checkout of it.
pub async fn body_of(
    runner: &Runner,
    git: &git2::Repository,
    home: &Path,
    commit: &Commit,
    settings: &Settings,
) -> Result<PathBuf, ReplayError> {
    let kept = home.join(generation::BIN_DIR).join(commit).join("teneral-body");
    if kept.is_file() {
        return Ok(kept);
    }
    let oid = repo::commit_id(git, home, commit.as_str())?;
    if let Some(same) = body_tree(git, oid).and_then(|tree| kept_for_tree(git, home, tree)) {
        return Ok(same);
    }
    let checkout = home.join(run::REPLAY_DIR).join(format!("checkout-{}", commit.short()));
    repo::checkout_at(git, &checkout, oid)?;
    let limits = Limits::for_build(settings);
    let built = generation::build(runner, home, &checkout, commit, &limits).await;
    let _ = std::fs::remove_dir_all(&checkout);
    Ok(built?)
}

/// The id of the `body/` tree of `commit`.
fn body_tree(git: &git2::Repository, commit: git2::Oid) -> Option<git2::Oid> {
    let tree = git.find_commit(commit).and_then(|c| c.tree()).ok()?;
    let id = tree.get_name("body").map(|entry| entry.id());
    id
}

/// A body kept for another commit whose `body/` is the same tree: the build
/// reads nothing else, so it is the same program.
fn kept_for_tree(git: &git2::Repository, home: &Path, tree: git2::Oid) -> Option<PathBuf> {
    let kept = std::fs::read_dir(home.join(generation::BIN_DIR)).ok()?;
    kept.flatten().find_map(|entry| {
        let name = entry.file_name();
        let oid = git2::Oid::from_str(name.to_str()?).ok()?;
        let binary = entry.path().join("teneral-body");
        (binary.is_file() && body_tree(git, oid) == Some(tree)).then_some(binary)
    })
}

/// `teneral replay`: the report, as a table or JSON, on stdout.
pub async fn main(home: &Path, options: &Options, json: bool) -> Result<i32, ReplayError> {
    let report = replay(home, options).await?;
    if json {
        println!("{}", table::to_json(&report));
    } else {
        println!("{}", table::text(&report).join("\n"));
    }
    Ok(0)
}
