//! The last lines of a run's output, read from its pipes: each line logged
//! under the run's name (and unit) and kept for the message about a failure.
//! Invariant: at most [`TAIL_LINES`] lines are kept per tail.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::time::Instant;

use crate::log;

/// Lines of output kept for a message about a failure.
pub const TAIL_LINES: usize = 40;

type Tail = Arc<Mutex<VecDeque<String>>>;

/// The last lines of a run's output.
#[derive(Default, Clone)]
pub(super) struct Tails {
    pub(super) stdout: Tail,
    pub(super) stderr: Tail,
    pub(super) both: Tail,
    /// Every `test result:` line, however long the output (the gate counts
    /// the tests a check ran from them).
    pub(super) results: Tail,
    readers: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Tails {
    /// Reads lines from `pipe` until it closes, logging and keeping each.
    pub(super) fn read(
        &self,
        pipe: Option<pipe::Receiver>,
        tag: &str,
        unit: Option<&str>,
        is_err: bool,
    ) {
        let Some(pipe) = pipe else { return };
        let (tails, tag, unit) = (self.clone(), tag.to_owned(), unit.map(str::to_owned));
        let keep = self.readers.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log::output(&tag, unit.as_deref(), &line);
                push(if is_err { &tails.stderr } else { &tails.stdout }, &line);
                if line.trim_start().starts_with("test result:") {
                    tails.results.lock().unwrap_or_else(|p| p.into_inner()).push_back(line.clone());
                }
                push(&tails.both, &line);
            }
        });
        keep.lock().unwrap_or_else(|p| p.into_inner()).push(reader);
    }

    /// Waits (a little at most) for the readers to reach the end of the
    /// output, so the tail holds the last lines once the run has ended.
    pub(super) async fn drained(&self) {
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|p| p.into_inner()));
        let until = Instant::now() + Duration::from_secs(2);
        for reader in readers {
            let _ = tokio::time::timeout_at(until, reader).await;
        }
    }

    pub(super) fn text(&self, tail: &Tail) -> String {
        let t = tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

fn push(tail: &Tail, line: &str) {
    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
    if t.len() == TAIL_LINES {
        t.pop_front();
    }
    t.push_back(line.to_owned());
}
