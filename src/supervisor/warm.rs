//! Warming the gate: after a start, the kernel's own checks of the running
//! tree (its type check and tests) run in the background at the lowest
//! priority, so the agent's first mutation finds their passes kept and
//! waits only for the body's checks. A mutation asked for while they still
//! run waits for them rather than running them a second time.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::commit::{short, Commit};
use crate::events::SharedJournal;
use crate::gate::Gate;
use crate::runner::Runner;
use crate::settings::Settings;
use crate::status::Reporter;
use crate::{log, repo};

/// What the background task needs, owned.
pub(super) struct Warm {
    pub home: PathBuf,
    pub settings: Settings,
    pub runner: Runner,
    pub journal: SharedJournal,
    pub status: Arc<Reporter>,
    /// The running generation's commit.
    pub running: Commit,
}

impl Warm {
    /// Starts warming, when the owner has not turned it off. Call inside
    /// the supervisor's local set.
    pub(super) fn start(self) -> Option<JoinHandle<()>> {
        self.settings.warm_gate.then(|| tokio::task::spawn_local(self.run()))
    }

    async fn run(self) {
        let what = format!("the gate warms up (the kernel's checks of {})", short(&self.running));
        self.status.set_background(Some(what));
        let result = self.checks().await;
        self.status.set_background(None);
        match result {
            Ok(0) => log::info("gate: the kernel's checks of the running tree were done before"),
            Ok(n) => log::info(format!("gate: warmed, {n} of the kernel's checks passed")),
            // A failure here decides nothing: the mutation's gate runs them again.
            Err(why) => log::info(format!(
                "gate: warming did not pass ({why}); the first mutation runs the kernel's checks"
            )),
        }
    }

    async fn checks(&self) -> Result<usize, String> {
        let repo = repo::open(&self.home).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let gate = Gate {
            home: &self.home,
            repo: &repo,
            settings: &self.settings,
            journal: &self.journal,
            running: &self.running,
            kernel_exe: &exe,
            runner: &self.runner,
            status: None,
        };
        gate.warm().await
    }
}
