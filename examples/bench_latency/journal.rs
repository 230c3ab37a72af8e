//! Following the test individual's journal while its kernel runs: woken by
//! inotify on `memory/`, and giving up as soon as the kernel has ended (a
//! kernel that refused its settings or crashed must not leave the benchmark
//! waiting for ever).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use inotify::{Inotify, WatchMask};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// How often a wait looks whether the kernel is still there.
const LOOK_EVERY: Timespec = Timespec { tv_sec: 0, tv_nsec: 200_000_000 };

/// Fails when the kernel has ended, saying how.
pub fn still_running(kernel: &mut Child) -> Result<()> {
    match kernel.try_wait().context("cannot look at the kernel process")? {
        None => Ok(()),
        Some(status) => bail!(
            "the kernel ended ({status}) before the benchmark was done; the tail of its \
             log is below"
        ),
    }
}

/// Follows the journal's text. Each look reads only what was appended since
/// the last (the journal only grows): reading the whole file again, a few
/// MB after 1,000 lines, would add the benchmark's own milliseconds to the
/// latency it measures.
pub struct JournalWatch {
    inotify: Inotify,
    path: PathBuf,
    file: Option<File>,
    text: String,
}

impl JournalWatch {
    /// Waits for the kernel to make `memory/`, then watches it.
    pub fn new(home: &Path, kernel: &mut Child) -> Result<Self> {
        let memory = home.join("memory");
        let end = Instant::now() + Duration::from_secs(600);
        while !memory.exists() {
            still_running(kernel)?;
            if Instant::now() > end {
                bail!("the kernel made no memory/ in 600 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let inotify = Inotify::init()?;
        inotify.watches().add(&memory, WatchMask::MODIFY | WatchMask::CREATE)?;
        Ok(Self { inotify, path: memory.join("journal.jsonl"), file: None, text: String::new() })
    }

    /// Appends to `text` what the journal gained since the last look, up to
    /// its last whole line.
    fn refresh(&mut self) {
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let Some(file) = &mut self.file else { return };
        let mut fresh = Vec::new();
        if file.read_to_end(&mut fresh).is_err() {
            return;
        }
        // A line the kernel is still writing is read again whole next time.
        let whole = fresh.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let back = (fresh.len() - whole) as i64;
        if back > 0 && file.seek(SeekFrom::Current(-back)).is_err() {
            return;
        }
        self.text.push_str(&String::from_utf8_lossy(&fresh[..whole]));
    }

    /// How much of the journal has been read: a mark for [`JournalWatch::until`].
    pub fn mark(&self) -> usize {
        self.text.len()
    }

    /// Waits for a change after which `done` holds for the journal's text
    /// after `from` (a [`JournalWatch::mark`]); fails after `timeout`, or once
    /// the kernel has ended.
    pub fn until(
        &mut self,
        from: usize,
        timeout: Duration,
        kernel: &mut Child,
        done: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let end = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            self.refresh();
            if done(&self.text[from..]) {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("timed out after {} s waiting on the journal", timeout.as_secs());
            }
            // Sleeps until the journal changes, looking at the kernel now and then.
            loop {
                let mut fds = [PollFd::new(&self.inotify, PollFlags::IN)];
                match poll(&mut fds, Some(&LOOK_EVERY)) {
                    Ok(0) => {
                        still_running(kernel)?;
                        if Instant::now() > end {
                            break;
                        }
                    }
                    Ok(_) => break,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e).context("poll on the journal's inotify"),
                }
            }
            match self.inotify.read_events(&mut buf) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("reading the journal's inotify"),
            }
        }
    }
}

/// The pid the kernel journaled in its last `generation.started` event.
pub fn started_pid(journal: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(journal)?;
    for line in text.lines().rev() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        if v["type"] == "generation.started" {
            return v["pid"].as_u64().map(|p| p as u32).context("no pid");
        }
    }
    bail!("no generation.started in the journal")
}

/// The last `n` lines of `path`, for a message (empty when unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
