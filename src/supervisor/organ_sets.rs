//! The organs of a generation, prepared before each start of its body.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Kernel, KernelError, Next, EXIT_GAVE_UP};
use crate::commit::Commit;
use crate::events::kernel_event;
use crate::journal::EventKind;
use crate::organs;

impl Kernel {
    /// The organ set of the generation at `live`, prepared before each start
    /// (a tree that went missing is unpacked again from its archive). A
    /// missing archive stops the kernel without going back: the install lost
    /// a file and the generation is sound. Any other organ error fails the
    /// generation. `Ok(Err(next))` says what follows instead of a start.
    pub(super) async fn organs(
        &mut self,
        commit: &Commit,
        live: &Path,
    ) -> Result<Result<Option<PathBuf>, Next>, KernelError> {
        let program = std::env::current_exe()
            .map_err(|e| KernelError::Io(format!("the kernel's own binary: {e}")))?;
        let mut unpacker = organs::Unpacker::new(&self.runner, &program);
        unpacker.stop_timeout = self.settings.timing.stop_grace;
        let prepared = organs::prepare(&self.home, live, &unpacker).await;
        let e = match prepared {
            Ok(set) => return Ok(Ok(set)),
            Err(e) => e,
        };
        kernel_event(
            &self.journal,
            commit,
            EventKind::KernelNotice,
            json!({"text": e.to_string()}),
        );
        if e.archive_missing() {
            return Ok(Err(Next::End(EXIT_GAVE_UP, format!("{e}; then start the kernel again"))));
        }
        Ok(Err(self.fail(commit, format!("its organs cannot be prepared: {e}"), String::new())?))
    }
}
