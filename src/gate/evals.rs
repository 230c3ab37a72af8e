//! The gate's evaluations step, after the smoke run: every evaluation on
//! the candidate's body and on the running generation's, each result
//! journaled as `eval.result`, the running generation's taken from the memo
//! when its body tree was run before, and the decision ([`crate::evals::decide`])
//! journaled as the `evals` step of `mutation.check`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use crate::evals::decide::{decide, Decision, Pair, Side};
use crate::evals::memo::Memo;
use crate::evals::{format::Evaluation, run_one, Mode, Record};
use crate::events::kernel_event;
use crate::gate::Gate;
use crate::replay::run::Ground;
use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;
use teneral_core::log;

/// One side of the comparison: a generation's commit, its body tree and
/// its built body.
pub struct Body<'a> {
    pub commit: &'a Commit,
    pub tree: String,
    pub binary: PathBuf,
    /// What it is to the gate, as `eval.result` says: `candidate`,
    /// `running` or `run`.
    pub role: &'static str,
}

/// How many evaluations ran and how many results the memo gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub ran: usize,
    pub reused: usize,
}

/// Each evaluation's result on `body`, from the memo or run now, each
/// journaled as `eval.result` under the running generation, as the gate's events are.
pub async fn results(
    gate: &Gate<'_>,
    ground: &Ground<'_>,
    evaluations: &[Evaluation],
    body: &Body<'_>,
    counts: &mut Counts,
) -> Vec<Record> {
    let memo = Memo::at(gate.home);
    let mut records = Vec::with_capacity(evaluations.len());
    for evaluation in evaluations {
        let (record, reused) = match memo.get(&body.tree, &evaluation.hash) {
            Some(kept) => {
                counts.reused += 1;
                (Record { name: evaluation.name.clone(), ..kept }, true)
            }
            None => {
                counts.ran += 1;
                let place = format!("eval-{}-{}", body.role, evaluation.name);
                let record = run_one(ground, body.commit, &body.binary, evaluation, &place).await;
                memo.put(&body.tree, &record);
                (record, false)
            }
        };
        let fields = record.fields(body.commit, body.role, reused);
        kernel_event(gate.journal, gate.running, EventKind::EvalResult, fields);
        records.push(record);
    }
    records
}

/// Why the evaluations step did not let the candidate on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It fails what the running generation passes (`TENERAL_EVALS=gate`).
    Refused(String),
    /// The evaluations could not be read or the running generation's body
    /// not had: nothing is decided, and it counts toward no refusal.
    Undecided(String),
}

/// The evaluations step of the gate for `candidate`, built at `binary`.
pub async fn step(
    gate: &Gate<'_>,
    candidate: &Commit,
    candidate_oid: git2::Oid,
    binary: &Path,
) -> Result<Option<Decision>, Stop> {
    if gate.settings.evals == Mode::Off {
        return Ok(None);
    }
    let started = Instant::now();
    let undecided = |e: String| Stop::Undecided(e);
    let evaluations = crate::evals::load_all(gate.home).map_err(|e| undecided(e.to_string()))?;
    if evaluations.is_empty() {
        return Ok(None);
    }
    let tree = |oid| crate::repo::tree_ids(gate.repo, gate.home, oid).map(|(_, body)| body);
    let candidate_tree = tree(candidate_oid).map_err(|e| undecided(e.to_string()))?;
    let running_oid = crate::repo::commit_id(gate.repo, gate.home, gate.running)
        .map_err(|e| undecided(e.to_string()))?;
    let running_tree = tree(running_oid).map_err(|e| undecided(e.to_string()))?;
    let running_binary =
        crate::replay::body_of(gate.runner, gate.repo, gate.home, gate.running, gate.settings)
            .await
            .map_err(|e| {
                undecided(format!("cannot build the running generation's body to compare: {e}"))
            })?;

    let limit = match gate.settings.smoke_seconds {
        0 => crate::replay::DEFAULT_LIMIT,
        s => std::time::Duration::from_secs(u64::from(s)),
    };
    let ground = Ground {
        home: gate.home,
        settings: gate.settings,
        runner: gate.runner,
        kernel_exe: gate.kernel_exe,
        limit,
    };
    let mut counts = Counts::default();
    let running =
        Body { commit: gate.running, tree: running_tree, binary: running_binary, role: "running" };
    let before = results(gate, &ground, &evaluations, &running, &mut counts).await;
    let candidate_body = Body {
        commit: candidate,
        tree: candidate_tree,
        binary: binary.to_owned(),
        role: "candidate",
    };
    let after = results(gate, &ground, &evaluations, &candidate_body, &mut counts).await;
    let _ = std::fs::remove_dir(gate.home.join(crate::replay::run::REPLAY_DIR));

    let side = |r: &Record| Side {
        outcome: r.outcome.clone(),
        failed_check: r.failed_check(),
        tokens: r.tokens,
        seconds: r.seconds,
    };
    let pairs: Vec<Pair> = after
        .iter()
        .zip(&before)
        .map(|(c, r)| Pair { name: c.name.clone(), candidate: side(c), running: side(r) })
        .collect();
    let decision = decide(&pairs);
    for (name, why) in &decision.undecided {
        let text = format!(
            "the evaluation {name} decided nothing ({why}); it counts neither for nor against {}",
            candidate.short()
        );
        kernel_event(gate.journal, gate.running, EventKind::KernelNotice, json!({"text": text}));
    }
    let refused = gate.settings.evals == Mode::Gate && decision.refuses();
    let round = |s: f64| (s * 100.0).round() / 100.0;
    let regressed: Vec<_> =
        decision.regressed.iter().map(|(n, c)| json!({"evaluation": n, "check": c})).collect();
    let undecided: Vec<_> =
        decision.undecided.iter().map(|(n, why)| json!({"evaluation": n, "why": why})).collect();
    let fields = json!({
        "candidate": candidate,
        "check": "evals",
        "result": if refused { "failed" } else { "passed" },
        "seconds": round(started.elapsed().as_secs_f64()),
        "ran": counts.ran,
        "reused": counts.reused,
        "better_on": decision.better_on,
        "regressed": regressed,
        "undecided": undecided,
    });
    kernel_event(gate.journal, gate.running, EventKind::MutationCheck, fields);
    log::info(format!(
        "gate: evaluations of {}: {} run, {} reused; better on [{}]; regressed on [{}]",
        candidate.short(),
        counts.ran,
        counts.reused,
        decision.better_on.join(", "),
        decision.regressed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
    ));
    if refused {
        return Err(Stop::Refused(decision.refusal()));
    }
    Ok(Some(decision))
}
