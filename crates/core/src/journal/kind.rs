//! The kinds of journal events: every `type` the contract names
//! (docs/contract.md, sections 3 and 6), with its wire name, who may write
//! it, and what the kernel's clients make of it.
//!
//! This is the one list of kinds. The body's rules ([`super::rules`]), the
//! scorecard's set of counted kinds, the priority of the kernel's log lines
//! and what `teneralctl talk` shows all come from it, and code that builds
//! or reads an event names its kind through [`EventKind`], never as a
//! string (`scripts/check-seams` holds that). A `type` no variant names is
//! still a journal line: [`EventKind::parse`] gives `None` for it, and each
//! reader passes over it as its own case.

use std::fmt;

use crate::log::Priority;

/// Defines [`EventKind`] from one table, a row per kind: its name, who
/// writes it, whether talk shows it, whether the scorecard counts it, and
/// the priority of the kernel's log line about it. Every property is read
/// from the row, so a new kind is one row and none can be left out.
macro_rules! kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident => $name:literal, [$($writer:ident),+],
            talk: $talk:literal, scorecard: $counted:literal, $priority:ident;
    )*) => {
        /// One kind of journal event.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventKind {
            $($(#[$doc])* $variant,)*
        }

        impl EventKind {
            /// Every kind, a body's first, in the order of the contract's tables.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The kind's `type` on the wire and in the journal.
            pub const fn name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }

            /// The kind whose name is exactly `name`; old names are not
            /// taken (what a body sends must use the current ones).
            pub fn named(name: &str) -> Option<EventKind> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }

            /// Who writes events of this kind, as the code does.
            pub const fn writers(self) -> &'static [Writer] {
                match self {
                    $(EventKind::$variant => &[$(Writer::$writer),+],)*
                }
            }

            /// Whether `teneralctl talk` shows anything for an event of this
            /// kind (in either of its forms); a kind it does not show may
            /// still tell it what the agent is doing.
            pub const fn shown_in_talk(self) -> bool {
                match self {
                    $(EventKind::$variant => $talk,)*
                }
            }

            /// Whether the scorecard counts events of this kind: only these
            /// place a generation in it and mark when it was first and last
            /// seen.
            pub const fn counted_by_scorecard(self) -> bool {
                match self {
                    $(EventKind::$variant => $counted,)*
                }
            }

            /// The journald priority of the kernel's log line about an event
            /// of this kind. A body's `log` line goes by its own level
            /// instead ([`crate::log::fields::level_priority`]).
            pub const fn priority(self) -> Priority {
                match self {
                    $(EventKind::$variant => Priority::$priority,)*
                }
            }
        }
    };
}

kinds! {
    // A generation that ended or was left and a refused mutation are
    // warnings in the kernel's log; the kernel's other events notices; what
    // a body says of its work information. The kernel takes the owner's
    // `back` while it runs, and the owner's client writes it when the
    // kernel is stopped; an offer is published by the kernel, or by
    // `teneralctl offer` for the owner.

    // What a body sends (section 3).
    GenerationReady => "generation.ready", [Body],
        talk: true, scorecard: true, Info;
    OwnerLine => "owner.line", [Body],
        talk: true, scorecard: true, Info;
    Birth => "birth", [Body],
        talk: true, scorecard: true, Info;
    Reply => "reply", [Body],
        talk: true, scorecard: true, Info;
    /// Words of a reply as the model writes them, never journaled: the
    /// kernel hands them to the owner's clients ([`crate::live`]), which
    /// show them from there, not as an event; the reply is journaled once,
    /// whole.
    ReplyDelta => "reply.delta", [Body],
        talk: false, scorecard: false, Info;
    Reasoning => "reasoning", [Body],
        talk: true, scorecard: true, Info;
    ToolCall => "tool.call", [Body],
        talk: true, scorecard: true, Info;
    ToolResult => "tool.result", [Body],
        talk: true, scorecard: true, Info;
    TurnEnded => "turn.ended", [Body],
        talk: false, scorecard: true, Info;
    TurnInterrupted => "turn.interrupted", [Body],
        talk: true, scorecard: true, Info;
    ModelRetry => "model.retry", [Body],
        talk: true, scorecard: true, Info;
    Usage => "usage", [Body],
        talk: false, scorecard: true, Info;
    Stimulus => "stimulus", [Body],
        talk: true, scorecard: true, Info;
    MutationRequested => "mutation.requested", [Body],
        talk: true, scorecard: true, Info;
    OfferRequested => "offer.requested", [Body],
        talk: false, scorecard: false, Info;
    Note => "note", [Body],
        talk: false, scorecard: true, Info;
    /// A line for the kernel's log, never journaled.
    Log => "log", [Body],
        talk: false, scorecard: false, Info;
    // What the kernel (or the owner's client) writes (sections 3 and 6).
    KernelStarted => "kernel.started", [Kernel],
        talk: true, scorecard: true, Notice;
    KernelStopped => "kernel.stopped", [Kernel],
        talk: true, scorecard: true, Notice;
    KernelNotice => "kernel.notice", [Kernel],
        talk: true, scorecard: true, Notice;
    GenerationStarted => "generation.started", [Kernel],
        talk: true, scorecard: true, Notice;
    GenerationExited => "generation.exited", [Kernel],
        talk: true, scorecard: true, Warning;
    MutationCheck => "mutation.check", [Kernel],
        talk: true, scorecard: true, Notice;
    MutationRejected => "mutation.rejected", [Kernel],
        talk: true, scorecard: true, Warning;
    MutationAccepted => "mutation.accepted", [Kernel],
        talk: true, scorecard: true, Notice;
    GenerationRolledback => "generation.rolledback", [Kernel],
        talk: true, scorecard: true, Warning;
    GenerationSentback => "generation.sentback", [Kernel, Owner],
        talk: true, scorecard: true, Notice;
    EventsDropped => "events.dropped", [Kernel],
        talk: false, scorecard: false, Notice;
    OfferAnswered => "offer.answered", [Kernel],
        talk: false, scorecard: false, Notice;
    OfferPublished => "offer.published", [Kernel, Owner],
        talk: false, scorecard: false, Notice;
    SpeciesAccepted => "species.accepted", [Kernel],
        talk: false, scorecard: false, Notice;
    EvalResult => "eval.result", [Kernel],
        talk: false, scorecard: false, Notice;
}

/// Who writes an event of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The kernel, of its own (the supervisor, the launcher).
    Kernel,
    /// A body, through the event socket; the kernel checks and stamps it.
    Body,
    /// The owner's client, `teneralctl`, while the kernel is stopped.
    Owner,
}

/// Names an older body wrote, read as the kind each became.
pub const OLD_NAMES: [(&str, EventKind); 2] = [
    ("molt.requested", EventKind::MutationRequested),
    ("molt.rejected", EventKind::MutationRejected),
];

impl EventKind {
    /// [`EventKind::named`] of a name as raw bytes (as a scan reads it).
    pub fn named_bytes(name: &[u8]) -> Option<EventKind> {
        std::str::from_utf8(name).ok().and_then(EventKind::named)
    }

    /// The kind named `name`, an old name ([`OLD_NAMES`]) read as the kind
    /// it became; `None` for a name no kind has.
    pub fn parse(name: &str) -> Option<EventKind> {
        let old = OLD_NAMES.iter().find(|(old, _)| *old == name).map(|&(_, kind)| kind);
        old.or_else(|| EventKind::named(name))
    }

    /// [`EventKind::parse`] of a name as raw bytes (as a scan reads it).
    pub fn parse_bytes(name: &[u8]) -> Option<EventKind> {
        std::str::from_utf8(name).ok().and_then(EventKind::parse)
    }

    /// Whether a body may send an event of this kind.
    pub fn body_may_send(self) -> bool {
        self.writers().contains(&Writer::Body)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_kind() {
        for &kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.name()), Some(kind), "{kind:?}");
            assert_eq!(EventKind::parse_bytes(kind.name().as_bytes()), Some(kind), "{kind:?}");
            assert_eq!(EventKind::named(kind.name()), Some(kind), "{kind:?}");
            assert_eq!(kind.to_string(), kind.name());
        }
    }

    #[test]
    fn names_are_unique_and_all_kinds_are_listed() {
        let mut names: Vec<&str> = EventKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventKind::ALL.len(), "two kinds share a name");
        let mut kinds = EventKind::ALL.to_vec();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), EventKind::ALL.len(), "a kind is listed twice");
        for (old, _) in OLD_NAMES {
            assert!(!names.contains(&old), "{old} is an old name and a kind's");
        }
    }

    #[test]
    fn old_and_unknown_names() {
        let table = [
            ("molt.requested", Some(EventKind::MutationRequested)),
            ("molt.rejected", Some(EventKind::MutationRejected)),
            ("mutation.requested", Some(EventKind::MutationRequested)),
            ("reply", Some(EventKind::Reply)),
            ("Reply", None),
            ("reply ", None),
            ("mutation", None),
            ("molt.accepted", None),
            ("", None),
            ("note.taken", None),
        ];
        for (name, want) in table {
            assert_eq!(EventKind::parse(name), want, "{name:?}");
        }
        for (old, _) in OLD_NAMES {
            assert_eq!(EventKind::named(old), None, "{old} is read, never taken from a body");
        }
    }

    /// Who writes what, as the contract's two tables say: what a body
    /// sends, and what only the kernel (or the owner's client) writes.
    #[test]
    fn a_body_sends_only_its_own_kinds() {
        let body: Vec<&str> =
            EventKind::ALL.iter().filter(|k| k.body_may_send()).map(|k| k.name()).collect();
        assert_eq!(
            body,
            [
                "generation.ready",
                "owner.line",
                "birth",
                "reply",
                "reply.delta",
                "reasoning",
                "tool.call",
                "tool.result",
                "turn.ended",
                "turn.interrupted",
                "model.retry",
                "usage",
                "stimulus",
                "mutation.requested",
                "offer.requested",
                "note",
                "log",
            ]
        );
        for &kind in EventKind::ALL {
            let writers = kind.writers();
            assert!(!writers.is_empty(), "{kind}");
            assert!(
                !(writers.contains(&Writer::Body) && writers.len() > 1),
                "{kind}: a body's kind is the body's alone"
            );
        }
    }

    /// The kinds docs/contract.md documents: the first cell of each row of
    /// its tables of events (those whose head begins `| type |`), where a
    /// cell may name several kinds, each in backquotes.
    fn documented(contract: &str) -> Vec<String> {
        let mut kinds = Vec::new();
        let mut in_table = false;
        for line in contract.lines() {
            let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
            if !line.trim_start().starts_with('|') {
                in_table = false;
            } else if cells.get(1) == Some(&"type") {
                in_table = true;
            } else if in_table && !cells.get(1).is_some_and(|c| c.starts_with("---")) {
                let first = cells.get(1).copied().unwrap_or_default();
                kinds.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
            }
        }
        kinds
    }

    #[test]
    fn the_contract_documents_every_kind_and_no_other() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/contract.md");
        let contract = std::fs::read_to_string(&path).expect("docs/contract.md is in the tree");
        let documented = documented(&contract);
        assert!(documented.len() >= EventKind::ALL.len(), "tables not found: {documented:?}");
        for &kind in EventKind::ALL {
            assert!(
                documented.iter().any(|d| d == kind.name()),
                "{kind} is not in docs/contract.md"
            );
        }
        for name in &documented {
            assert!(EventKind::named(name).is_some(), "docs/contract.md names {name:?}, no kind");
        }
    }

    #[test]
    fn contract_tables_are_read_by_their_first_cells() {
        let text = "\
intro `not.a.kind`

| type | fields | meaning |
|---|---|---|
| `a.b`, `c.d` | `x` | the `e.f` field |
| `g` | | |

| name | value |
|---|---|
| `h.i` | `j` |
";
        assert_eq!(documented(text), ["a.b", "c.d", "g"]);
    }

    /// The scorecard counts every kind of the agent's work and the
    /// kernel's verdicts, and none of the offers, drops, consents or logs.
    #[test]
    fn what_the_scorecard_counts() {
        let mut counted: Vec<&str> =
            EventKind::ALL.iter().filter(|k| k.counted_by_scorecard()).map(|k| k.name()).collect();
        counted.sort_unstable();
        let mut want = vec![
            "kernel.started",
            "kernel.stopped",
            "kernel.notice",
            "generation.started",
            "generation.exited",
            "generation.ready",
            "generation.rolledback",
            "generation.sentback",
            "owner.line",
            "birth",
            "reply",
            "reasoning",
            "tool.call",
            "tool.result",
            "turn.ended",
            "turn.interrupted",
            "model.retry",
            "usage",
            "stimulus",
            "mutation.requested",
            "mutation.check",
            "mutation.accepted",
            "mutation.rejected",
            "note",
        ];
        want.sort_unstable();
        assert_eq!(counted, want);
    }

    #[test]
    fn priorities_and_counts() {
        let table = [
            ("generation.exited", Priority::Warning, true),
            ("generation.rolledback", Priority::Warning, true),
            ("mutation.rejected", Priority::Warning, true),
            ("mutation.accepted", Priority::Notice, true),
            ("kernel.started", Priority::Notice, true),
            ("events.dropped", Priority::Notice, false),
            ("offer.published", Priority::Notice, false),
            ("reply", Priority::Info, true),
            ("log", Priority::Info, false),
            ("offer.requested", Priority::Info, false),
        ];
        for (name, priority, counted) in table {
            let kind = EventKind::parse(name).expect("a kind");
            assert_eq!(
                (kind.priority(), kind.counted_by_scorecard()),
                (priority, counted),
                "{name}"
            );
        }
    }
}
