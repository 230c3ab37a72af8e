//! The stand-in model as a child of the kernel: `teneral standin` started
//! through the runner in the cage's `model` profile (its program, its script
//! to read, its request log to write, nothing else of the individual; the
//! host's network, so the kernel reaches it on loopback).
//!
//! The kernel learns where it listens from the one line it prints at start,
//! `listening on http://127.0.0.1:PORT/v1`, on its stdout: a pipe only the
//! kernel reads, so nothing else can tell the kernel a wrong address. It
//! waits at most [`START_LIMIT`] for that line.
//!
//! Invariants:
//! - The key travels in the child's environment ([`KEY_VARIABLE`]), never
//!   on its command line, which every process of the same user can read in
//!   `/proc/<pid>/cmdline` (a caged body too); its environment is refused to
//!   processes of another Landlock domain.
//! - It does not outlive the kernel: stopped by [`StandinChild::stop`], or
//!   killed with its process group when dropped (run directly), or with the
//!   kernel's unit (under systemd); and whatever the backend it ends by
//!   itself once nothing reads its stdout (`--end-with-stdout`), which is
//!   when the kernel is gone.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::FutureExt;

use crate::runner::{Ended, Launch, Limits, Profile, RunError, Runner, Running};
use crate::spawn::Spec;

/// The variable the child reads its key from.
pub const KEY_VARIABLE: &str = "TENERAL_STANDIN_KEY";

/// How long the child has to say where it listens.
pub const START_LIMIT: Duration = Duration::from_secs(15);

/// What the child is started with.
pub struct Start<'a> {
    /// The `teneral` program (the kernel's own).
    pub program: &'a Path,
    /// The individual it serves: no rule of the cage may cover it.
    pub individual: &'a Path,
    /// The one key it accepts.
    pub key: &'a str,
    /// Its script, read at start.
    pub script: Option<&'a Path>,
    /// Answer from the script alone, even an empty one (`--scripted`).
    pub scripted: bool,
    /// Its request log; made here, so the cage grants the file alone.
    pub log: Option<&'a Path>,
    pub limits: Limits,
}

/// Why the child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("cannot start the stand-in model: {0}")]
    Start(#[from] RunError),
    #[error(
        "cannot make the stand-in's request log {}: {source}; make its directory or change \
         TENERAL_STANDIN_LOG in .env",
        path.display()
    )]
    Log { path: PathBuf, source: std::io::Error },
    #[error("the stand-in model ended ({exit}) before it said where it listens{tail}")]
    Ended { exit: String, tail: String },
    #[error(
        "the stand-in model did not say where it listens within {} s, so it was stopped{tail}",
        START_LIMIT.as_secs()
    )]
    Silent { tail: String },
}

/// A running stand-in child.
pub struct StandinChild {
    running: Running,
    base_url: String,
    grace: Duration,
}

impl StandinChild {
    /// Starts it as unit `unit` and waits until it says where it listens.
    pub async fn start(runner: &Runner, unit: &str, start: Start<'_>) -> Result<Self, ChildError> {
        let mut spec = Spec::new(start.program, "/")
            .arg("standin")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--end-with-stdout")
            .env(KEY_VARIABLE, start.key);
        let mut readable = Vec::new();
        if let Some(script) = start.script {
            spec = spec.arg("--script").arg(script);
            // A missing script is the stand-in's to report, in its words.
            if script.exists() {
                readable.push(script.to_owned());
            }
        }
        if start.scripted {
            spec = spec.arg("--scripted");
        }
        let mut writable = Vec::new();
        if let Some(log) = start.log {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|source| ChildError::Log { path: log.to_owned(), source })?;
            spec = spec.arg("--log").arg(log);
            writable.push(log.to_owned());
        }
        let profile = Profile::Model {
            individual: start.individual.to_owned(),
            program: start.program.to_owned(),
            readable,
            writable,
        };
        let launch = Launch::new(spec, start.limits).caged(profile);
        let mut running = runner.start(unit, launch).await?;
        let grace = start.limits.stop_timeout;
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        loop {
            if let Some(base_url) = address_in(&running.stdout_tail()) {
                return Ok(StandinChild { running, base_url, grace });
            }
            tokio::select! {
                ended = running.wait() => {
                    return Err(ChildError::Ended { exit: ended.exit.to_string(), tail: tail(&running) });
                }
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
            if tokio::time::Instant::now() > deadline {
                running.stop(grace).await;
                return Err(ChildError::Silent { tail: tail(&running) });
            }
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Its process, when known.
    pub fn pid(&self) -> Option<u32> {
        self.running.pid()
    }

    /// How it ended, when it has; never waits.
    pub fn ended(&mut self) -> Option<Ended> {
        self.running.wait().now_or_never()
    }

    /// What it last wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.running.stderr_tail()
    }

    /// SIGTERM, its grace, then SIGKILL; waits for the end.
    pub async fn stop(mut self) -> Ended {
        self.running.stop(self.grace).await
    }
}

fn tail(running: &Running) -> String {
    let tail = running.stderr_tail();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; it wrote:\n{tail}")
    }
}

/// The base URL the stand-in announced in `stdout`, when it announced a
/// loopback one.
pub fn address_in(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|line| {
        let url = line.trim().strip_prefix("listening on ")?;
        let addr: std::net::SocketAddr =
            url.strip_prefix("http://")?.strip_suffix("/v1")?.parse().ok()?;
        addr.ip().is_loopback().then(|| url.to_owned())
    })
}

/// Ends this process once nothing reads its stdout any longer: a thread
/// waits until the pipe's reading end is closed everywhere (`POLLERR` on
/// the writing end), then exits. On a terminal or a file it waits forever.
pub fn end_when_stdout_unread() -> std::io::Result<()> {
    let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
    std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        use rustix::event::{poll, PollFd, PollFlags};
        loop {
            let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
            match poll(&mut fds, None) {
                Ok(_) => {
                    let gone = PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL;
                    if fds[0].revents().intersects(gone) {
                        std::process::exit(0);
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => std::process::exit(1),
            }
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_taken_only_from_the_announcement_on_loopback() {
        let cases: &[(&str, Option<&str>)] = &[
            ("listening on http://127.0.0.1:4000/v1\n", Some("http://127.0.0.1:4000/v1")),
            ("noise\nlistening on http://[::1]:80/v1\n", Some("http://[::1]:80/v1")),
            ("listening on http://10.0.0.1:4000/v1\n", None),
            ("listening on http://example.com:4000/v1\n", None),
            ("listening on http://127.0.0.1:4000\n", None),
            ("listening on http://127.0.0.1:4000/v1/x\n", None),
            ("listening on\n", None),
            ("", None),
        ];
        for (stdout, want) in cases {
            assert_eq!(address_in(stdout).as_deref(), *want, "{stdout:?}");
        }
    }
}
