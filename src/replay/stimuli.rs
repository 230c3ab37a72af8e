//! What a replay feeds the two generations, read from the individual's
//! journal in one pass, oldest first: the last N owner lines and inbox
//! envelopes, each with the stand-in script of what the model answered in
//! its turn at the time, and which generations the journal names. Pure:
//! events in, stimuli out; memory bounded by N (and [`MAX_STEPS`] per turn).
//!
//! A turn's script is read from what the body journaled, since model
//! requests themselves are not journaled: each `reply` not marked
//! `from: "body"` is an answer of the model's words; each `tool.call`
//! carrying `index` (its place in the model's answer) is a call the model
//! asked for, joined to the answer before it when `index` > 0 or when it
//! follows the answer's words at once (as the seed body reads its own
//! history). A `tool.call` without `index` was the body's own doing and is
//! not the model's. The turn ends at `turn.ended`, `turn.interrupted`, any
//! other stimulus (a clock's) or the body's exit (`generation.exited`).

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use teneral_core::generations::Lineage;
use teneral_core::journal::{Event, EventKind};

/// Script steps kept per turn; a turn with more answers is replayed with
/// the stand-in's default after these.
pub const MAX_STEPS: usize = 256;

/// What woke the agent at the time.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// An owner line: its text.
    Line(String),
    /// An inbox envelope, whole.
    Envelope(Map<String, Value>),
}

/// One model answer as a stand-in script step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub reply: Option<String>,
    /// `(name, input)` of each call the model asked for.
    pub calls: Vec<(String, Value)>,
}

/// A stimulus to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Stimulus {
    /// Its journal `seq`.
    pub seq: u64,
    pub kind: Kind,
    /// What the model answered in its turn, in order (empty: the stand-in's
    /// default).
    pub script: Vec<Step>,
}

impl Stimulus {
    /// Its text, as shown.
    pub fn text(&self) -> &str {
        match &self.kind {
            Kind::Line(text) => text,
            Kind::Envelope(envelope) => {
                envelope.get("text").and_then(Value::as_str).unwrap_or_default()
            }
        }
    }

    /// The script as the stand-in reads it (JSON Lines), `None` when empty.
    pub fn script_text(&self) -> Option<String> {
        if self.script.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .script
            .iter()
            .map(|step| {
                let mut line = Map::new();
                if let Some(reply) = &step.reply {
                    line.insert("reply".into(), json!(reply)); // not an event kind: the script's key
                }
                if !step.calls.is_empty() {
                    let calls: Vec<Value> = step
                        .calls
                        .iter()
                        .map(|(name, input)| json!({"name": name, "arguments": input}))
                        .collect();
                    line.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(line).to_string()
            })
            .collect();
        Some(lines.join("\n") + "\n")
    }
}

/// The pass over the journal.
#[derive(Debug, Default)]
pub struct Collector {
    last: usize,
    kept: VecDeque<Stimulus>,
    /// The turn of the newest stimulus is still open.
    open: bool,
    /// The event before was a reply of the model's words.
    after_words: bool,
    lineage: Lineage,
}

impl Collector {
    /// Keeps the last `last` stimuli.
    pub fn new(last: usize) -> Collector {
        Collector { last, ..Collector::default() }
    }

    /// Takes in one journaled event, oldest first.
    pub fn take(&mut self, event: &Event) {
        self.lineage.take(event);
        if self.last == 0 {
            return;
        }
        let known = event.known_kind();
        let kind = match known {
            Some(EventKind::OwnerLine) => Some(Kind::Line(event.text("text").to_owned())),
            Some(EventKind::Stimulus) if event.text("source") == "inbox" => {
                event.fields.get("envelope").and_then(Value::as_object).cloned().map(Kind::Envelope)
            }
            // Only what the owner or the inbox said is replayed.
            Some(
                EventKind::GenerationReady
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
        };
        if let Some(kind) = kind {
            if self.kept.len() == self.last {
                self.kept.pop_front();
            }
            self.kept.push_back(Stimulus { seq: event.seq, kind, script: Vec::new() });
            self.open = true;
            self.after_words = false;
            return;
        }
        if !self.open {
            return;
        }
        let Some(stimulus) = self.kept.back_mut() else { return };
        let words = self.after_words;
        self.after_words = false;
        // A type this build does not know is passed over.
        let Some(kind) = known else { return };
        match kind {
            EventKind::TurnEnded
            | EventKind::TurnInterrupted
            | EventKind::Stimulus
            | EventKind::GenerationExited => {
                self.open = false;
            }
            EventKind::Reply => {
                if event.text("from") != "body" && stimulus.script.len() < MAX_STEPS {
                    let reply = Some(event.text("text").to_owned());
                    stimulus.script.push(Step { reply, calls: Vec::new() });
                    self.after_words = true;
                }
            }
            EventKind::ToolCall => {
                let Some(index) = event.fields.get("index").and_then(Value::as_u64) else {
                    return;
                };
                let name = event.text("name").to_owned();
                let input = event.fields.get("input").cloned().unwrap_or_else(|| json!({}));
                let joins = index > 0 || words;
                let script = &mut stimulus.script;
                if let Some(step) = script.last_mut().filter(|_| joins) {
                    step.calls.push((name, input));
                } else if script.len() < MAX_STEPS {
                    script.push(Step { reply: None, calls: vec![(name, input)] });
                }
            }
            // Nothing of the stand-in's script.
            EventKind::GenerationReady
            | EventKind::Birth
            | EventKind::Reasoning
            | EventKind::ToolResult
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
            | EventKind::MutationCheck
            | EventKind::MutationRejected
            | EventKind::MutationAccepted
            | EventKind::GenerationRolledback
            | EventKind::GenerationSentback
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult
            // Taken above: it begins a stimulus of its own.
            | EventKind::OwnerLine => {}
        }
    }

    /// The stimuli, oldest first, and the generations, oldest first, with
    /// the current one.
    pub fn finish(self) -> (Vec<Stimulus>, Lineage) {
        (self.kept.into(), self.lineage)
    }
}

/// Why a name given for a generation names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "{0:?} names no generation: give 7 or more hex digits of a commit, its number as \
         `teneralctl generations` lists them (1 is the oldest), or `current`"
    )]
    Bad(String),
    #[error(
        "there is no generation {given}: the journal knows {count} (`teneralctl generations`)"
    )]
    NoSuchNumber { given: String, count: usize },
    #[error("the journal knows no generation yet, so `current` names none")]
    NoCurrent,
    #[error("{given} names more than one generation ({matches}); give more of its digits")]
    Ambiguous { given: String, matches: String },
}

/// What a name for a generation comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A commit the journal knows, full.
    Known(String),
    /// Hex digits no generation of the journal starts with: git may still
    /// know a commit by them.
    Prefix(String),
}

/// Resolves `given` against the journal's generations (oldest first) and
/// the current one: `current`, a number (`3` or `#3`, 1 the oldest), or 7
/// to 64 hex digits.
pub fn resolve(given: &str, commits: &[&str], current: Option<&str>) -> Result<Named, NameError> {
    let name = given.trim().to_ascii_lowercase();
    if name == "current" {
        return current.map(|c| Named::Known(c.to_owned())).ok_or(NameError::NoCurrent);
    }
    let number = name.strip_prefix('#').unwrap_or(&name);
    if !number.is_empty() && number.len() < teneral_core::commit::SHORT_LEN {
        let n: usize = number.parse().map_err(|_| NameError::Bad(given.to_owned()))?;
        let too_far = || NameError::NoSuchNumber { given: given.to_owned(), count: commits.len() };
        let index = n.checked_sub(1).ok_or_else(too_far)?;
        return commits.get(index).map(|c| Named::Known((*c).to_owned())).ok_or_else(too_far);
    }
    let hex = name.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || name.len() > 64 || name.starts_with('#') {
        return Err(NameError::Bad(given.to_owned()));
    }
    let matches: Vec<&str> = commits.iter().copied().filter(|c| c.starts_with(&name)).collect();
    match matches.as_slice() {
        [] => Ok(Named::Prefix(name)),
        [one] => Ok(Named::Known((*one).to_owned())),
        many => Err(NameError::Ambiguous {
            given: given.to_owned(),
            matches: many
                .iter()
                .map(|c| teneral_core::commit::short(c))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests;
