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

use crate::offer::reconcile::{unanswered, Offers, Owed};
use teneral_core::journal::reader::Event;
use teneral_core::journal::EventKind;

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
                | EventKind::ReplyDelta
                | EventKind::KernelStarted
                | EventKind::KernelStopped
                | EventKind::GenerationStarted
                | EventKind::GenerationExited
                | EventKind::MutationCheck
                | EventKind::EventsDropped
                | EventKind::OfferAnswered
                | EventKind::OfferPublished
                | EventKind::SpeciesAccepted
                | EventKind::EvalResult => tail.offers.see(event),
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

/// The start's reconciliation, one case a row.
#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use teneral_core::journal::reader::parse_line;

    fn ev(v: serde_json::Value) -> Event {
        parse_line(v.to_string().as_bytes()).expect("a test event is whole")
    }

    fn req(seq: u64, candidate: &str) -> Event {
        ev(json!({"type": "mutation.requested", "seq": seq, "commit": "A", "candidate": candidate}))
    }

    fn accepted(seq: u64, request: u64, from: &str, to: &str) -> Event {
        ev(
            json!({"type": "mutation.accepted", "seq": seq, "commit": from, "from": from, "to": to, "request": request}),
        )
    }

    fn rejected(seq: u64, request: u64, candidate: &str) -> Event {
        ev(
            json!({"type": "mutation.rejected", "seq": seq, "commit": "A", "candidate": candidate, "request": request}),
        )
    }

    fn back(seq: u64, kind: &str, from: &str, to: &str) -> Event {
        ev(json!({"type": kind, "seq": seq, "commit": from, "from": from, "to": to}))
    }

    fn owner(seq: u64, file: &str) -> Event {
        ev(json!({"type": "owner.line", "seq": seq, "commit": "A", "file": file, "text": "hi"}))
    }

    fn found(generation: &str, trial: Option<&str>, lineage: &str, files: &[&str]) -> Found {
        Found {
            generation: generation.into(),
            trial: trial.map(Into::into),
            lineage: Some(lineage.into()),
            owner_files: files.iter().map(|f| f.to_string()).collect(),
        }
    }

    fn accept_move(from: &str, to: &str) -> Action {
        Action::Finish(Move { kind: MoveKind::Accepted, from: from.into(), to: to.into() })
    }

    fn back_move(from: &str, to: &str) -> Action {
        Action::Finish(Move { kind: MoveKind::Back, from: from.into(), to: to.into() })
    }

    fn lineage(to: &str) -> Action {
        Action::MoveLineage { to: to.into() }
    }

    fn undecided(seq: u64, candidate: &str) -> Action {
        Action::AnswerUndecided(Request { seq, candidate: candidate.into(), commit: "A".into() })
    }

    #[test]
    fn each_half_done_transition_is_finished_or_answered() {
        type Case = (&'static str, Vec<Event>, Found, Vec<Action>);
        let table: Vec<Case> = vec![
            ("nothing happened", vec![], found("A", None, "A", &[]), vec![]),
            (
                "killed after the journal, before the line's file went",
                vec![owner(1, "1.txt")],
                found("A", None, "A", &["1.txt", "2.txt"]),
                vec![Action::RemoveOwnerFile("1.txt".into())],
            ),
            (
                "a request the body never saw judged",
                vec![req(1, "B")],
                found("A", None, "A", &[]),
                vec![undecided(1, "B")],
            ),
            (
                "a request rejected",
                vec![req(1, "B"), rejected(2, 1, "B")],
                found("A", None, "A", &[]),
                vec![],
            ),
            (
                "a second request for the same commit is answered by itself",
                vec![req(1, "B"), rejected(2, 1, "B"), req(3, "B")],
                found("A", None, "A", &[]),
                vec![undecided(3, "B")],
            ),
            (
                "accepted, then killed before the state moved",
                vec![req(1, "B"), accepted(2, 1, "A", "B")],
                found("A", None, "A", &[]),
                vec![accept_move("A", "B"), lineage("B")],
            ),
            (
                "accepted and the state moved, the lineage not yet",
                vec![req(1, "B"), accepted(2, 1, "A", "B")],
                found("B", Some("B"), "A", &[]),
                vec![lineage("B")],
            ),
            (
                "accepted and all moved",
                vec![req(1, "B"), accepted(2, 1, "A", "B")],
                found("B", Some("B"), "B", &[]),
                vec![],
            ),
            (
                "rolled back, then killed before the state moved",
                vec![back(1, "generation.rolledback", "B", "A")],
                found("B", Some("B"), "B", &[]),
                vec![back_move("B", "A"), lineage("A")],
            ),
            (
                "sent back by the owner with the kernel down (state first, then journal)",
                vec![back(1, "generation.sentback", "B", "A")],
                found("A", None, "B", &[]),
                vec![lineage("A")],
            ),
            (
                "the owner moved the state elsewhere after the last move",
                vec![accepted(1, 0, "A", "B")],
                found("C", None, "B", &[]),
                vec![lineage("C")],
            ),
            (
                "a trial about another generation is dropped",
                vec![],
                found("A", Some("B"), "A", &[]),
                vec![Action::DropTrial],
            ),
        ];
        for (name, events, found, want) in table {
            let tail = Tail::since(None, &events);
            assert_eq!(reconcile(&tail, &found), want, "{name}");
        }
    }

    #[test]
    fn reconciling_twice_does_nothing_more() {
        let events = vec![owner(1, "1.txt"), req(2, "B"), accepted(3, 2, "A", "B")];
        let tail = Tail::since(None, &events);
        let first = reconcile(&tail, &found("A", None, "A", &["1.txt"]));
        assert_eq!(
            first,
            vec![accept_move("A", "B"), lineage("B"), Action::RemoveOwnerFile("1.txt".into())]
        );
        // What the first pass did, done: nothing is left to do.
        assert_eq!(reconcile(&tail, &found("B", Some("B"), "B", &[])), vec![]);
    }

    #[test]
    fn an_offer_request_left_open_is_answered_after_the_mutations_and_only_once() {
        use crate::offer::reconcile::{Asked, Owed};
        let offer = ev(json!({"type": "offer.requested", "seq": 2, "commit": "A", "name": "x",
                              "head": "B"}));
        let events = vec![req(1, "B"), offer.clone()];
        let asked = Asked { seq: 2, name: "x".into(), commit: "A".into() };
        assert_eq!(
            reconcile(&Tail::since(None, &events), &found("A", None, "A", &[])),
            vec![undecided(1, "B"), Action::AnswerOffer(Owed::Stopped(asked))]
        );
        // The start's answer is in the journal: a second start owes nothing.
        let answer = ev(json!({"type": "offer.answered", "seq": 3, "commit": "A", "request": 2,
                               "state": "refused"}));
        let events = vec![offer, answer];
        assert_eq!(reconcile(&Tail::since(None, &events), &found("A", None, "A", &[])), vec![]);
    }

    fn plain(seq: u64, kind: &str) -> Event {
        ev(json!({"type": kind, "seq": seq, "commit": "A"}))
    }

    fn told_cut(seq: u64, line: u64) -> Event {
        ev(json!({"type": "kernel.notice", "seq": seq, "commit": "A", "cut_turn": line}))
    }

    #[test]
    fn the_cut_turn_is_the_last_owner_line_nothing_answered() {
        let cut = |seq: u64| Some(CutLine { seq });
        let cases: Vec<(&str, Vec<Event>, Option<CutLine>)> = vec![
            ("no line", vec![], None),
            ("a line and nothing after", vec![owner(1, "a")], cut(1)),
            ("a line replied to", vec![owner(1, "a"), plain(2, "reply")], None),
            ("a line whose turn ended", vec![owner(1, "a"), plain(2, "turn.ended")], None),
            (
                "a line the owner interrupted",
                vec![owner(1, "a"), plain(2, "turn.interrupted")],
                None,
            ),
            ("the second of two", vec![owner(1, "a"), plain(2, "reply"), owner(3, "b")], cut(3)),
            ("named by the last start, not yet answered", vec![told_cut(5, 1)], cut(1)),
            ("named by the last start and answered", vec![told_cut(5, 1), plain(6, "reply")], None),
            ("a notice that names none", vec![owner(1, "a"), plain(2, "kernel.notice")], cut(1)),
        ];
        for (name, events, want) in cases {
            assert_eq!(Tail::since(None, &events).cut_line, want, "{name}");
        }
        // A start that named a cut turn and was killed before its notice.
        let started = ev(json!({"type": "kernel.started", "seq": 4, "commit": "A", "cut_turn": 1}));
        let since = |events: &[Event]| Tail::since(Some(&started), events).cut_line;
        assert_eq!(since(&[]), cut(1), "named by the start alone");
        assert_eq!(since(&[plain(5, "reply")]), None, "answered after it");
        assert_eq!(since(&[owner(6, "b")]), cut(6), "a later line");
        let plain_start =
            ev(json!({"type": "kernel.started", "seq": 4, "commit": "A", "cut_turn": null}));
        assert_eq!(Tail::since(Some(&plain_start), &[]).cut_line, None, "a start that names none");
    }
}
