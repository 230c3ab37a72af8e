//! The mutation gate's checks on an offer: the offer's head
//! judged by the gate as on a fresh seed ([`crate::gate::Gate::judge_as_seed`]:
//! organs, the type check, the body's format and lints, the kernel's tests,
//! the body's tests, the build and the smoke run, in the cage; no species
//! rule and no path rule), its steps read back from a journal of its own
//! (the individual's journal is not the place: no mutation was asked for)
//! into [`Gates`] for the report.
//!
//! Used by the kernel answering the body's request ([`super::spawn_answer`])
//! and by `teneral offer-check`, which `teneralctl offer check` and
//! `teneralctl offer witness` run ([`check_main`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use teneral_offer::gates::{Gates, Outcome};

use crate::gate::{Gate, Verdict};
use crate::runner::Runner;
use crate::settings::Settings;
use teneral_core::commit::Commit;
use teneral_core::journal::writer::Journal;
use teneral_core::journal::EventKind;

/// What the gates need of the kernel.
pub struct Kernel<'a> {
    pub home: &'a Path,
    pub settings: &'a Settings,
    pub runner: &'a Runner,
    /// The kernel program the body's tests and the smoke run use.
    pub kernel_exe: &'a Path,
}

/// Where the gates on `commit` work: a checkout and the steps' journal,
/// removed after. Short, beside the mutations' checkout: the body's tests
/// make Unix sockets under the checkout's temp dir, and a socket's path
/// must fit in 107 bytes (a whole commit id here made every one too long).
fn place(home: &Path, commit: &Commit) -> PathBuf {
    home.join(".teneral/gate")
        .join(format!("offer-{}", commit.as_str().get(..12).unwrap_or(commit.as_str())))
}

/// Runs the gate on `commit` (in the repository at `kernel.home`) as on a
/// fresh seed; every step's result.
pub async fn run(kernel: &Kernel<'_>, commit: &Commit) -> Gates {
    let started = Instant::now();
    let failed = |check: &str, why: String| {
        Gates::from_steps(&[], Some((check, &why)), started.elapsed().as_secs_f64())
    };
    let dir = place(kernel.home, commit);
    let _ = std::fs::remove_dir_all(&dir);
    let journal_path = dir.join("steps.jsonl");
    let journal = match Journal::open(&journal_path) {
        Ok(j) => Arc::new(Mutex::new(j)),
        Err(e) => return failed("checkout", format!("cannot make the gates' journal: {e}")),
    };
    let repo = match crate::repo::open(kernel.home) {
        Ok(repo) => repo,
        Err(e) => return failed("checkout", e.to_string()),
    };
    let gate = Gate {
        home: kernel.home,
        repo: &repo,
        settings: kernel.settings,
        journal: &journal,
        running: commit,
        kernel_exe: kernel.kernel_exe,
        runner: kernel.runner,
        status: None,
    };
    let verdict = gate.judge_as_seed(commit, &dir.join("checkout")).await;
    drop(journal);
    let text = std::fs::read_to_string(&journal_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let refused = match &verdict {
        Verdict::Accepted { .. } => None,
        Verdict::Rejected { check, output } | Verdict::Undecided { check, output } => {
            Some((check.as_str(), output.as_str()))
        }
    };
    Gates::from_steps(&steps(&text), refused, started.elapsed().as_secs_f64())
}

/// The `mutation.check` steps of a journal's text: name, result, seconds,
/// and why a step did not run.
pub fn steps(journal: &str) -> Vec<(String, Outcome, f64, Option<String>)> {
    journal
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| e["type"] == EventKind::MutationCheck.name())
        .filter_map(|e| {
            let outcome = Outcome::parse(e["result"].as_str()?)?;
            let why = e["why"].as_str().map(str::to_owned);
            Some((
                e["check"].as_str()?.to_owned(),
                outcome,
                e["seconds"].as_f64().unwrap_or(0.0),
                why,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_are_read_from_the_gates_journal() {
        let text = concat!(
            r#"{"type":"mutation.check","check":"typecheck-kernel","result":"reused","seconds":0.0,"why":"a pass of the same tree is kept"}"#,
            "\n",
            r#"{"type":"kernel.started"}"#,
            "\n",
            r#"{"type":"mutation.check","check":"body-tests","result":"failed","seconds":2.5}"#,
            "\nnot json\n",
        );
        let steps = steps(text);
        assert_eq!(
            steps,
            vec![
                (
                    "typecheck-kernel".to_owned(),
                    Outcome::Reused,
                    0.0,
                    Some("a pass of the same tree is kept".to_owned())
                ),
                ("body-tests".to_owned(), Outcome::Failed, 2.5, None)
            ]
        );
    }
}
