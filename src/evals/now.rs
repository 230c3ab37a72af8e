//! `teneral evals`: every evaluation on one generation's body now, as the
//! gate runs them ([`super::run_one`], the memo first), for the owner
//! (`teneralctl evals run`) and for `scripts/bench-evals`. Any generation
//! of the journal or commit git has, including one older than the
//! evaluations. It prints the results and journals nothing: the journal's
//! `eval.result` events are the gate's.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::memo::Memo;
use super::{load_all, run_one, EvalsError};
use crate::replay::{self, run::Ground, ReplayError};
use crate::settings::Settings;

/// What the owner asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// A generation as `teneralctl generations` names it, or `current`.
    pub generation: String,
    pub json: bool,
    /// Also time one smoke run of the same body, as the gate makes it (not
    /// while the individual's kernel runs: it uses the gate's smoke place).
    pub smoke: bool,
    /// Instead of running anything, draft evaluations from the last this
    /// many exchanges of the journal ([`super::draft`]).
    pub from_journal: Option<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum NowError {
    #[error(transparent)]
    Evals(#[from] EvalsError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("there is no evaluation in {}; write one (docs/evals.md)", .0.display())]
    None(std::path::PathBuf),
    #[error("the smoke run to compare with failed: {0}")]
    Smoke(String),
    #[error("cannot write the drafts in {}: {source}; check that the owner may write there", dir.display())]
    Draft { dir: std::path::PathBuf, source: std::io::Error },
}

/// Runs the evaluations of `home` on the generation asked for; prints them.
pub async fn main(home: &Path, options: &Options) -> Result<i32, NowError> {
    if let Some(last) = options.from_journal {
        return from_journal(home, last);
    }
    let evaluations = load_all(home)?;
    if evaluations.is_empty() {
        return Err(NowError::None(home.join(super::EVALS_DIR)));
    }
    let settings = Settings::load(home).map_err(ReplayError::from)?;
    let git = crate::repo::open(home).map_err(ReplayError::from)?;
    // An individual never started has no journal: a commit still names a body.
    let lineage = match replay::read_journal(home, 0) {
        Ok((_, lineage)) => lineage,
        Err(ReplayError::Journal { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            teneral_core::generations::Lineage::default()
        }
        Err(e) => return Err(e.into()),
    };
    let commits: Vec<&str> = lineage.generations().iter().map(|g| g.commit.as_str()).collect();
    let current = lineage.current().map(|g| g.commit.as_str());
    let commit = replay::commit_named(&git, &options.generation, &commits, current)?;
    let oid = crate::repo::commit_id(&git, home, commit.as_str()).map_err(ReplayError::from)?;
    let (_, tree) = crate::repo::tree_ids(&git, home, oid).map_err(ReplayError::from)?;

    let (runner, exe) = replay::caged_runner(home, &settings).await?;
    let binary = replay::body_of(&runner, &git, home, &commit, &settings).await?;
    let limit = match settings.smoke_seconds {
        0 => replay::DEFAULT_LIMIT,
        s => std::time::Duration::from_secs(u64::from(s)),
    };
    let ground = Ground { home, settings: &settings, runner: &runner, kernel_exe: &exe, limit };

    let memo = Memo::at(home);
    let began = Instant::now();
    let mut rows = Vec::with_capacity(evaluations.len());
    for evaluation in &evaluations {
        let (record, reused) = match memo.get(&tree, &evaluation.hash) {
            Some(kept) => (kept, true),
            None => {
                let place = format!("eval-run-{}", evaluation.name);
                let record = run_one(&ground, &commit, &binary, evaluation, &place).await;
                memo.put(&tree, &record);
                (record, false)
            }
        };
        rows.push(record.fields(&commit, "run", reused));
    }
    let seconds = began.elapsed().as_secs_f64();
    let smoke_seconds = match options.smoke {
        true => Some(replay::smoke(&ground, &commit, &binary).await.map_err(NowError::Smoke)?),
        false => None,
    };
    let _ = std::fs::remove_dir(home.join(replay::run::REPLAY_DIR));
    let passed = rows.iter().filter(|r| r["result"] == "passed").count();
    if options.json {
        let doc = json!({
            "generation": commit,
            "results": rows,
            "passed": passed,
            "seconds": seconds,
            "smoke_seconds": smoke_seconds,
        });
        println!("{doc}");
    } else {
        println!("{} passed {passed} of {} evaluations", commit.short(), rows.len());
        for row in &rows {
            let how = match (&row["failed_check"], &row["why"]) {
                (serde_json::Value::String(check), _) => {
                    format!(": {check}: {}", row["said"].as_str().unwrap_or_default())
                }
                (_, serde_json::Value::String(why)) => format!(": {why}"),
                _ => String::new(),
            };
            let kept = if row["reused"] == true { ", kept" } else { "" };
            println!(
                "  {:<24} {:<9} {:>6} tokens {:>6.2} s{kept}{how}",
                row["evaluation"].as_str().unwrap_or_default(),
                row["result"].as_str().unwrap_or_default(),
                row["tokens"],
                row["seconds"].as_f64().unwrap_or_default(),
            );
        }
    }
    Ok(0)
}

/// Drafts evaluations from the last `last` exchanges; says which files it
/// wrote.
fn from_journal(home: &Path, last: usize) -> Result<i32, NowError> {
    if last == 0 {
        return Err(NowError::Replay(ReplayError::NoneAsked));
    }
    let (stimuli, _) = replay::read_journal(home, last)?;
    if stimuli.is_empty() {
        return Err(NowError::Replay(ReplayError::NoStimuli));
    }
    let dir = home.join(super::EVALS_DIR);
    let written = super::draft::write(&dir, &stimuli)
        .map_err(|source| NowError::Draft { dir: dir.clone(), source })?;
    for path in &written {
        println!("wrote {}", path.display());
    }
    let kept = stimuli.len() - written.len();
    if kept > 0 {
        println!("left {kept} existing draft(s) as they were");
    }
    println!("edit their checks (docs/evals.md); the kernel reads them at its next start");
    Ok(0)
}
