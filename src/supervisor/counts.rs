//! The lifecycle's counts at a start, rebuilt from the journal: the
//! `kernel.started` of the last start holds them as they stood then, and
//! every later event of the generation changes them (`generation.exited`
//! holds them after its decision, a reply ends the row of crashes, a move
//! to the generation begins it anew). A pure function with a table test.

use crate::lifecycle::RunCounts;
use teneral_core::journal::reader::Event;
use teneral_core::journal::EventKind;

/// The field names, in `kernel.started` and `generation.exited`.
pub const CRASHES_IN_ROW: &str = "crashes_in_row";
pub const RESTARTS: &str = "restarts";

/// The counts of generation `commit` after `events` (oldest first), which
/// follow `started`, the last `kernel.started` (when the journal has one).
pub fn carried(started: Option<&Event>, events: &[Event], commit: &str) -> RunCounts {
    let mut counts = match started {
        Some(e) if e.commit == commit => held(e),
        _ => RunCounts::default(),
    };
    for event in events {
        // A type this build does not know changes nothing.
        let Some(kind) = event.known_kind() else { continue };
        match kind {
            EventKind::MutationAccepted
            | EventKind::GenerationRolledback
            | EventKind::GenerationSentback => {
                if event.text("to") == commit {
                    counts = RunCounts::default();
                }
            }
            EventKind::GenerationExited => {
                if event.commit == commit {
                    counts = held(event);
                }
            }
            EventKind::Reply => {
                if event.commit == commit {
                    counts.crashes_in_row = 0;
                }
            }
            // Nothing of the counts.
            EventKind::GenerationReady
            | EventKind::OwnerLine
            | EventKind::Birth
            | EventKind::Reasoning
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::ModelRetry
            | EventKind::Usage
            | EventKind::Stimulus
            | EventKind::MutationRequested
            | EventKind::OfferRequested
            | EventKind::Note
            | EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::KernelStarted
            | EventKind::KernelStopped
            | EventKind::KernelNotice
            | EventKind::GenerationStarted
            | EventKind::MutationCheck
            | EventKind::MutationRejected
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }
    counts
}

/// The counts an event holds (none written: nothing counted).
fn held(event: &Event) -> RunCounts {
    let count = |name: &str| {
        let n = event.fields.get(name).and_then(serde_json::Value::as_u64).unwrap_or(0);
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    RunCounts { crashes_in_row: count(CRASHES_IN_ROW), restarts: count(RESTARTS) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use teneral_core::journal::reader::parse_line;

    fn ev(v: serde_json::Value) -> Event {
        parse_line(v.to_string().as_bytes()).expect("a test event is whole")
    }

    fn counted(kind: &str, commit: &str, crashes: u32, restarts: u32) -> Event {
        ev(json!({"type": kind, "seq": 1, "commit": commit,
                  "crashes_in_row": crashes, "restarts": restarts}))
    }

    fn plain(kind: &str, commit: &str) -> Event {
        ev(json!({"type": kind, "seq": 1, "commit": commit}))
    }

    fn moved(kind: &str, to: &str) -> Event {
        ev(json!({"type": kind, "seq": 1, "commit": "X", "from": "X", "to": to}))
    }

    fn counts(crashes_in_row: u32, restarts: u32) -> RunCounts {
        RunCounts { crashes_in_row, restarts }
    }

    #[test]
    fn the_counts_are_what_the_journal_last_says_of_the_generation() {
        let started = counted("kernel.started", "A", 1, 4);
        let cases: Vec<(&str, Option<Event>, Vec<Event>, RunCounts)> = vec![
            ("a journal without a start", None, vec![], counts(0, 0)),
            ("a start of this generation", Some(started.clone()), vec![], counts(1, 4)),
            (
                "a start of another",
                Some(counted("kernel.started", "B", 2, 9)),
                vec![],
                counts(0, 0),
            ),
            (
                "a start written before the counts",
                Some(plain("kernel.started", "A")),
                vec![],
                counts(0, 0),
            ),
            (
                "an exit after it",
                Some(started.clone()),
                vec![counted("generation.exited", "A", 2, 5)],
                counts(2, 5),
            ),
            (
                "an exit of another",
                Some(started.clone()),
                vec![counted("generation.exited", "B", 2, 5)],
                counts(1, 4),
            ),
            (
                "a reply ends the row",
                Some(started.clone()),
                vec![plain("reply", "A")],
                counts(0, 4),
            ),
            (
                "an exit after the reply",
                Some(started.clone()),
                vec![plain("reply", "A"), counted("generation.exited", "A", 1, 5)],
                counts(1, 5),
            ),
            (
                "promoted to it",
                Some(started.clone()),
                vec![moved("mutation.accepted", "A")],
                counts(0, 0),
            ),
            (
                "gone back to it",
                Some(started.clone()),
                vec![moved("generation.rolledback", "A")],
                counts(0, 0),
            ),
            (
                "sent back to it",
                Some(started.clone()),
                vec![moved("generation.sentback", "A")],
                counts(0, 0),
            ),
            (
                "a move elsewhere",
                Some(started.clone()),
                vec![moved("mutation.accepted", "B")],
                counts(1, 4),
            ),
            (
                "a count past u32 saturates",
                Some(counted("kernel.started", "A", 0, 0)),
                vec![ev(json!({"type": "generation.exited", "seq": 1, "commit": "A",
                               "crashes_in_row": 1, "restarts": u64::MAX}))],
                counts(1, u32::MAX),
            ),
        ];
        for (name, started, events, want) in cases {
            assert_eq!(carried(started.as_ref(), &events, "A"), want, "{name}");
        }
    }
}
