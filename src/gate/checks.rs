//! Running one check of a candidate: a cargo command in the gate's checkout,
//! with a bare environment, a temp dir of its own inside the checkout, and a
//! time limit after which its whole process group is killed.
//!
//! A check passes when the command exits 0 and, for a test run, when at
//! least one test passed and none failed ([`super::rules::check_test_count`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

use super::rules::{check_test_count, count_tests};
use crate::spawn::{self, Output, Spec};

/// Lines of a check's output kept for the refusal message.
pub const TAIL_LINES: usize = 60;

/// One check to run.
pub struct Check {
    /// The name journaled and shown: `typecheck-kernel`, `body-tests`, ...
    pub name: &'static str,
    /// Where cargo runs.
    pub dir: PathBuf,
    /// cargo's arguments.
    pub args: Vec<&'static str>,
    /// Whether its output must show tests that ran and passed.
    pub counts_tests: bool,
    /// Variables added to the bare environment.
    pub env: Vec<(String, OsString)>,
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed { seconds: f64 },
    Failed { seconds: f64, output: String },
    OverTime { seconds: f64, output: String },
}

/// The environment of every check: the toolchain's variables and nothing
/// else of the kernel's (no key, no settings), plus a temp dir of its own.
pub fn bare_env(tmp: &Path, target: &Path) -> Vec<(String, OsString)> {
    let mut env = crate::generation::toolchain_env();
    env.push(("TMPDIR".into(), tmp.into()));
    env.push(("CARGO_TARGET_DIR".into(), target.into()));
    env
}

/// Runs `check` with `env`, stopping it after `limit` (none when `None`).
pub async fn run(check: &Check, env: &[(String, OsString)], limit: Option<Duration>) -> Outcome {
    let started = Instant::now();
    let mut spec = Spec::new("cargo", &check.dir);
    spec.args = check.args.iter().map(OsString::from).collect();
    spec.env = env.to_vec();
    spec.env.extend(check.env.iter().cloned());
    spec.stdout = Output::Pipe;
    spec.stderr = Output::Pipe;
    let mut child = match spawn::spawn(spec) {
        Ok(child) => child,
        Err(e) => {
            return Outcome::Failed {
                seconds: 0.0,
                output: format!("cannot start cargo: {e}; is cargo on PATH?"),
            }
        }
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let readers =
        [child.stdout.take(), child.stderr.take()].map(|p| read_into(p, Arc::clone(&seen)));
    let waited = match limit {
        Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    if waited.is_none() {
        child.stop(Duration::ZERO).await;
    }
    // A process of another group may still hold a pipe open; do not wait on it.
    for reader in readers {
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    let output = seen.tail.iter().cloned().collect::<Vec<_>>().join("\n");
    let Some(exit) = waited else {
        let limit = limit.map(|l| l.as_secs()).unwrap_or_default();
        let output = format!(
            "{output}\nstopped after {limit} s, the limit of one check (TENERAL_CHECK_MINUTES in .env raises it)"
        );
        return Outcome::OverTime { seconds, output };
    };
    if !exit.success() {
        return Outcome::Failed { seconds, output: format!("{output}\n{} ({exit})", check.name) };
    }
    if check.counts_tests {
        if let Err(why) = check_test_count(count_tests(&seen.results.join("\n"))) {
            return Outcome::Failed { seconds, output: format!("{output}\n{why}") };
        }
    }
    Outcome::Passed { seconds }
}

/// What the readers keep of a check's output.
#[derive(Default)]
struct Seen {
    tail: VecDeque<String>,
    /// Every `test result:` line, however long the output.
    results: Vec<String>,
}

fn read_into(pipe: Option<pipe::Receiver>, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(pipe) = pipe else { return };
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
            if line.trim_start().starts_with("test result:") {
                s.results.push(line.clone());
            }
            if s.tail.len() == TAIL_LINES {
                s.tail.pop_front();
            }
            s.tail.push_back(line);
        }
    })
}
