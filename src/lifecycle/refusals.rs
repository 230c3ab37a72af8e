//! The rule for a mutation the gate refused: the same generation starts
//! again after a pause that grows with each refusal of the same commit, and
//! the third refusal in a row of one commit stops the kernel (the agent is
//! stuck on it; its owner should look). Pure: the caller keeps the count.

use std::time::Duration;

use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;

/// Refusals in a row of one commit after which the kernel stops.
pub const GIVE_UP_AFTER: u32 = 3;

/// What follows a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Start the same generation again after this pause.
    Retry { after: Duration },
    /// Stop the kernel and wait for the owner.
    GiveUp,
}

/// The count of refusals in a row of `candidate` after this one, given the
/// last refused commit and its count, and what follows.
pub fn after_refusal(
    last: Option<(&Commit, u32)>,
    candidate: &Commit,
    backoff_unit: Duration,
) -> (u32, AfterRefusal) {
    let times = match last {
        Some((commit, times)) if commit == candidate => times.saturating_add(1),
        _ => 1,
    };
    if times >= GIVE_UP_AFTER {
        (times, AfterRefusal::GiveUp)
    } else {
        (times, AfterRefusal::Retry { after: backoff_unit * times })
    }
}

/// What the journal says of the refusals in a row, over the events since
/// the last kernel's start, oldest first, as (type, candidate, count): the
/// candidate and count the last `mutation.rejected` carried, unless a
/// `mutation.accepted` came after it (`Some(None)`: the row is over).
/// `None` when the events say nothing of it. A refusal journaled without a
/// count (nothing decided, or a journal from before counts were journaled)
/// is not one of the row.
pub fn journaled_row<'a>(
    events: impl IntoIterator<Item = (Option<EventKind>, &'a str, Option<u32>)>,
) -> Option<Option<(&'a str, u32)>> {
    let mut row = None;
    for (kind, candidate, times) in events {
        match (kind, times) {
            (Some(EventKind::MutationRejected), Some(times)) => {
                row = Some(Some((candidate, times)))
            }
            (Some(EventKind::MutationAccepted), _) => row = Some(None),
            // Nothing decided: not one of the row.
            (Some(EventKind::MutationRejected), None) => {}
            // Only a verdict says anything of the row.
            (
                Some(
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
                    | EventKind::MutationRequested
                    | EventKind::OfferRequested
                    | EventKind::Note
                    | EventKind::Log
                    | EventKind::ReplyDelta
                    | EventKind::KernelStarted
                    | EventKind::KernelStopped
                    | EventKind::KernelNotice
                    | EventKind::GenerationStarted
                    | EventKind::GenerationExited
                    | EventKind::MutationCheck
                    | EventKind::GenerationRolledback
                    | EventKind::GenerationSentback
                    | EventKind::EventsDropped
                    | EventKind::OfferAnswered
                    | EventKind::OfferPublished
                    | EventKind::SpeciesAccepted
                    | EventKind::EvalResult,
                )
                | None,
                _,
            ) => {}
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(digit: char) -> Commit {
        Commit::parse(&digit.to_string().repeat(40)).expect("forty hex digits are a commit")
    }

    #[test]
    fn the_third_refusal_in_a_row_of_one_commit_gives_up() {
        let unit = Duration::from_secs(2);
        let retry = |s| AfterRefusal::Retry { after: Duration::from_secs(s) };
        let (a, b) = (c('a'), c('b'));
        let (a, b) = (&a, &b);
        type Case<'a> = (Option<(&'a Commit, u32)>, &'a Commit, (u32, AfterRefusal));
        let cases: &[Case<'_>] = &[
            (None, a, (1, retry(2))),
            (Some((a, 1)), a, (2, retry(4))),
            (Some((a, 2)), a, (3, AfterRefusal::GiveUp)),
            (Some((a, 7)), a, (8, AfterRefusal::GiveUp)),
            (Some((a, 2)), b, (1, retry(2))),
            (Some((a, u32::MAX)), a, (u32::MAX, AfterRefusal::GiveUp)),
        ];
        for (last, candidate, want) in cases {
            assert_eq!(&after_refusal(*last, candidate, unit), want, "{last:?} then {candidate}");
        }
    }

    #[test]
    fn the_row_is_what_the_last_verdict_journaled() {
        type Case<'a> = (&'a [(&'a str, &'a str, Option<u32>)], Option<Option<(&'a str, u32)>>);
        let cases: &[Case<'_>] = &[
            (&[], None),
            (&[("reply", "", None)], None),
            (&[("mutation.rejected", "a", Some(1))], Some(Some(("a", 1)))),
            (
                &[("mutation.rejected", "a", Some(1)), ("mutation.rejected", "a", Some(2))],
                Some(Some(("a", 2))),
            ),
            (&[("mutation.rejected", "a", Some(2)), ("mutation.accepted", "b", None)], Some(None)),
            (
                &[("mutation.accepted", "b", None), ("mutation.rejected", "a", Some(1))],
                Some(Some(("a", 1))),
            ),
            // Nothing decided: not counted, the row stands.
            (
                &[("mutation.rejected", "a", Some(2)), ("mutation.rejected", "a", None)],
                Some(Some(("a", 2))),
            ),
            (&[("mutation.rejected", "a", None)], None),
        ];
        for (events, row) in cases {
            let typed = events.iter().map(|&(kind, c, t)| (EventKind::parse(kind), c, t));
            assert_eq!(journaled_row(typed), *row, "{events:?}");
        }
    }
}
