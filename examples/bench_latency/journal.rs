//! Following the test individual's journal while its kernel runs: woken by
//! inotify on `memory/`, and giving up as soon as the kernel has ended (a
//! kernel that refused its settings or crashed must not leave the benchmark
//! waiting for ever).

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

/// Follows the journal's text.
pub struct JournalWatch {
    inotify: Inotify,
    path: PathBuf,
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
        Ok(Self { inotify, path: memory.join("journal.jsonl"), text: String::new() })
    }

    fn refresh(&mut self) {
        self.text = std::fs::read_to_string(&self.path).unwrap_or_default();
    }

    pub fn count(&self, needle: &str) -> usize {
        self.text.matches(needle).count()
    }

    /// Waits for a change after which `done` holds for the journal's text;
    /// fails after `timeout`, or once the kernel has ended.
    pub fn until(
        &mut self,
        timeout: Duration,
        kernel: &mut Child,
        done: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let end = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            self.refresh();
            if done(&self.text) {
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
