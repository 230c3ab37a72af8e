//! The last lines of a run's output, read from its pipes: each line logged
//! under the run's name (and unit) and kept for the message about a failure.
//! What a run prints is a body's or a check's to choose, so what the kernel
//! holds of it is bounded whatever it prints. Invariants: at most
//! [`TAIL_LINES`] lines are kept per tail and [`RESULT_LINES`] result
//! lines; a line is at most [`LINE_BYTES`] bytes, the rest of it read and
//! dropped with a count; bytes that are not UTF-8 are shown as U+FFFD and
//! never end the reading.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::time::Instant;

use teneral_core::log;

/// Lines of output kept for a message about a failure.
pub const TAIL_LINES: usize = 40;

/// `test result:` lines kept; a body's checks run a few test binaries each.
pub const RESULT_LINES: usize = 1024;

/// Bytes of one line kept and logged.
pub const LINE_BYTES: usize = 4096;

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
            let mut reader = BufReader::new(pipe);
            while let Ok(Some(line)) = next_line(&mut reader, LINE_BYTES).await {
                log::output(&tag, unit.as_deref(), &line);
                push(if is_err { &tails.stderr } else { &tails.stdout }, &line);
                if line.trim_start().starts_with("test result:") {
                    let mut results = tails.results.lock().unwrap_or_else(|p| p.into_inner());
                    if results.len() < RESULT_LINES {
                        results.push_back(line.clone());
                    }
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

/// The next line of `reader` without its newline, its first `most` bytes
/// kept and the rest read and counted; `None` at the end. A last line with
/// no newline is a line.
async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    most: usize,
) -> std::io::Result<Option<String>> {
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        any = true;
        let (part, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        let room = most.saturating_sub(kept.len());
        kept.extend_from_slice(&part[..part.len().min(room)]);
        dropped += part.len().saturating_sub(room);
        let used = ended.unwrap_or(buf.len());
        reader.consume(used);
        if ended.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    let mut line = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        line.push_str(&format!(" [... {dropped} more bytes of this line not kept]"));
    }
    Ok(Some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8], most: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(16, input);
        let mut lines = Vec::new();
        while let Ok(Some(line)) = next_line(&mut reader, most).await {
            lines.push(line);
        }
        lines
    }

    #[tokio::test]
    async fn a_line_is_cut_at_its_bound_and_the_next_one_is_whole() {
        let mut input = vec![b'x'; 1_000_000];
        input.extend_from_slice(b"\nok\n");
        let lines = lines_of(&input, 10).await;
        assert_eq!(
            lines,
            ["xxxxxxxxxx [... 999990 more bytes of this line not kept]".to_owned(), "ok".into()]
        );
    }

    #[tokio::test]
    async fn lines_are_read_as_lines_bytes_not_utf8_included() {
        let cases: &[(&[u8], &[&str])] = &[
            (b"", &[]),
            (b"\n", &[""]),
            (b"a\nb", &["a", "b"]),
            (b"a\n\nb\n", &["a", "", "b"]),
            (b"\xff\xfeok\nnext\n", &["\u{fffd}\u{fffd}ok", "next"]),
            (b"0123456789abcdef0123\n", &["0123456789abcdef0123"]),
        ];
        for (input, want) in cases {
            assert_eq!(lines_of(input, 64).await, *want, "{input:?}");
        }
    }
}
