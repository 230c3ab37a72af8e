//! One kernel process under the launcher: started through `spawn` with the
//! launcher's whole environment and the contract's two variables, the
//! launcher's own stdout as its stdout (so the kernel's log decides by where
//! it truly leads, and its JSON lines reach it unchanged), its stderr
//! passed on line by line (the last lines kept for a rollback's event), SIGTERM, SIGINT and SIGHUP passed on to it, and, while
//! it is on trial, the journal watched for its generation's
//! `generation.ready`.

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};

use super::contract::{KERNEL_VARIABLE, LAUNCHER_VERSION, VERSION_VARIABLE};
use super::kernels::Which;
use crate::spawn::{self, Exit, Output, Spec};
use teneral_core::journal::{reader::parse_line, EventKind, JOURNAL_PATH};
use teneral_core::log;

/// Lines of a kernel's stderr kept for the rollback's event.
pub const STDERR_LINES: usize = 40;
/// How often the journal is looked at while a kernel is on trial.
const WATCH_EVERY: Duration = Duration::from_millis(50);
/// How long a kernel on trial that missed its window has to stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What to run.
pub struct Start<'a> {
    pub home: &'a Path,
    pub exe: &'a Path,
    pub which: &'a Which,
    /// While on trial: the generation whose `generation.ready` ends the
    /// trial, and the window it has.
    pub trial: Option<(&'a str, Duration)>,
}

/// How it went.
#[derive(Debug)]
pub struct Ran {
    pub exit: Exit,
    /// It was on trial and its generation got ready.
    pub ready: bool,
    /// It was on trial and missed the window (it was stopped).
    pub missed: bool,
    /// The launcher passed on a SIGTERM or SIGINT.
    pub asked_to_stop: bool,
    pub stderr: String,
}

type Tail = Arc<Mutex<VecDeque<String>>>;

/// Which of the launcher's own outputs a kernel's piped output goes on to.
#[derive(Clone, Copy)]
enum To {
    Stdout,
    Stderr,
}

/// Starts the kernel and waits for its end. `Err`: it could not be started.
pub async fn run(start: Start<'_>, on_ready: impl FnOnce()) -> std::io::Result<Ran> {
    let mut spec = Spec::new(start.exe, start.home).arg("kernel").arg("--dir").arg(start.home);
    spec.env = std::env::vars_os()
        .filter_map(|(k, v)| k.into_string().ok().map(|k| (k, v)))
        .filter(|(k, _)| {
            k != VERSION_VARIABLE && k != KERNEL_VARIABLE && k != log::STDERR_LEADS_VARIABLE
        })
        .collect();
    // The kernel's stderr is the pipe below; its lines go on to ours.
    spec.env.push((log::STDERR_LEADS_VARIABLE.into(), log::stderr_word().into()));
    spec.env.push((VERSION_VARIABLE.into(), LAUNCHER_VERSION.to_string().into()));
    spec.env.push((KERNEL_VARIABLE.into(), start.which.word().into()));
    spec.stdout = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Output::File(std::fs::File::from(fd)),
        Err(_) => Output::Pipe,
    };
    spec.stderr = Output::Pipe;
    let journal = start.home.join(JOURNAL_PATH);
    let mut offset = std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0);
    let mut child = spawn::spawn(spec)?;
    let tail: Tail = Arc::default();
    let out = pass_on(child.stdout.take(), None, To::Stdout);
    let err = pass_on(child.stderr.take(), Some(Arc::clone(&tail)), To::Stderr);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let (mut ready, mut missed, mut asked_to_stop) = (false, false, false);
    let mut on_ready = Some(on_ready);
    let deadline = start.trial.map(|(_, window)| tokio::time::Instant::now() + window);
    let mut tick = tokio::time::interval(WATCH_EVERY);
    let exit = loop {
        let watching = start.trial.is_some() && !ready;
        tokio::select! {
            exit = child.wait() => break exit,
            _ = term.recv() => { asked_to_stop = true; child.signal(Signal::TERM) }
            _ = int.recv() => { asked_to_stop = true; child.signal(Signal::INT) }
            _ = hup.recv() => child.signal(Signal::HUP),
            _ = tick.tick(), if watching => {
                let Some((generation, _)) = start.trial else { continue };
                if saw_ready(&journal, &mut offset, generation) {
                    ready = true;
                    if let Some(f) = on_ready.take() {
                        f();
                    }
                } else if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    missed = true;
                    break child.stop(STOP_GRACE).await;
                }
            }
        }
    };
    // The pipes end with the kernel (and whatever it left holding them).
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = out.await;
        let _ = err.await;
    })
    .await;
    let stderr =
        tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
    Ok(Ran { exit, ready, missed, asked_to_stop, stderr })
}

/// Passes a pipe's lines on to the launcher's own output `to`, keeping the last
/// ones in `tail` when given.
fn pass_on(
    pipe: Option<tokio::net::unix::pipe::Receiver>,
    tail: Option<Tail>,
    to: To,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(pipe) = pipe else { return };
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = match to {
                To::Stdout => writeln!(std::io::stdout(), "{line}"),
                To::Stderr => writeln!(std::io::stderr(), "{line}"),
            };
            if let Some(tail) = &tail {
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    })
}

/// Whether the journal, from `offset` on, holds `generation.ready` of
/// `generation`; moves `offset` past the whole lines read.
fn saw_ready(journal: &PathBuf, offset: &mut u64, generation: &str) -> bool {
    let Ok(mut file) = std::fs::File::open(journal) else { return false };
    if file.seek(SeekFrom::Start(*offset)).is_err() {
        return false;
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return false;
    }
    let Some(last) = bytes.iter().rposition(|b| *b == b'\n') else { return false };
    *offset += last as u64 + 1;
    bytes[..last]
        .split(|b| *b == b'\n')
        .filter_map(parse_line)
        .any(|e| e.is(EventKind::GenerationReady) && e.commit == generation)
}
