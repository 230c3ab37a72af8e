//! The start's reconciliation, one case a row.
use serde_json::json;

use super::*;
use crate::journal::reader::parse_line;

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
        ("a line the owner interrupted", vec![owner(1, "a"), plain(2, "turn.interrupted")], None),
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
