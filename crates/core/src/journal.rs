//! The journal, `memory/journal.jsonl`: the individual's history, append-only,
//! written by the kernel alone. See docs/contract.md, section 6.

pub mod kind;
mod open;
pub mod reader;
pub mod rules;
pub mod scan;
pub mod writer;

pub use kind::{EventKind, Writer};
pub use open::{open_file, Access};
pub use reader::{last_events, parse_line, Backwards, Event, Forwards, READ};

/// The journal's place inside an individual.
pub const JOURNAL_PATH: &str = "memory/journal.jsonl";
