//! What a start must finish or undo of what the last kernel left half done:
//! a pure function from what the journal says since the last start, the
//! state, `lineage/local` and the owner's waiting files to a list of
//! actions. The start ([`super::start`]) reads and acts; this decides.
//!
//! Every transition is written ahead: its journal event first, then the
//! state, then the lineage. So the journal's last move of generation
//! ([`Move`]) is what the state must show, unless the state has since moved
//! elsewhere. `teneralctl back` with the kernel down writes ahead the same
//! way: its `generation.sentback`, then the state. The invariants (docs/design.md, "Crashes"):
//! every owner line journaled once, every `mutation.requested` answered
//! once, state and lineage agreeing, a trial kept, and every
//! `offer.requested` answered once (`crate::offer::reconcile`).

use crate::journal::reader::Event;
use crate::journal::EventKind;
use crate::offer::reconcile::{unanswered, Offers, Owed};

/// How a generation became the current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveKind {
    /// `mutation.accepted`: promoted, on trial.
    Accepted,
    /// `generation.rolledback` or `generation.sentback`: gone back.
    Back,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub kind: MoveKind,
    pub from: String,
    pub to: String,
}

/// A `mutation.requested` no verdict answers yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub seq: u64,
    pub candidate: String,
    /// The generation that asked.
    pub commit: String,
}

/// An owner line whose turn a stop or a kill cut before any reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutLine {
    /// The seq of its `owner.line`.
    pub seq: u64,
}

/// The field, in `kernel.started` and in the `kernel.notice` journaled
/// right after it, that names the owner line whose turn was cut (the seq of
/// its `owner.line`), so the body takes the turn again.
pub const CUT_TURN: &str = "cut_turn";

/// What the journal says since the last `kernel.started`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    /// Owner files whose lines the journal holds.
    pub owner_files: Vec<String>,
    /// The last owner line no reply or end of turn followed, whether it was
    /// journaled by this kernel's body or named by this kernel's start as
    /// cut by the one before (a kill before the body answered again).
    pub cut_line: Option<CutLine>,
    pub open_requests: Vec<Request>,
    pub last_move: Option<Move>,
    /// The offers asked for, answered and published.
    pub offers: Offers,
}

impl Tail {
    /// Takes in the last `kernel.started` (if the journal has one), which
    /// names the cut turn it started with (`cut_turn`), so a kill right
    /// after it keeps the turn cut for the next start; then the events after
    /// it, oldest first.
    pub fn since(started: Option<&Event>, events: &[Event]) -> Tail {
        let mut tail = Tail::default();
        if let Some(seq) = started.and_then(|e| e.fields.get(CUT_TURN)).and_then(|v| v.as_u64()) {
            tail.cut_line = Some(CutLine { seq });
        }
        for event in events {
            // A type this build does not know is passed over.
            let Some(kind) = event.known_kind() else { continue };
            match kind {
                EventKind::OwnerLine => {
                    tail.owner_files.push(event.text("file").to_owned());
                    tail.cut_line = Some(CutLine { seq: event.seq });
                }
                EventKind::Reply | EventKind::TurnEnded | EventKind::TurnInterrupted => {
                    tail.cut_line = None
                }
                EventKind::KernelNotice => {
                    if let Some(seq) = event.fields.get(CUT_TURN).and_then(|v| v.as_u64()) {
                        tail.cut_line = Some(CutLine { seq });
                    }
                }
                EventKind::MutationRequested => tail.open_requests.push(Request {
                    seq: event.seq,
                    candidate: event.text("candidate").to_owned(),
                    commit: event.commit.clone(),
                }),
                EventKind::MutationAccepted | EventKind::MutationRejected => {
                    let answered = event.fields.get("request").and_then(|v| v.as_u64());
                    let candidate = match event.text("candidate") {
                        "" => event.text("to"),
                        c => c,
                    };
                    // A verdict names its request; one without (written
                    // before verdicts did) answers its candidate's.
                    tail.open_requests.retain(|r| match answered {
                        Some(seq) => r.seq != seq,
                        None => r.candidate != candidate,
                    });
                    if event.is(EventKind::MutationAccepted) {
                        tail.last_move = moved(event, MoveKind::Accepted);
                    }
                }
                EventKind::GenerationRolledback | EventKind::GenerationSentback => {
                    tail.last_move = moved(event, MoveKind::Back);
                }
                // What may be of an offer (`Offers::see` passes over the rest).
                EventKind::GenerationReady
                | EventKind::Birth
                | EventKind::Reasoning
                | EventKind::ToolCall
                | EventKind::ToolResult
                | EventKind::ModelRetry
                | EventKind::Usage
                | EventKind::Stimulus
                | EventKind::OfferRequested
                | EventKind::Note
                | EventKind::Log
                | EventKind::KernelStarted
                | EventKind::KernelStopped
                | EventKind::GenerationStarted
                | EventKind::GenerationExited
                | EventKind::MutationCheck
                | EventKind::EventsDropped
                | EventKind::OfferAnswered
                | EventKind::OfferPublished
                | EventKind::SpeciesAccepted => tail.offers.see(event),
            }
        }
        tail
    }
}

fn moved(event: &Event, kind: MoveKind) -> Option<Move> {
    let (from, to) = (event.text("from"), event.text("to"));
    (!to.is_empty()).then(|| Move { kind, from: from.to_owned(), to: to.to_owned() })
}

/// What the start found besides the journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The state's generation (the lineage's head, else HEAD, when it has none).
    pub generation: String,
    /// The commit a trial in the state is about, if any.
    pub trial: Option<String>,
    /// Where `lineage/local` points, if it exists.
    pub lineage: Option<String>,
    /// The names of the files waiting in `.teneral/owner/`.
    pub owner_files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The journal holds a move the state does not show yet: make the
    /// state show it (`Accepted`: `from` is kept to go back to and `to` is
    /// on trial; `Back`: nothing to go back to, no trial).
    Finish(Move),
    /// Point `lineage/local` at the state's generation (after any `Finish`).
    MoveLineage { to: String },
    /// A trial about another generation than the current one is over.
    DropTrial,
    /// This owner file's line is journaled: remove the file.
    RemoveOwnerFile(String),
    /// Tell the agent nothing was decided about this request.
    AnswerUndecided(Request),
    /// Answer an offer request its kernel never answered.
    AnswerOffer(Owed),
}

/// What to do, in order.
pub fn reconcile(tail: &Tail, found: &Found) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut generation = found.generation.clone();
    let mut trial = found.trial.clone();
    if let Some(m) = &tail.last_move {
        if generation != m.to && (generation == m.from || m.from.is_empty()) {
            generation = m.to.clone();
            trial = (m.kind == MoveKind::Accepted).then(|| m.to.clone());
            actions.push(Action::Finish(m.clone()));
        }
    }
    if trial.is_some_and(|t| t != generation) {
        actions.push(Action::DropTrial);
    }
    if found.lineage.as_deref() != Some(generation.as_str()) {
        actions.push(Action::MoveLineage { to: generation });
    }
    for name in &found.owner_files {
        if tail.owner_files.contains(name) {
            actions.push(Action::RemoveOwnerFile(name.clone()));
        }
    }
    for request in &tail.open_requests {
        actions.push(Action::AnswerUndecided(request.clone()));
    }
    actions.extend(unanswered(&tail.offers).into_iter().map(Action::AnswerOffer));
    actions
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
