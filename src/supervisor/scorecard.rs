//! The copy of the scorecard a body may read: `memory/scorecard.json`,
//! written by the kernel before each start of a body, from the kernel's own
//! journal (`teneral_core::scorecard`), and held read-only in the
//! generation's cage, so the figures an agent argues from are the kernel's.

use std::path::Path;

use crate::scorecard::{self, SCORECARD_PATH};
use crate::{fsutil, log};

/// Counts the journal and writes the copy; a failure is logged and the body
/// starts anyway (with the copy it had, or none).
pub(super) async fn keep(home: &Path) {
    let home = home.to_owned();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let all = scorecard::of_individual(&home, None)?;
        let text = serde_json::to_string_pretty(&scorecard::document(&all))
            .map_err(std::io::Error::other)?;
        fsutil::write_atomic(&home.join(SCORECARD_PATH), text.as_bytes())
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log::warn(format!("cannot write {SCORECARD_PATH} for the body: {e}")),
        Err(e) => log::warn(format!("cannot write {SCORECARD_PATH} for the body: {e}")),
    }
}
