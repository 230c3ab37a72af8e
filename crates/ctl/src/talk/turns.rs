//! The client's decisions, as pure functions over events: whether the agent
//! is at rest, which recent events make up "the last few exchanges", when a
//! piped line has been answered, and what a typed line means.
//!
//! Invariants: only the event's type (and, for owner lines, the file name)
//! decides; types the client does not know never change a decision.

use crate::journal::{Event, EventKind};

/// What the agent is doing, as far as the journal tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// No turn in progress: an interrupt now would stop nothing.
    Resting,
    /// In the middle of a turn.
    Busy,
}

/// How an event of kind `kind` leaves the agent, or `None` when it says
/// nothing about it (a type the client does not know, `None`, never does).
pub fn activity_after(kind: Option<EventKind>) -> Option<Activity> {
    match kind? {
        EventKind::TurnEnded
        | EventKind::TurnInterrupted
        | EventKind::GenerationStarted
        | EventKind::GenerationReady
        | EventKind::GenerationExited
        | EventKind::GenerationRolledback
        | EventKind::KernelStarted
        | EventKind::KernelStopped => Some(Activity::Resting),
        EventKind::OwnerLine
        | EventKind::Stimulus
        | EventKind::Birth
        | EventKind::Reply
        | EventKind::Reasoning
        | EventKind::ToolCall
        | EventKind::ToolResult
        | EventKind::Usage => Some(Activity::Busy),
        EventKind::ModelRetry
        | EventKind::MutationRequested
        | EventKind::OfferRequested
        | EventKind::Note
        | EventKind::Log
        | EventKind::ReplyDelta
        | EventKind::KernelNotice
        | EventKind::MutationCheck
        | EventKind::MutationRejected
        | EventKind::MutationAccepted
        | EventKind::GenerationSentback
        | EventKind::EventsDropped
        | EventKind::OfferAnswered
        | EventKind::OfferPublished
        | EventKind::SpeciesAccepted
        | EventKind::EvalResult => None,
    }
}

/// Whether an event of kind `kind` begins an exchange (something woke the agent).
fn starts_exchange(kind: Option<EventKind>) -> bool {
    match kind {
        Some(EventKind::OwnerLine | EventKind::Stimulus | EventKind::Birth) => true,
        Some(
            EventKind::GenerationReady
            | EventKind::Reply
            | EventKind::Reasoning
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::ModelRetry
            | EventKind::Usage
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
            | EventKind::MutationRejected
            | EventKind::MutationAccepted
            | EventKind::GenerationRolledback
            | EventKind::GenerationSentback
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult,
        )
        | None => false,
    }
}

/// Whether a look back may pass over lines of kind `kind` without parsing
/// them: talk shows nothing for it ([`EventKind::shown_in_talk`]) and it
/// says nothing of what the agent does (an agent's notes can fill
/// megabytes at the end of the journal).
pub fn passed_over(kind: EventKind) -> bool {
    !kind.shown_in_talk() && activity_after(Some(kind)).is_none() && !starts_exchange(Some(kind))
}

/// Reading the journal backwards: gathers what to print for the last few
/// exchanges and learns what the agent is doing, and says when to stop.
#[derive(Debug)]
pub struct Recent<T = String> {
    exchanges_left: usize,
    max_entries: usize,
    /// Printable entries, newest first.
    entries: Vec<T>,
    activity: Option<Activity>,
}

impl<T> Recent<T> {
    /// Gathers at most `exchanges` exchanges, and at most `max_entries`
    /// printed entries in all.
    pub fn new(exchanges: usize, max_entries: usize) -> Self {
        Self { exchanges_left: exchanges, max_entries, entries: Vec::new(), activity: None }
    }

    /// Takes the next event towards the start, with what would be printed
    /// for it. Returns false once nothing further back is needed.
    pub fn take(&mut self, event: &Event, printed: Option<T>) -> bool {
        if self.activity.is_none() {
            self.activity = activity_after(event.known_kind());
        }
        if self.exchanges_left > 0 && self.entries.len() < self.max_entries {
            if let Some(text) = printed {
                self.entries.push(text);
            }
            if starts_exchange(event.known_kind()) {
                self.exchanges_left -= 1;
            }
        }
        self.wants_more()
    }

    /// Whether anything further back is still needed.
    pub fn wants_more(&self) -> bool {
        self.activity.is_none()
            || (self.exchanges_left > 0 && self.entries.len() < self.max_entries)
    }

    /// What the agent is doing; at rest when the journal did not say.
    pub fn activity(&self) -> Activity {
        self.activity.unwrap_or(Activity::Resting)
    }

    /// The entries to print, oldest first.
    pub fn into_entries(mut self) -> Vec<T> {
        self.entries.reverse();
        self.entries
    }
}

/// What a piped line waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The owner line in `file`: first to be journaled (`taken`), then for
    /// the turn after it to end.
    Line { file: String, taken: bool },
    /// The agent to come to rest, after an interrupt.
    Rest,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The turn ended with `turn.ended`.
    Ended,
    /// The turn ended with `turn.interrupted`.
    Interrupted,
    /// The generation or the kernel stopped before the turn ended.
    Gone,
}

impl Waiting {
    /// Advances on one event; `Some` when the wait is over.
    pub fn on_event(&mut self, event: &Event) -> Option<Outcome> {
        if let Waiting::Line { file, taken: taken @ false } = self {
            if event.is(EventKind::OwnerLine) && event.text("file") == file.as_str() {
                *taken = true;
            }
            return None;
        }
        match event.known_kind() {
            Some(EventKind::TurnEnded) => Some(Outcome::Ended),
            Some(EventKind::TurnInterrupted) => Some(Outcome::Interrupted),
            Some(EventKind::GenerationExited | EventKind::KernelStopped) => Some(Outcome::Gone),
            // Neither the end of a turn nor of the run.
            Some(
                EventKind::GenerationReady
                | EventKind::OwnerLine
                | EventKind::Birth
                | EventKind::Reply
                | EventKind::Reasoning
                | EventKind::ToolCall
                | EventKind::ToolResult
                | EventKind::ModelRetry
                | EventKind::Usage
                | EventKind::Stimulus
                | EventKind::MutationRequested
                | EventKind::OfferRequested
                | EventKind::Note
                | EventKind::Log
                | EventKind::ReplyDelta
                | EventKind::KernelStarted
                | EventKind::KernelNotice
                | EventKind::GenerationStarted
                | EventKind::MutationCheck
                | EventKind::MutationRejected
                | EventKind::MutationAccepted
                | EventKind::GenerationRolledback
                | EventKind::GenerationSentback
                | EventKind::EventsDropped
                | EventKind::OfferAnswered
                | EventKind::OfferPublished
                | EventKind::SpeciesAccepted
                | EventKind::EvalResult,
            )
            | None => None,
        }
    }
}

/// What a line typed at a terminal means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// Nothing to do.
    Empty,
    Help,
    Quit,
    Stop,
    /// `/accept [commit]`: the owner's consent to a species commit.
    Accept(Option<String>),
    /// `/image <path>`: an image for the next line.
    Image(String),
    /// `/history`: the earlier conversation printed again.
    History,
    /// `/offers`: what waits for the owner's approval.
    Offers,
    /// `/approve <commit>`: the owner's approval of one offered commit.
    Approve(String),
    /// A command of the full client that the plain one does not have yet.
    NotYet(String),
    /// A slash and a lower-case word that is no command: not sent.
    Unknown(String),
    /// Text for the agent.
    Send(String),
}

/// The commands of the plain client, with what each does, for `/help`.
pub const COMMANDS: &[(&str, &str)] = &[
    ("/stop", "interrupt the turn in progress (does nothing while the agent rests)"),
    ("/accept [commit]", "accept the species commit the agent asked about, or the one named"),
    ("/image <path>", "attach a PNG, JPEG, GIF or WebP to your next line (at most 4)"),
    ("/history", "print the earlier conversation again (the last 40 exchanges)"),
    ("/offers", "what the agent offers to the species, and what waits for your approval"),
    ("/approve <commit>", "approve one checked offer commit for publishing"),
    ("/help", "list the commands"),
    ("/quit", "leave; the agent goes on (Ctrl-D does the same)"),
    ("//...", "send a line that begins with a slash, with one slash"),
];

/// Commands of the full client that are not in this version.
const LATER: &[&str] = &["/tools", "/generations", "/evals"];

/// Classifies a line typed at a terminal. A command is a slash and a word of
/// lower-case letters, then optionally a blank and anything; any other line,
/// such as a path, is text.
pub fn classify(line: &str) -> Typed {
    if line.trim().is_empty() {
        return Typed::Empty;
    }
    if let Some(rest) = line.strip_prefix("//") {
        return Typed::Send(format!("/{rest}"));
    }
    let Some(word) = line.strip_prefix('/') else {
        return Typed::Send(line.to_owned());
    };
    let (name, args) = word.split_once(' ').unwrap_or((word, ""));
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase()) {
        return Typed::Send(line.to_owned());
    }
    let command = format!("/{name}");
    match (command.as_str(), args.trim().is_empty()) {
        ("/help", true) => Typed::Help,
        ("/quit", true) => Typed::Quit,
        ("/stop", true) => Typed::Stop,
        ("/accept", _) => {
            Typed::Accept(Some(args.trim()).filter(|a| !a.is_empty()).map(str::to_owned))
        }
        ("/image", false) => Typed::Image(args.trim().to_owned()),
        ("/history", true) => Typed::History,
        ("/offers", true) => Typed::Offers,
        ("/approve", false) => Typed::Approve(args.trim().to_owned()),
        (c, _) if LATER.contains(&c) => Typed::NotYet(command),
        _ => Typed::Unknown(line.trim().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_line;

    fn ev(kind: &str) -> Event {
        parse_line(format!(r#"{{"type":"{kind}","file":"a.txt"}}"#).as_bytes())
            .unwrap_or_else(|| panic!("not an event: {kind}"))
    }

    fn activity_of(newest_first: &[&str]) -> Activity {
        let mut recent: Recent = Recent::new(0, 0);
        for kind in newest_first {
            if !recent.take(&ev(kind), None) {
                break;
            }
        }
        recent.activity()
    }

    #[test]
    fn at_rest_or_busy() {
        let table: &[(&[&str], Activity)] = &[
            (&[], Activity::Resting),
            (&["turn.ended", "reply", "owner.line"], Activity::Resting),
            (&["reply", "owner.line"], Activity::Busy),
            (&["tool.call", "reply"], Activity::Busy),
            (&["note", "usage", "turn.ended"], Activity::Busy),
            (&["note", "turn.ended", "reply"], Activity::Resting),
            (&["owner.line", "turn.ended"], Activity::Busy),
            (&["turn.interrupted", "tool.result"], Activity::Resting),
            (&["generation.exited", "tool.call"], Activity::Resting),
            (&["generation.ready", "generation.started"], Activity::Resting),
            (&["stimulus"], Activity::Busy),
            (&["unknown.kind", "mutation.requested", "reply"], Activity::Busy),
            (&["kernel.stopped", "reply"], Activity::Resting),
        ];
        for (events, want) in table {
            assert_eq!(activity_of(events), *want, "{events:?}");
        }
    }

    #[test]
    fn recent_keeps_the_last_exchanges() {
        // Newest first, as read from the end.
        let kinds = [
            "turn.ended",
            "reply",
            "owner.line",
            "turn.ended",
            "reply",
            "tool.call",
            "stimulus",
            "turn.ended",
            "reply",
            "owner.line",
        ];
        let mut recent = Recent::new(2, 100);
        let mut read = 0;
        for kind in kinds {
            read += 1;
            if !recent.take(&ev(kind), Some(kind.to_owned())) {
                break;
            }
        }
        assert_eq!(read, 7, "stops at the start of the second exchange");
        assert_eq!(recent.activity(), Activity::Resting);
        assert_eq!(
            recent.into_entries(),
            vec![
                "stimulus",
                "tool.call",
                "reply",
                "turn.ended",
                "owner.line",
                "reply",
                "turn.ended"
            ]
        );
    }

    #[test]
    fn recent_is_bounded_and_goes_on_only_to_learn_the_activity() {
        let mut recent: Recent = Recent::new(5, 2);
        assert!(recent.take(&ev("note"), Some("a".into())));
        assert!(!recent.take(&ev("reply"), Some("b".into())));
        assert_eq!(recent.activity(), Activity::Busy);
        assert_eq!(recent.into_entries(), vec!["b", "a"]);

        let mut nothing: Recent = Recent::new(0, 10);
        assert!(nothing.take(&ev("note"), None), "the activity is not known yet");
        assert!(!nothing.take(&ev("turn.ended"), None));
        assert!(nothing.into_entries().is_empty());
    }

    #[test]
    fn a_piped_line_is_done_after_its_turn() {
        let table: &[(&[&str], Option<Outcome>)] = &[
            (&["turn.ended"], None),
            (&["owner.line"], None),
            (&["owner.line", "reply", "turn.ended"], Some(Outcome::Ended)),
            (&["owner.line", "tool.call", "turn.interrupted"], Some(Outcome::Interrupted)),
            (&["owner.line", "generation.exited"], Some(Outcome::Gone)),
            (
                &["generation.exited", "generation.ready", "owner.line", "turn.ended"],
                Some(Outcome::Ended),
            ),
        ];
        for (kinds, want) in table {
            let mut wait = Waiting::Line { file: "a.txt".into(), taken: false };
            let got = kinds.iter().find_map(|k| wait.on_event(&ev(k)));
            assert_eq!(got, *want, "{kinds:?}");
        }
        let other = parse_line(br#"{"type":"owner.line","file":"b.txt"}"#);
        let mut wait = Waiting::Line { file: "a.txt".into(), taken: false };
        let got = other.iter().chain([ev("turn.ended")].iter()).find_map(|e| wait.on_event(e));
        assert_eq!(got, None, "another client's line does not count");

        let mut rest = Waiting::Rest;
        assert_eq!(rest.on_event(&ev("tool.result")), None);
        assert_eq!(rest.on_event(&ev("turn.interrupted")), Some(Outcome::Interrupted));
    }

    #[test]
    fn typed_lines() {
        let table = [
            ("", Typed::Empty),
            ("   ", Typed::Empty),
            ("hello", Typed::Send("hello".into())),
            ("/help", Typed::Help),
            ("/quit", Typed::Quit),
            ("/stop", Typed::Stop),
            ("/stop now", Typed::Unknown("/stop now".into())),
            ("/frobnicate", Typed::Unknown("/frobnicate".into())),
            ("/accept abc123", Typed::Accept(Some("abc123".into()))),
            ("/accept", Typed::Accept(None)),
            ("/offers", Typed::Offers),
            ("/approve abc1234", Typed::Approve("abc1234".into())),
            ("/tools", Typed::NotYet("/tools".into())),
            ("//help me", Typed::Send("/help me".into())),
            ("/home/you/notes.txt", Typed::Send("/home/you/notes.txt".into())),
            ("/ spaced", Typed::Send("/ spaced".into())),
            ("/Help", Typed::Send("/Help".into())),
            ("/h2", Typed::Send("/h2".into())),
            ("say /stop", Typed::Send("say /stop".into())),
        ];
        for (line, want) in table {
            assert_eq!(classify(line), want, "{line:?}");
        }
    }
}
