//! The start's part in "every offer request is answered exactly once": a
//! kernel killed between journaling a body's `offer.requested` and its
//! `offer.answered` leaves the request open, and no later kernel works on
//! it again. The start reads what the journal says since the last
//! `kernel.started` ([`Offers::see`]) and answers each open request itself
//! ([`unanswered`], pure): `published` from the journaled `offer.published`
//! that names it when the kill came after the publish, else `refused` with
//! "the kernel stopped before answering; ask again" (no report was kept for
//! it, so not `failed`). The answer is journaled under the generation that
//! asked, before `kernel.started`, so a second start finds it answered.

use std::path::Path;

use serde_json::{json, Value};

use teneral_core::commit::Commit;
use teneral_core::journal::reader::Event;
use teneral_core::journal::EventKind;

/// Why a request the start answers got no answer from its kernel.
pub const STOPPED: &str = "the kernel stopped before answering; ask again";

/// A body's `offer.requested`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub seq: u64,
    pub name: String,
    /// The generation that asked (the event's `commit`).
    pub commit: String,
}

/// The kernel's `offer.published` for a request (its `request` field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WentOut {
    pub request: u64,
    pub offer: String,
    pub branch: String,
    pub pull: String,
    pub number: Option<u64>,
}

/// What the journal says of offers since the last start, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offers {
    /// Requests with no `offer.answered` naming them yet.
    pub open: Vec<Asked>,
    pub published: Vec<WentOut>,
}

impl Offers {
    /// Takes in one event (any kind; only the offers' count).
    pub fn see(&mut self, event: &Event) {
        let request = || event.fields.get("request").and_then(Value::as_u64);
        // A type this build does not know says nothing of offers.
        let Some(kind) = event.known_kind() else { return };
        match kind {
            EventKind::OfferRequested => self.open.push(Asked {
                seq: event.seq,
                name: event.text("name").to_owned(),
                commit: event.commit.clone(),
            }),
            EventKind::OfferAnswered => {
                if let Some(seq) = request() {
                    self.open.retain(|a| a.seq != seq);
                }
            }
            // teneralctl's publishes name no request: they answer none.
            EventKind::OfferPublished => {
                if let Some(request) = request() {
                    self.published.push(WentOut {
                        request,
                        offer: event.text("offer").to_owned(),
                        branch: event.text("branch").to_owned(),
                        pull: event.text("pull").to_owned(),
                        number: event.fields.get("number").and_then(Value::as_u64),
                    });
                }
            }
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
            | EventKind::Note
            | EventKind::Log
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
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }
}

/// The answer the start owes one open request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owed {
    /// It went out before the kill: answer `published` from its event.
    Published(Asked, WentOut),
    /// Nothing says how far it got: answer that the kernel stopped.
    Stopped(Asked),
}

impl Owed {
    pub fn asked(&self) -> &Asked {
        match self {
            Owed::Published(a, _) | Owed::Stopped(a) => a,
        }
    }
}

/// Every open request's answer, oldest request first.
pub fn unanswered(offers: &Offers) -> Vec<Owed> {
    offers
        .open
        .iter()
        .map(|asked| {
            let went = offers.published.iter().rev().find(|p| p.request == asked.seq);
            match went {
                Some(went) => Owed::Published(asked.clone(), went.clone()),
                None => Owed::Stopped(asked.clone()),
            }
        })
        .collect()
}

/// The `offer.answered` fields for `owed`, as the running kernel would have
/// written them (`super::answer`); `report` is the kept report's path when
/// the start found one.
pub fn fields(owed: &Owed, report: Option<String>) -> Value {
    let asked = owed.asked();
    let mut fields = match owed {
        Owed::Stopped(_) => json!({"request": asked.seq, "state": "refused", "message": STOPPED}),
        Owed::Published(_, went) => json!({
            "request": asked.seq,
            "state": "published",
            "message": format!("published as {}: {}", went.branch, went.pull),
            "branch": format!("offer/{}", asked.name),
            "offer": went.offer,
            "pull": went.pull,
        }),
    };
    if let Some(report) = report {
        fields["report"] = json!(report);
    }
    fields
}

/// Where the report of a published offer is kept, when it is.
pub fn kept_report(home: &Path, owed: &Owed) -> Option<String> {
    let Owed::Published(_, went) = owed else { return None };
    let path = home.join(teneral_offer::OFFERS_DIR).join(format!("{}.json", went.offer));
    path.is_file().then(|| path.display().to_string())
}

/// Journals the start's answer to `owed` under the generation that asked;
/// what it did, for the start's notice (`None`: the request names no
/// generation, so nothing was journaled).
pub fn journal_answer(
    home: &Path,
    journal: &crate::events::SharedJournal,
    owed: &Owed,
) -> Option<String> {
    let asked = owed.asked();
    let Ok(by) = Commit::parse(&asked.commit) else {
        teneral_core::log::info(format!(
            "an offer request journaled by {:?}, not a commit",
            asked.commit
        ));
        return None;
    };
    let fields = fields(owed, kept_report(home, owed));
    crate::events::kernel_event(journal, &by, EventKind::OfferAnswered, fields);
    teneral_core::crash::point("offer.reconciled");
    Some(match owed {
        Owed::Stopped(_) => format!(
            "answered the offer request {} (seq {}): the kernel stopped before answering",
            asked.name, asked.seq
        ),
        Owed::Published(_, went) => format!(
            "answered the offer request {} (seq {}): published as {}",
            asked.name, asked.seq, went.branch
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use teneral_core::journal::reader::parse_line;

    fn ev(v: Value) -> Event {
        parse_line(v.to_string().as_bytes()).expect("a test event is whole")
    }

    fn asked(seq: u64, name: &str) -> Event {
        ev(json!({"type": "offer.requested", "seq": seq, "commit": "G", "name": name,
                  "head": "h"}))
    }

    fn answered(seq: u64, request: u64) -> Event {
        ev(json!({"type": "offer.answered", "seq": seq, "commit": "G", "request": request,
                  "state": "waits"}))
    }

    fn published(seq: u64, request: Option<u64>) -> Event {
        let mut e = json!({"type": "offer.published", "seq": seq, "commit": "G", "offer": "S",
                           "branch": "contrib/i/x", "pull": "http://forge/pull/3", "number": 3});
        if let Some(r) = request {
            e["request"] = json!(r);
        }
        ev(e)
    }

    fn a(seq: u64, name: &str) -> Asked {
        Asked { seq, name: name.into(), commit: "G".into() }
    }

    fn went(request: u64) -> WentOut {
        WentOut {
            request,
            offer: "S".into(),
            branch: "contrib/i/x".into(),
            pull: "http://forge/pull/3".into(),
            number: Some(3),
        }
    }

    #[test]
    fn each_open_request_is_owed_one_answer() {
        type Case = (&'static str, Vec<Event>, Vec<Owed>);
        let other = ev(json!({"type": "reply", "seq": 9, "commit": "G", "text": "hi"}));
        let table: Vec<Case> = vec![
            ("nothing asked", vec![other.clone()], vec![]),
            ("answered", vec![asked(1, "x"), answered(2, 1)], vec![]),
            ("killed while working", vec![asked(1, "x")], vec![Owed::Stopped(a(1, "x"))]),
            (
                "killed after the publish",
                vec![asked(1, "x"), published(2, Some(1))],
                vec![Owed::Published(a(1, "x"), went(1))],
            ),
            (
                "published and answered",
                vec![asked(1, "x"), published(2, Some(1)), answered(3, 1)],
                vec![],
            ),
            (
                "teneralctl's publish answers no request",
                vec![asked(1, "x"), published(2, None)],
                vec![Owed::Stopped(a(1, "x"))],
            ),
            (
                "another request's publish is not this one's",
                vec![asked(1, "x"), asked(2, "y"), published(3, Some(2))],
                vec![Owed::Stopped(a(1, "x")), Owed::Published(a(2, "y"), went(2))],
            ),
            (
                "an answer names its request, not its name",
                vec![asked(1, "x"), asked(2, "x"), answered(3, 2)],
                vec![Owed::Stopped(a(1, "x"))],
            ),
            (
                "an answer without a request answers none",
                vec![asked(1, "x"), {
                    ev(json!({"type": "offer.answered", "seq": 2, "commit": "G"}))
                }],
                vec![Owed::Stopped(a(1, "x"))],
            ),
        ];
        for (name, events, want) in table {
            let mut offers = Offers::default();
            events.iter().for_each(|e| offers.see(e));
            assert_eq!(unanswered(&offers), want, "{name}");
        }
    }

    #[test]
    fn the_answers_say_what_the_running_kernel_would_have() {
        let stopped = fields(&Owed::Stopped(a(4, "x")), None);
        assert_eq!(stopped, json!({"request": 4, "state": "refused", "message": STOPPED}));
        let out = fields(&Owed::Published(a(4, "x"), went(4)), Some("/r.json".into()));
        assert_eq!(
            out,
            json!({"request": 4, "state": "published",
                   "message": "published as contrib/i/x: http://forge/pull/3",
                   "branch": "offer/x", "offer": "S", "pull": "http://forge/pull/3",
                   "report": "/r.json"})
        );
    }
}
