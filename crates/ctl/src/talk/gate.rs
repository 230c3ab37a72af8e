//! The gate's steps as they start, for the plain and piped clients: the
//! journal says when a step ends (`mutation.check`); when one starts is in
//! the kernel's status (`.teneral/status`, "checking mutation 0123abc:
//! smoke"), which the client reads when it changes.
//!
//! Invariants: a start is said only while a mutation this client saw asked
//! for is under way, only for that candidate, and once per step; it is said
//! before any event journaled after the status was set, so a step's start
//! never comes after its end; the decisions are pure (the caller reads the
//! status and prints).

use super::render::sanitize;
use super::view::{gate_step, parse_ts};
use crate::journal::{Event, EventKind};

/// What the client knows of the gate under way.
#[derive(Debug, Default)]
pub struct Steps {
    /// The short commit of the mutation asked for, until its verdict.
    candidate: Option<String>,
    /// The step last said to have started.
    said: Option<String>,
}

impl Steps {
    /// Follows the journal: a mutation asked for starts the watch, its
    /// verdict (or the kernel going away) ends it.
    pub fn on_event(&mut self, e: &Event) {
        // A type this client does not know changes nothing.
        let Some(kind) = e.known_kind() else { return };
        match kind {
            EventKind::MutationRequested => {
                self.candidate = Some(sanitize(crate::commit::short(e.text("candidate"))));
                self.said = None;
            }
            EventKind::MutationAccepted
            | EventKind::MutationRejected
            | EventKind::GenerationRolledback
            | EventKind::KernelStarted
            | EventKind::KernelStopped => {
                self.candidate = None;
                self.said = None;
            }
            // Neither asks for a mutation nor ends the gate's watch.
            EventKind::GenerationReady
            | EventKind::OwnerLine
            | EventKind::Birth
            | EventKind::Reply
            | EventKind::Reasoning
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::ModelRetry
            | EventKind::Usage
            | EventKind::Stimulus
            | EventKind::OfferRequested
            | EventKind::Note
            | EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::KernelNotice
            | EventKind::GenerationStarted
            | EventKind::GenerationExited
            | EventKind::MutationCheck
            | EventKind::GenerationSentback
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }

    /// Whether a mutation is under way, so the kernel's status is worth reading.
    pub fn watching(&self) -> bool {
        self.candidate.is_some()
    }

    /// The line to print for the kernel's `status` text, set at `since`,
    /// when it names a step of this mutation not yet said. `next` is the
    /// journal time of the event about to be printed, if any: a status set
    /// after it waits until that event is printed.
    pub fn started(&mut self, status: &str, since: &str, next: Option<&str>) -> Option<String> {
        let candidate = self.candidate.as_deref()?;
        let (named, step) = gate_step(status)?;
        if named != candidate || self.said.as_deref() == Some(step.as_str()) {
            return None;
        }
        if let (Some(set), Some(next)) = (parse_ts(since), next.and_then(parse_ts)) {
            if set > next {
                return None;
            }
        }
        let line = format!("[gate] {step}: started");
        self.said = Some(step);
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_line;

    fn event(json: &str) -> Event {
        parse_line(json.as_bytes()).unwrap_or_else(|| panic!("not an event: {json}"))
    }

    const ASKED: &str = r#"{"type":"mutation.requested","ts":"2026-11-30T10:00:00.000Z","seq":1,"commit":"a","candidate":"fedcba9876543210fedcba9876543210fedcba98"}"#;
    const AT: &str = "2026-11-30T10:00:01.000Z";

    #[test]
    fn a_start_is_said_once_for_the_mutation_under_way() {
        let mut steps = Steps::default();
        let smoke = "checking mutation fedcba9: smoke";
        assert_eq!(steps.started(smoke, AT, None), None, "no mutation asked for");
        steps.on_event(&event(ASKED));
        assert!(steps.watching());
        let table = [
            ("checking mutation 0123456: smoke", None, "another candidate's"),
            ("generation fedcba9: resting", None, "not a gate step"),
            (smoke, Some("[gate] smoke: started"), "said"),
            (smoke, None, "said once"),
            (
                "checking mutation fedcba9: kernel-tests, body-tests",
                Some("[gate] kernel-tests, body-tests: started"),
                "the next",
            ),
            (
                "checking mutation fedcba9: \u{1b}]0;x\u{7}lint",
                Some("[gate] lint: started"),
                "sanitized",
            ),
        ];
        for (status, want, why) in table {
            assert_eq!(steps.started(status, AT, None).as_deref(), want, "{why}");
        }
        steps.on_event(&event(r#"{"type":"mutation.accepted","ts":"2026-11-30T10:01:00.000Z","seq":9,"commit":"a","from":"a","to":"b"}"#));
        assert!(!steps.watching());
        assert_eq!(steps.started("checking mutation fedcba9: paths", AT, None), None, "over");
    }

    #[test]
    fn a_start_set_after_the_next_event_waits_for_it() {
        let mut steps = Steps::default();
        steps.on_event(&event(ASKED));
        let status = "checking mutation fedcba9: smoke";
        let earlier = Some("2026-11-30T10:00:00.500Z");
        assert_eq!(steps.started(status, AT, earlier), None, "printed after that event");
        let same = Some(AT);
        assert_eq!(steps.started(status, AT, same).as_deref(), Some("[gate] smoke: started"));
    }
}
