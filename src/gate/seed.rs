//! The gate on a commit as on a fresh seed: an offer to the species
//! is judged on its own tree, not as a step from the running
//! generation, so the species rule and the path rule (which say what a
//! generation may change of itself) are left out, and so is the rule that
//! the running generation's kernel needs no kernel checks. Everything else
//! is the mutation's gate: a fresh checkout, the organs, the planned checks in the
//! cage, the body's build and the smoke run, each step journaled as
//! `mutation.check` in the gate's journal.

use std::path::Path;
use std::time::Instant;

use super::{reject, Gate, Verdict};
use crate::{generation, repo};
use teneral_core::commit::{short, Commit};
use teneral_core::log;

impl Gate<'_> {
    /// Judges `candidate`, a commit the repository already holds, as on a
    /// fresh seed, in a checkout at `checkout` (not the mutations' own, so
    /// that an offer is checked beside a mutation's gate).
    pub async fn judge_as_seed(&self, candidate: &Commit, checkout: &Path) -> Verdict {
        let started = Instant::now();
        let oid = match repo::commit_id(self.repo, self.home, candidate.as_str()) {
            Ok(oid) => oid,
            Err(e) => return reject("checkout", e.to_string()),
        };
        let fresh = repo::checkout_at(self.repo, checkout, oid)
            .map_err(|e| e.to_string())
            .and_then(|()| generation::touch_tree(checkout).map_err(|e| e.to_string()));
        if let Err(e) = fresh {
            return reject("checkout", e);
        }
        let laps = super::profile::Laps::default();
        // No running generation vouches for an offer's kernel: its kernel
        // checks run unless a pass of the same tree is kept.
        let verdict = match self.checks(candidate, oid, None, checkout, laps).await {
            Ok(verdict) | Err(verdict) => verdict,
        };
        let _ = std::fs::remove_dir_all(checkout);
        log::info(format!(
            "gate as on a fresh seed: {} {} after {:.1} s",
            short(candidate),
            match &verdict {
                Verdict::Accepted { .. } => "passed".to_owned(),
                Verdict::Rejected { check, .. } | Verdict::Undecided { check, .. } =>
                    format!("failed at {check}"),
            },
            started.elapsed().as_secs_f64()
        ));
        verdict
    }
}
