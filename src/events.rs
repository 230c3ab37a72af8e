//! The event channel: the only way a body's words reach the journal.
//!
//! The kernel listens on a Unix socket made for one run of one generation and
//! hands its path to the body (docs/contract.md, section 3). Only that body
//! may use it ([`admit`]): any other process is refused when it connects.
//! What the body can make the kernel hold is bounded ([`bounds`]): a few
//! connections, one line at a time on each, a bounded sum of unfinished
//! lines, and answers it must read. What each line costs is bounded before
//! it is parsed ([`teneral_core::journal::rules::check_cost`]), and how many lines
//! of each class a generation may send a second ([`rate`]): the excess is
//! dropped, counted and journaled as one `events.dropped` per flood. Each
//! line is checked ([`teneral_core::journal::rules`]), stamped with the generation's commit,
//! appended and synced, and only then acknowledged. A refusal writes nothing
//! and tells the body why. A `reply.delta` is never journaled: its words go
//! to the owner's clients ([`teneral_core::live`]), and the reply in
//! progress is emptied before the event that ends it is journaled. An owner
//! line is journaled only if its file holds
//! exactly the text the body sent, and its file is removed after the journal
//! has it, so a line is never lost and never taken in twice.

mod admit;
mod bounds;
mod doing;
mod rate;
mod socket;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

pub use admit::{Admit, Peer, Refusal};
pub use bounds::Bounds;
pub use socket::{bind, home_id, socket_path, sockets_dir, sweep_stale, SOCKET_DIR_VAR};

use bounds::{Budget, Hush, Lines, Next, Seat, Seats};
use rate::{Class, Dropped, Rates, RATES};
use teneral_core::commit::Commit;
use teneral_core::journal::kind::EventKind;
use teneral_core::journal::rules::{check_cost, check_owner_file_name, check_shape, Accepted};
use teneral_core::journal::writer::Journal;
use teneral_core::log::{self, Priority};
use teneral_core::owner::OWNER_DIR;

/// Longest line a body may send, newline not counted.
pub const MAX_LINE: usize = Bounds::CHANNEL.line;

/// Refusals logged per minute and channel; the rest are counted.
const REFUSALS_PER_MINUTE: u32 = 20;

/// What the supervisor needs to hear of, after the journal has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Ready,
    OwnerLine,
    Replied,
    Interrupted,
    TurnEnded,
    /// Something woke the agent, or it is reasoning: it is thinking.
    Thinking,
    /// It runs the tool of this name.
    Tool(String),
    /// A `mutation.requested`, journaled with this `seq`: its verdict
    /// names the request by it.
    MutationRequested {
        candidate: Commit,
        seq: u64,
    },
    /// An `offer.requested`, journaled with this `seq`: the kernel signs,
    /// checks and (when allowed) publishes `offer/<name>` at `commit` (the
    /// event's `head`), and
    /// answers with one `offer.answered` naming `seq` (`crate::offer::answer`).
    OfferRequested {
        name: String,
        commit: Commit,
        seq: u64,
    },
}

/// The journal, shared by the channel and the supervisor's own events.
pub type SharedJournal = Arc<Mutex<Journal>>;

/// Appends an event the kernel writes itself, logging a failure.
pub fn kernel_event(journal: &SharedJournal, commit: &Commit, kind: EventKind, fields: Value) {
    log::event(kind, format!("{kind} {fields}"));
    let mut j = journal.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(e) = j.append_kernel(commit, kind, fields) {
        log::warn(format!("could not journal {kind}: {e}"));
    }
}

/// One generation's channel.
pub struct Channel {
    pub home: PathBuf,
    pub commit: Commit,
    pub journal: SharedJournal,
    pub seen: mpsc::UnboundedSender<Seen>,
}

/// A channel being served, with what its connections share.
struct Served {
    channel: Channel,
    admit: Admit,
    limits: Bounds,
    seats: Seats,
    budget: Budget,
    hush: Mutex<Hush>,
    rates: Mutex<Rates>,
    /// Told when an event is dropped: floods are looked at only while one
    /// is counted, so an idle channel sets no timer.
    dropping: tokio::sync::Notify,
}

/// How often floods are looked at while one is counted, to report those
/// that ended.
const FLOODS_LOOKED_AT: std::time::Duration = std::time::Duration::from_secs(1);

impl Channel {
    /// Serves every connection `admit` lets in, within [`Bounds::CHANNEL`],
    /// until dropped.
    pub async fn serve_admitting(self, listener: UnixListener, admit: Admit) {
        self.serve_within(listener, admit, Bounds::CHANNEL).await;
    }

    /// The same, within other bounds (for tests of the bounds).
    pub async fn serve_within(self, listener: UnixListener, admit: Admit, limits: Bounds) {
        let served = Arc::new(Served {
            channel: self,
            admit,
            limits,
            seats: Seats::new(limits.connections),
            budget: Budget::new(limits.buffered),
            hush: Mutex::new(Hush::new(REFUSALS_PER_MINUTE)),
            rates: Mutex::new(Rates::new(RATES, Instant::now())),
            dropping: tokio::sync::Notify::new(),
        });
        let mut floods = tokio::time::interval(FLOODS_LOOKED_AT);
        floods.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let counting = served.rates.lock().unwrap_or_else(|p| p.into_inner()).counting();
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => Arc::clone(&served).arrived(stream),
                    Err(e) => {
                        log::info(format!("event socket: {e}"));
                        return;
                    }
                },
                // A drop began a flood: its first look is a period from now.
                _ = served.dropping.notified(), if !counting => floods.reset(),
                _ = floods.tick(), if counting => {
                    let due = served.rates.lock().unwrap_or_else(|p| p.into_inner()).due(Instant::now());
                    served.channel.report_dropped(&due);
                }
            }
        }
    }

    /// Journals one `events.dropped` for each flood in `dropped`.
    fn report_dropped(&self, dropped: &[Dropped]) {
        for flood in dropped {
            let fields = json!({
                "kind": flood.class.name(),
                "count": flood.count,
                "seconds": (flood.seconds * 1000.0).round() / 1000.0,
            });
            kernel_event(&self.journal, &self.commit, EventKind::EventsDropped, fields);
        }
    }
}

impl Drop for Served {
    /// What is still counted when the channel ends is journaled then.
    fn drop(&mut self) {
        let left = self.rates.get_mut().unwrap_or_else(|p| p.into_inner()).flush(Instant::now());
        self.channel.report_dropped(&left);
    }
}

impl Served {
    /// Admits a new connection, or refuses it and closes it at once. One
    /// made before the body is named holds its seat while it waits to be
    /// judged ([`Admit::check_when_named`]).
    fn arrived(self: Arc<Self>, stream: UnixStream) {
        let peer = Peer::of_connection(&stream);
        let early = match self.admit.check(&peer) {
            Ok(()) => false,
            Err(Refusal::NotStarted) => true,
            Err(refusal) => {
                self.refuse_connection(stream, &peer, &refusal.to_string());
                return;
            }
        };
        let Some(seat) = self.seats.take() else {
            let why = format!(
                "refused: this generation already has {} connections open, its most; use \
                 the one it has",
                self.limits.connections
            );
            self.refuse_connection(stream, &peer, &why);
            return;
        };
        tokio::spawn(async move {
            if early {
                let judged = self.admit.check_when_named(&peer, self.limits.unnamed).await;
                if let Err(refusal) = judged {
                    self.refuse_connection(stream, &peer, &refusal.to_string());
                    return;
                }
            }
            self.connection(stream, seat).await
        });
    }

    /// Tells the peer why (without waiting for it to read), logs it, closes.
    fn refuse_connection(&self, stream: UnixStream, peer: &Peer, why: &str) {
        let _ = stream.try_write(answer_line(&refuse(why.to_owned())).as_slice());
        let pid = peer.pid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into());
        self.log_refusal(&format!("a connection from pid {pid} uid {} {why}", peer.uid));
    }

    fn log_refusal(&self, text: &str) {
        let spoken = self.hush.lock().unwrap_or_else(|p| p.into_inner()).speak(Instant::now());
        match spoken {
            Some(0) => log::at(Priority::Warning, format!("event socket: {text}")),
            Some(n) => log::at(
                Priority::Warning,
                format!("event socket: {text} ({n} refusals before it were not logged)"),
            ),
            None => {}
        }
    }

    async fn connection(&self, stream: UnixStream, seat: Seat) {
        let _seat = seat;
        let (read, mut write) = stream.into_split();
        let mut lines = Lines::new(read, &self.budget, self.limits);
        loop {
            let (answer, last) = match lines.next().await {
                Next::Closed => return,
                Next::Refused(why) => {
                    self.log_refusal(&format!("closed a connection: {why}"));
                    (refuse(why), true)
                }
                Next::Line(line) => (self.take(line.bytes), false),
            };
            if !self.answer(&mut write, &answer).await || last {
                return;
            }
        }
    }

    /// Writes one answer; false when the connection is to end, for the
    /// body has left or has not read its answers for [`Bounds::unread`].
    async fn answer(&self, write: &mut OwnedWriteHalf, answer: &Value) -> bool {
        let out = answer_line(answer);
        match tokio::time::timeout(self.limits.unread, write.write_all(&out)).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                self.log_refusal(&format!(
                    "closed a connection that left its answers unread for {} s",
                    self.limits.unread.as_secs()
                ));
                false
            }
        }
    }
}

impl Served {
    /// Bounds one line's cost and its rate, then hands it to the channel.
    fn take(&self, line: Vec<u8>) -> Value {
        let class = match check_cost(&line) {
            Ok(kind) => Class::of(kind),
            Err(e) => return refuse(e),
        };
        let passes =
            self.rates.lock().unwrap_or_else(|p| p.into_inner()).take(class, Instant::now());
        if !passes {
            self.dropping.notify_one();
            return refuse(format!(
                "dropped: over the rate of {} events (docs/contract.md, section 3); counted in \
                 events.dropped",
                class.name()
            ));
        }
        self.channel.take(line)
    }
}

impl Channel {
    /// Checks, journals and answers one line whose cost and rate were taken.
    fn take(&self, line: Vec<u8>) -> Value {
        let Ok(text) = String::from_utf8(line) else {
            return refuse("an event must be UTF-8 JSON".into());
        };
        let checked = check_shape(&text);
        // The parsed event is all that is needed now: the line's bytes go.
        drop(text);
        let (event, accepted) = match checked {
            Ok(ok) => ok,
            Err(e) => return refuse(e),
        };
        match accepted {
            Accepted::Log { level, text } => {
                log::body_log(level.as_str(), text);
                json!({"ok": true})
            }
            Accepted::Delta { text } => match teneral_core::live::append(&self.home, &text) {
                Ok(()) => json!({"ok": true}),
                Err(e) => refuse(e),
            },
            Accepted::Journal => self.append(&event, None),
            Accepted::OwnerLine { file, text } => match self.owner_file(&file, &text) {
                Ok(path) => self.append(&event, Some(&path)),
                Err(e) => refuse(e),
            },
        }
    }

    /// The owner file a body names, if it holds exactly `text`.
    fn owner_file(&self, name: &str, text: &str) -> Result<PathBuf, String> {
        check_owner_file_name(name)?;
        let path = self.home.join(OWNER_DIR).join(name);
        let held = self.journal.lock().unwrap_or_else(|p| p.into_inner()).holds_owner_file(name);
        if held {
            // Journaled, and its removal failed: once is enough.
            let _ = std::fs::remove_file(&path);
            return Err(format!("owner line {name}: already taken in; it is in the journal"));
        }
        // Beneath the owner's directory, no link followed, a regular file only.
        match teneral_core::owner::read_file(&self.home, name) {
            Ok(bytes) if bytes == text.as_bytes() => Ok(path),
            Ok(_) => Err(format!(
                "owner line {name}: the text sent is not what the owner wrote; send the file's content exactly"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "owner line {name}: there is no such file in {OWNER_DIR} (already taken in?)"
            )),
            Err(e) => Err(format!("owner line {name}: {e}")),
        }
    }

    fn append(&self, event: &Map<String, Value>, owner_file: Option<&Path>) -> Value {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        // The reply in progress is over before the journal says so, so a
        // client that reads the journal's event finds it emptied.
        if EventKind::named(&kind).is_some_and(teneral_core::live::ends_reply) {
            if let Err(e) = teneral_core::live::clear(&self.home) {
                log::info(format!("could not empty the reply in progress: {e}"));
            }
        }
        let result = {
            let mut j = self.journal.lock().unwrap_or_else(|p| p.into_inner());
            j.append(&self.commit, event)
        };
        let seq = match result {
            Ok(seq) => seq,
            Err(e) => {
                log::warn(format!("could not journal a {kind} event: {e}"));
                return refuse(format!("the kernel could not write the journal: {e}"));
            }
        };
        if let Some(path) = owner_file {
            teneral_core::crash::point("owner.journaled");
            // A line whose file outlives this (a crash right here) is found
            // by the next start in the journal, and its file removed there.
            let removed = std::fs::remove_file(path).and_then(|()| match path.parent() {
                Some(dir) => teneral_core::fsutil::sync_dir(dir),
                None => Ok(()),
            });
            match removed {
                Ok(()) => teneral_core::crash::point("owner.removed"),
                Err(e) => log::info(format!(
                    "journaled owner line {} but could not remove it: {e}",
                    path.display()
                )),
            }
        }
        // The channel's rules took only a kind a body sends.
        if let Some(known) = EventKind::named(&kind) {
            if known == EventKind::MutationRequested {
                teneral_core::crash::point("request.journaled");
            }
            self.tell(known, event, seq);
        }
        json!({"ok": true, "seq": seq})
    }

    fn tell(&self, kind: EventKind, event: &Map<String, Value>, seq: u64) {
        let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let seen = match kind {
            EventKind::GenerationReady => Some(Seen::Ready),
            EventKind::OwnerLine => Some(Seen::OwnerLine),
            EventKind::Reply => {
                log::agent(kind.name(), kind, first_line(&text("text")));
                Some(Seen::Replied)
            }
            EventKind::TurnInterrupted => Some(Seen::Interrupted),
            EventKind::TurnEnded => Some(Seen::TurnEnded),
            // The channel's rules took only a full commit id.
            EventKind::MutationRequested => match Commit::parse(&text("candidate")) {
                Ok(candidate) => Some(Seen::MutationRequested { candidate, seq }),
                Err(e) => {
                    log::info(format!("a mutation request the rules let through: {e}"));
                    None
                }
            },
            // The channel's rules took only a full commit id.
            EventKind::OfferRequested => Commit::parse(&text("head"))
                .ok()
                .map(|commit| Seen::OfferRequested { name: text("name"), commit, seq }),
            EventKind::ToolCall => {
                log::agent("tool", kind, text("name"));
                Some(Seen::Tool(text("name")))
            }
            EventKind::Reasoning => {
                log::agent("thinking", kind, first_line(&text("text")));
                Some(Seen::Thinking)
            }
            EventKind::Stimulus | EventKind::Birth | EventKind::ToolResult => Some(Seen::Thinking),
            // What says nothing of what the agent does.
            EventKind::ModelRetry | EventKind::Usage | EventKind::Note => None,
            // Never journaled from a body: its log goes to the kernel's log,
            // and the rest are the kernel's own.
            EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::KernelStarted
            | EventKind::KernelStopped
            | EventKind::KernelNotice
            | EventKind::GenerationStarted
            | EventKind::GenerationExited
            | EventKind::MutationCheck
            | EventKind::MutationRejected
            | EventKind::MutationAccepted
            | EventKind::GenerationRolledback
            | EventKind::GenerationSentback
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => None,
        };
        if let Some(seen) = seen {
            let _ = self.seen.send(seen);
        }
    }
}

fn refuse(error: String) -> Value {
    json!({"ok": false, "error": error})
}

fn answer_line(answer: &Value) -> Vec<u8> {
    let mut out = answer.to_string().into_bytes();
    out.push(b'\n');
    out
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut: String = line.chars().take(160).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// `teneral serve-events`: the channel of one generation without a
/// supervisor, so a body can be tested against the kernel's real rules.
pub async fn serve_alone(socket: &Path, home: &Path, commit: &Commit) -> std::io::Result<()> {
    let journal = Journal::open(&home.join(teneral_core::journal::JOURNAL_PATH))
        .map_err(std::io::Error::other)?;
    let listener = bind(socket)?;
    let (seen, mut drain) = mpsc::unbounded_channel();
    tokio::spawn(async move { while drain.recv().await.is_some() {} });
    let channel = Channel {
        home: home.to_owned(),
        commit: commit.clone(),
        journal: Arc::new(Mutex::new(journal)),
        seen,
    };
    // A test tool: whoever runs it drives the body by hand, so anyone who
    // can reach the socket is served (the bounds still hold).
    channel.serve_admitting(listener, Admit::anyone()).await;
    Ok(())
}
