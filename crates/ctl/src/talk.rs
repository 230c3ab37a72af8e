//! `teneralctl talk`, the plain client: the conversation as lines of text,
//! read back from the journal, and the owner's lines sent as files in
//! `.teneral/owner/` (see [`crate::owner`]).
//!
//! There is no connection to the agent: what is shown is read from
//! `memory/journal.jsonl`, what is sent is a file, so any number of clients
//! can attach, leave and come back. At a terminal the client prints the last
//! few exchanges and follows; from a pipe it sends one line at a time and
//! waits for the turn that answers it (`plain` and `piped`).
//!
//! Invariants: attaching costs bounded time and memory whatever the
//! journal's size (it reads from the end, within a budget); the client never
//! polls (it sleeps until the journal changes, a line is typed, or the
//! `--wait` deadline passes); everything from the journal is sanitized before
//! it is printed ([`render`]); the decisions are pure ([`turns`]).

mod act;
mod backend;
pub mod clipboard;
pub mod commands;
pub mod editor;
pub mod follow;
mod full;
pub mod gate;
pub mod image;
mod live;
pub mod markdown;
pub mod panel;
mod piped;
mod plain;
pub mod render;
pub mod theme;
mod trace;
pub mod turns;
pub mod view;

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::journal::{Event, EventKind, JOURNAL_PATH};
use follow::{look_back, Tail};
use turns::{Activity, Recent};

/// How long a piped line waits for the journal to move before giving up.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// How many exchanges are printed on attaching.
pub const DEFAULT_HISTORY: usize = 5;
/// At most this many entries are printed on attaching.
const MAX_ENTRIES: usize = 200;
/// At most this many bytes are read from the end on attaching.
const LOOK_BACK_BUDGET: u64 = 8 << 20;
/// The width of one-line forms when the terminal does not say.
const DEFAULT_WIDTH: usize = 100;

/// What `teneralctl talk` was asked to do.
#[derive(Debug, Clone)]
pub struct TalkOptions {
    /// The individual's root directory.
    pub home: PathBuf,
    /// How long a piped line waits while nothing is journaled.
    pub wait: Duration,
    /// How many exchanges to print on attaching.
    pub history: usize,
}

impl TalkOptions {
    /// The defaults for the individual at `home`.
    pub fn new(home: PathBuf) -> Self {
        Self { home, wait: DEFAULT_WAIT, history: DEFAULT_HISTORY }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TalkError {
    #[error("cannot read the journal {path}: {source}")]
    Journal { path: PathBuf, source: io::Error },
    #[error(
        "cannot write to {dir}: {source}; the directory must be the individual's, writable by you"
    )]
    Owner { dir: PathBuf, source: io::Error },
    #[error("cannot watch {path} for changes: {source}")]
    Watch { path: PathBuf, source: io::Error },
    #[error("cannot read the input: {0}")]
    Input(io::Error),
    #[error("cannot write the output: {0}")]
    Output(io::Error),
    #[error(transparent)]
    Image(#[from] image::ImageError),
}

/// What wakes the client.
#[derive(Debug)]
pub enum Wake {
    /// The journal changed.
    Journal,
    /// A line was typed.
    Line(String),
    /// The input ended.
    End,
    /// The input could not be read.
    InputFailed(io::Error),
    /// A key, a paste or a resize at the terminal (the full client).
    Term(crossterm::event::Event),
}

/// Runs the client on this process's standard input and output: the full
/// client when both are a terminal and not `plain`, else the plain one.
/// Returns the exit status (0, or 1 when a piped line was not answered).
pub fn run(opts: TalkOptions, plain: bool) -> anyhow::Result<i32> {
    crate::individual::check(&opts.home)?;
    let stdin = io::stdin();
    let interactive = stdin.is_terminal();
    if interactive && io::stdout().is_terminal() && !plain {
        return Ok(full::run(&opts)?);
    }
    let mut out = io::stdout();
    let mut err = io::stderr();
    Ok(session(&opts, io::BufReader::new(stdin), interactive, &mut out, &mut err)?)
}

/// Runs the client with the given input and output: as typed at a terminal
/// when `interactive`, else as lines from a pipe.
pub fn session<R: BufRead + Send + 'static>(
    opts: &TalkOptions,
    input: R,
    interactive: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, TalkError> {
    if interactive {
        plain::run(opts, input, out, err)
    } else {
        piped::run(opts, input, out, err)
    }
}

/// What a client of either kind shares: the journal followed from where the
/// look back ended, what the agent is doing, and the output.
struct Client<'a> {
    home: PathBuf,
    journal: PathBuf,
    tail: Tail,
    tx: Sender<Wake>,
    rx: Receiver<Wake>,
    pending: Arc<AtomicBool>,
    backlog: VecDeque<Event>,
    activity: Activity,
    /// An interrupt was sent and the agent has not come to rest since.
    interrupting: bool,
    /// Lines this client sent and has not yet seen journaled; not printed.
    own: HashSet<String>,
    /// The gate's steps, said as they start (the plain clients).
    gate: gate::Steps,
    /// The kernel's status, once read since the journal was last read.
    status: Option<Option<teneral_core::status::StatusFile>>,
    width: usize,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

impl<'a> Client<'a> {
    /// Watches the journal (when `follow`), then reads the last `exchanges`
    /// exchanges from its end. Returns the client and what to print of them.
    fn attach(
        home: &Path,
        exchanges: usize,
        follow: bool,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
    ) -> Result<(Self, Vec<String>), TalkError> {
        Self::attach_with(home, exchanges, follow, out, err, render::render)
    }

    /// [`Client::attach`], with what is kept of each event read back
    /// made by `keep` (given the event and the width).
    fn attach_with<T>(
        home: &Path,
        exchanges: usize,
        follow: bool,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
        keep: impl Fn(&Event, usize) -> Option<T>,
    ) -> Result<(Self, Vec<T>), TalkError> {
        // An absolute path, so that messages name the place for certain.
        let home = &home.canonicalize().unwrap_or_else(|_| home.to_owned());
        let journal = home.join(JOURNAL_PATH);
        let (tx, rx) = mpsc::channel();
        let pending = Arc::new(AtomicBool::new(false));
        if follow {
            // Watch first, so nothing appended after the look back is missed.
            follow::watch(home, tx.clone(), pending.clone())
                .map_err(|source| TalkError::Watch { path: journal.clone(), source })?;
        }
        let width = terminal_width();
        let mut recent = Recent::new(exchanges, MAX_ENTRIES);
        let end = look_back(&journal, &mut recent, LOOK_BACK_BUDGET, |e| keep(e, width))
            .map_err(|source| TalkError::Journal { path: journal.clone(), source })?;
        let client = Self {
            home: home.to_owned(),
            tail: Tail::at(journal.clone(), end),
            journal,
            tx,
            rx,
            pending,
            backlog: VecDeque::new(),
            activity: recent.activity(),
            interrupting: false,
            own: HashSet::new(),
            gate: gate::Steps::default(),
            status: None,
            width,
            out,
            err,
        };
        Ok((client, recent.into_entries()))
    }

    /// Prints a line of the conversation.
    fn print(&mut self, text: &str) -> Result<(), TalkError> {
        writeln!(self.out, "{text}").and_then(|()| self.out.flush()).map_err(TalkError::Output)
    }

    /// Tells the owner something about the client itself.
    fn say(&mut self, text: &str) -> Result<(), TalkError> {
        writeln!(self.err, "{text}").and_then(|()| self.err.flush()).map_err(TalkError::Output)
    }

    /// Whether a kernel runs for this individual: it holds the lock.
    fn running(&self) -> bool {
        crate::lock::is_held(&self.home)
    }

    /// Says once that nobody runs, when that is so.
    fn note_if_not_running(&mut self, sending: bool) -> Result<(), TalkError> {
        if !self.running() {
            let note = not_running(&self.home, sending);
            self.say(&note)?;
        }
        Ok(())
    }

    /// Reads what was appended to the journal into the backlog.
    fn fill(&mut self) -> Result<(), TalkError> {
        self.pending.store(false, Ordering::Release);
        self.status = None;
        let events = self
            .tail
            .read_new()
            .map_err(|source| TalkError::Journal { path: self.journal.clone(), source })?;
        self.backlog.extend(events);
        Ok(())
    }

    /// The next event, keeping track of what the agent does.
    fn pop(&mut self) -> Option<Event> {
        let event = self.backlog.pop_front()?;
        self.gate.on_event(&event);
        if let Some(activity) = turns::activity_after(event.known_kind()) {
            self.activity = activity;
            if activity == Activity::Resting {
                self.interrupting = false;
            }
        }
        Some(event)
    }

    /// Prints what the plain client shows for `event`.
    fn show(&mut self, event: &Event) -> Result<(), TalkError> {
        self.gate_started(Some(&event.ts))?;
        if event.is(EventKind::OwnerLine) && self.own.remove(event.text("file")) {
            return Ok(());
        }
        match render::render(event, self.width) {
            Some(text) => self.print(&text),
            None => Ok(()),
        }
    }

    /// Prints everything journaled so far that was not yet printed.
    fn catch_up(&mut self) -> Result<(), TalkError> {
        self.fill()?;
        while let Some(event) = self.pop() {
            self.show(&event)?;
        }
        self.gate_started(None)
    }

    /// Prints that a step of the gate started, when the kernel's status
    /// says one did that was not yet said, and it was set before the event
    /// journaled at `next` (if any) that is printed next.
    fn gate_started(&mut self, next: Option<&str>) -> Result<(), TalkError> {
        if !self.gate.watching() {
            return Ok(());
        }
        let home = &self.home;
        let status = self.status.get_or_insert_with(|| teneral_core::status::read(home));
        let Some(status) = status else { return Ok(()) };
        match self.gate.started(&status.status, &status.since, next) {
            Some(line) => self.print(&line),
            None => Ok(()),
        }
    }

    /// The next event of the journal, waiting for one until `deadline`;
    /// `None` when the deadline passed first.
    fn next_event(&mut self, deadline: Instant) -> Result<Option<Event>, TalkError> {
        loop {
            if let Some(event) = self.pop() {
                return Ok(Some(event));
            }
            self.fill()?;
            if !self.backlog.is_empty() {
                continue;
            }
            self.gate_started(None)?;
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    let source = io::Error::other("the watch on the journal ended");
                    return Err(TalkError::Watch { path: self.journal.clone(), source });
                }
            }
        }
    }

    /// Writes an owner line; returns the file's name.
    fn send_line(&mut self, text: &str) -> Result<String, TalkError> {
        crate::owner::write_line(&self.home, text).map_err(|source| self.owner_error(source))
    }

    /// Writes an interrupt.
    fn send_interrupt(&mut self) -> Result<(), TalkError> {
        crate::owner::write_interrupt(&self.home).map_err(|source| self.owner_error(source))?;
        self.interrupting = true;
        Ok(())
    }

    fn owner_error(&self, source: io::Error) -> TalkError {
        TalkError::Owner { dir: self.home.join(crate::owner::OWNER_DIR), source }
    }
}

/// The width of one-line forms: the terminal's, when the shell exports it.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c >= 20)
        .map_or(DEFAULT_WIDTH, |c| c.min(400))
}

/// What the client says when no kernel runs for `home`.
pub fn not_running(home: &Path, sending: bool) -> String {
    let mut start = crate::status::start_hint(home);
    if let Ok(crate::state::State { stopped: Some(stopped), .. }) = crate::state::State::load(home)
    {
        start = format!(
            "{start}; it stopped by itself at {} with status {}: {}",
            stopped.at, stopped.status, stopped.reason
        );
    }
    if sending {
        format!(
            "teneral is not running in {}: what you send waits in {} and is answered once it \
             starts ({start})",
            home.display(),
            crate::owner::OWNER_DIR
        )
    } else {
        format!("teneral is not running in {} ({start})", home.display())
    }
}
