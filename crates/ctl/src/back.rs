//! `teneralctl back`: the owner sends the agent back to an earlier
//! generation. The rules are [`crate::generations`]'s; this is the I/O.
//!
//! - `--list` prints the generations of the journal, oldest first.
//! - With no kernel running, `back` takes the individual's lock itself for
//!   the change, journals `generation.sentback` stamped with the generation
//!   it leaves, then writes `.teneral/state.json` (the target, no step
//!   back); a kill between is finished by the next start. The agent stays
//!   down.
//! - With a kernel running, `back` writes its request to [`BACK_REQUEST`]
//!   and sends the kernel SIGHUP; the kernel stops the body, switches,
//!   journals `generation.sentback` and starts the target. `back` waits for
//!   that event. A request the kernel has not taken when the wait ends is
//!   withdrawn, so it never acts later by surprise.
//!
//! The kernel takes a request with [`read_request`], which claims the file
//! by renaming it: of the kernel taking it and `back` withdrawing it, exactly
//! one wins.

pub mod list;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::generations::Refusal;
use crate::journal::writer::{Journal, JournalError};
use crate::journal::{Event, EventKind, JOURNAL_PATH};
use crate::lock::{self, LockError, LOCK_PATH};
use crate::state::{State, StateError};
use crate::talk::{follow, Wake};

pub use crate::back_request::{lineage, read_request, RequestError, BACK_REQUEST};
/// How long `back` waits for a running kernel to answer, unless told.
pub const ANSWER_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum BackError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{dir} is not a git repository ({source}); run this in an individual's directory or give --dir")]
    NotARepo { dir: PathBuf, source: git2::Error },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Lock(LockError),
    #[error("the journal names {0}; move the journal aside or run `teneralctl back <commit>`")]
    NotACommit(#[from] crate::commit::NotACommit),
    #[error(
        "a kernel started while `teneralctl back` was at work; nothing was changed, run it again"
    )]
    KernelStarted,
    #[error("cannot {what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: io::Error },
    #[error(
        "a kernel runs, but {path} holds {content:?}, not its pid; stop it \
         (systemctl --user stop teneral) and run `teneralctl back` again"
    )]
    NoPid { path: PathBuf, content: String },
    #[error(
        "cannot send SIGHUP to the kernel (pid {pid}): {source}; nothing was changed. See \
         whether it runs (systemctl --user status teneral) and run `teneralctl back` again"
    )]
    Signal { pid: i32, source: io::Error },
    #[error(
        "the kernel (pid {pid}) did not answer within {secs} s, and {what}; see its log \
         (journalctl --user -u teneral)"
    )]
    NoAnswer { pid: i32, secs: u64, what: &'static str },
    #[error(
        "the kernel stopped before it answered; nothing was changed, run `teneralctl back` again"
    )]
    KernelGone,
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BackError {
    let path = path.to_owned();
    move |source| BackError::Io { what, path, source }
}

/// What the owner asked for.
#[derive(Debug, Clone)]
pub struct BackOptions {
    /// The individual's directory.
    pub home: PathBuf,
    /// A commit (7 or more hex digits); `None` for the generation before.
    pub target: Option<String>,
    /// Only list the generations.
    pub list: bool,
    /// List them as JSON.
    pub json: bool,
    /// How long to wait for a running kernel's answer.
    pub wait: Duration,
}

/// Runs `teneralctl back`, printing to `out`; the exit status.
pub fn run(options: &BackOptions, out: &mut impl Write) -> Result<i32, BackError> {
    let home = &options.home;
    let print = |out: &mut dyn Write, text: &str| {
        writeln!(out, "{text}").map_err(io_err("write to", Path::new("stdout")))
    };
    if options.list {
        let lineage = lineage(home)?;
        let repo = git2::Repository::open(home).ok();
        let subject = |c: &str| list::subject_in(repo.as_ref(), c);
        if options.json {
            print(out, &list::json(&lineage, &subject).to_string())?;
            return Ok(0);
        }
        if lineage.generations().is_empty() {
            print(out, "no generation in the journal yet")?;
        }
        for line in list::lines(&lineage, &subject, crate::when::now_ms()) {
            print(out, &line)?;
        }
        return Ok(0);
    }
    let target = options.target.as_deref();
    if lock::is_held(home) {
        let (from, to) = choose(home, target)?;
        let event = ask_kernel(home, &to, options.wait)?;
        let from = if event.text("from").is_empty() { from } else { event.text("from").to_owned() };
        let text = format!(
            "sent back from {} to {}: the kernel stopped the agent and started it on {}",
            from,
            to,
            crate::commit::short(&to)
        );
        print(out, &text)?;
        return Ok(0);
    }
    if !home.join(JOURNAL_PATH).is_file() {
        return Err(Refusal::NoGeneration.into()); // and no lock file is made in a wrong --dir
    }
    let _lock = lock::acquire(home).map_err(|e| match e {
        LockError::Held { .. } => BackError::KernelStarted,
        other => BackError::Lock(other),
    })?;
    let (from, to) = choose(home, target)?;
    let generation = crate::commit::Commit::parse(&to)?;
    // Written ahead, as the kernel writes its own moves: the journal first,
    // then the state. A kill between leaves the move in the journal, and
    // the next start makes the state show it.
    let mut journal = Journal::open(&home.join(JOURNAL_PATH))?;
    let fields = json!({"from": from, "to": to, "by": "owner"});
    journal.append_kernel(&from, EventKind::GenerationSentback, fields)?;
    let mut state = State::load(home)?;
    state.generation = Some(generation);
    state.previous = None;
    state.save(home)?;
    let text = format!(
        "sent back from {from} to {to}. The agent was down and stays down; it starts on {} \
         at the next start (systemctl --user start teneral, or teneral run)",
        crate::commit::short(&to)
    );
    print(out, &text)?;
    Ok(0)
}

/// The current commit and the one to go to, both whole.
fn choose(home: &Path, target: Option<&str>) -> Result<(String, String), BackError> {
    let lineage = lineage(home)?;
    let git = git2::Repository::open(home)
        .map_err(|source| BackError::NotARepo { dir: home.to_owned(), source })?;
    let in_git = |c: &str| git2::Oid::from_str(c).is_ok_and(|oid| git.find_commit(oid).is_ok());
    let to = lineage.choose(target, in_git)?;
    let from = lineage.current().map(|g| g.commit.clone()).unwrap_or_default();
    Ok((from, to.commit.clone()))
}

/// Leaves the request for the running kernel, signals it and waits for the
/// journal to say it is done; the `generation.sentback` event.
fn ask_kernel(home: &Path, to: &str, wait: Duration) -> Result<Event, BackError> {
    let lock_path = home.join(LOCK_PATH);
    let content = fs::read_to_string(&lock_path).map_err(io_err("read", &lock_path))?;
    let pid = content.trim().parse::<i32>().ok().and_then(rustix::process::Pid::from_raw);
    let Some(pid) = pid else {
        return Err(BackError::NoPid { path: lock_path, content });
    };
    let (tx, rx) = mpsc::channel::<Wake>();
    let pending = Arc::new(AtomicBool::new(false));
    let memory = home.join("memory");
    follow::watch(home, tx, Arc::clone(&pending)).map_err(io_err("watch", &memory))?;
    let journal = home.join(JOURNAL_PATH);
    let start = fs::metadata(&journal).map(|m| m.len()).unwrap_or(0);
    let mut tail = follow::Tail::at(journal.clone(), start);

    let request = home.join(BACK_REQUEST);
    if let Some(dir) = request.parent() {
        fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let body = json!({"to": to}).to_string();
    crate::fsutil::write_atomic(&request, body.as_bytes()).map_err(io_err("write", &request))?;
    let raw = pid.as_raw_nonzero().get();
    if let Err(e) = rustix::process::kill_process(pid, rustix::process::Signal::HUP) {
        let _ = fs::remove_file(&request);
        return Err(BackError::Signal { pid: raw, source: e.into() });
    }

    let deadline = Instant::now() + wait;
    loop {
        pending.store(false, Ordering::Release);
        for event in tail.read_new().map_err(io_err("read the journal", &journal))? {
            if event.is(EventKind::GenerationSentback) && event.text("to") == to {
                return Ok(event);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if !lock::is_held(home) {
            withdraw(&request);
            return Err(BackError::KernelGone);
        }
        // Woken by the journal; at least once a second to see the kernel is alive.
        match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(100))
            }
        }
    }
    let what = if withdraw(&request) {
        "it had not taken the request: it is withdrawn and nothing was changed"
    } else {
        "it took the request but has not journaled the change yet: \
         `teneralctl back --list` shows where the agent is"
    };
    Err(BackError::NoAnswer { pid: raw, secs: wait.as_secs(), what })
}

/// Removes a request the kernel has not taken; true when it was still there.
fn withdraw(request: &Path) -> bool {
    fs::remove_file(request).is_ok()
}
