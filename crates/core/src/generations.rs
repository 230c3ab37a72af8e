//! The generations an individual has lived in, read from its journal, and
//! which of them `teneralctl back` may go to. Pure: events in, answers out.
//!
//! Events are taken one at a time ([`Lineage::take`]), so the journal is
//! streamed and only one entry per generation is kept. What counts:
//!
//! - `kernel.started`: the generation the kernel runs (the first ever is the
//!   birth generation);
//! - `mutation.accepted` {`from`, `to`}: a promotion;
//! - `generation.rolledback` {`from`, `to`}: the kernel went back;
//! - `generation.sentback` {`from`, `to`}: the owner sent it back;
//! - `generation.ready`, `reply`: stamped with the commit that wrote them.
//!
//! "Before" follows promotion order as a stack: a promotion pushes; a
//! rollback or a send-back goes to its target, and everything above it is
//! popped (a target not on the stack is pushed). The current generation is
//! the top. A generation may be gone back to only if it once reported ready
//! and git still has its commit.

use std::collections::HashMap;

use crate::journal::{Event, EventKind};

/// Characters of a commit shown, and the fewest a name of one may have.
pub const SHORT: usize = crate::commit::SHORT_LEN;

/// One generation, as the journal knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// Its commit, 40 hex digits.
    pub commit: String,
    /// When it first reported ready (the event's `ts`), if it ever did.
    pub ready_at: Option<String>,
    /// How many `reply` events it wrote.
    pub replies: u64,
}

impl Generation {
    /// The short form of its commit.
    pub fn short(&self) -> &str {
        crate::commit::short(&self.commit)
    }
}

/// Why `back` goes nowhere. Each says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("nothing to go back to: the journal records no generation yet")]
    NoGeneration,
    #[error(
        "nothing to go back to: no generation was promoted before {current}; \
         `teneralctl back --list` shows every generation, and `teneralctl back <commit>` goes \
         to any that reported ready"
    )]
    NothingBefore { current: String },
    #[error(
        "{given:?} is not a commit: give {SHORT} or more of its hex digits \
         (`teneralctl back --list` shows them)"
    )]
    BadName { given: String },
    #[error(
        "no generation of this individual has a commit starting with {given}; \
         `teneralctl back --list` shows them"
    )]
    Unknown { given: String },
    #[error(
        "{given} names more than one generation ({matches}); give more of the commit's digits"
    )]
    Ambiguous { given: String, matches: String },
    #[error("{commit} is the current generation already; nothing to do")]
    IsCurrent { commit: String },
    #[error(
        "{commit} never reported ready, so it may not be gone back to; pick one that did \
         (`teneralctl back --list`)"
    )]
    NeverReady { commit: String },
    #[error(
        "git no longer has commit {commit}, so it cannot be gone back to; pick another \
         (`teneralctl back --list`)"
    )]
    Gone { commit: String },
}

/// The generations of one journal, oldest first, with the promotion stack.
#[derive(Debug, Default, Clone)]
pub struct Lineage {
    generations: Vec<Generation>,
    index: HashMap<String, usize>,
    /// Indexes into `generations`; the last is the current generation.
    stack: Vec<usize>,
}

/// Whether an event of `kind` places a generation in the lineage's order
/// or marks it ready ([`Lineage::take`]); of the others, a reply is only
/// counted and the rest leave the lineage as it is.
pub fn moves_lineage(kind: EventKind) -> bool {
    match kind {
        EventKind::KernelStarted
        | EventKind::MutationAccepted
        | EventKind::GenerationRolledback
        | EventKind::GenerationSentback
        | EventKind::GenerationReady => true,
        EventKind::Reply
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
        | EventKind::KernelStopped
        | EventKind::KernelNotice
        | EventKind::GenerationStarted
        | EventKind::GenerationExited
        | EventKind::MutationCheck
        | EventKind::MutationRejected
        | EventKind::EventsDropped
        | EventKind::OfferAnswered
        | EventKind::OfferPublished
        | EventKind::SpeciesAccepted
        | EventKind::EvalResult => false,
    }
}

impl Lineage {
    pub fn new() -> Lineage {
        Lineage::default()
    }

    /// Every generation seen, oldest first.
    pub fn generations(&self) -> &[Generation] {
        &self.generations
    }

    /// The generation running (or that will run at the next start).
    pub fn current(&self) -> Option<&Generation> {
        self.stack.last().map(|&i| &self.generations[i])
    }

    /// The generation below the current one in promotion order.
    pub fn before(&self) -> Option<&Generation> {
        let below = self.stack.len().checked_sub(2)?;
        Some(&self.generations[self.stack[below]])
    }

    /// Takes in one journaled event, oldest first.
    pub fn take(&mut self, event: &Event) {
        let Some(kind) = event.known_kind() else { return };
        match kind {
            EventKind::KernelStarted => self.go_to(&event.commit),
            EventKind::MutationAccepted => {
                let to = self.known(event.text("to"));
                if let Some(to) = to.filter(|&to| self.stack.last() != Some(&to)) {
                    self.stack.push(to);
                }
            }
            EventKind::GenerationRolledback | EventKind::GenerationSentback => {
                self.go_to(event.text("to"))
            }
            EventKind::GenerationReady => {
                if self.stack.is_empty() {
                    self.go_to(&event.commit);
                }
                if let Some(i) = self.known(&event.commit) {
                    let ready = &mut self.generations[i].ready_at;
                    if ready.is_none() {
                        *ready = Some(event.ts.clone());
                    }
                }
            }
            EventKind::Reply => {
                if let Some(&i) = self.index.get(&event.commit) {
                    self.generations[i].replies += 1;
                }
            }
            EventKind::OwnerLine
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
            | EventKind::KernelStopped
            | EventKind::KernelNotice
            | EventKind::GenerationStarted
            | EventKind::GenerationExited
            | EventKind::MutationCheck
            | EventKind::MutationRejected
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }

    /// Makes `commit` the current generation: everything above it on the
    /// stack goes; when it is not on the stack it is pushed.
    fn go_to(&mut self, commit: &str) {
        let Some(i) = self.known(commit) else { return };
        match self.stack.iter().rposition(|&s| s == i) {
            Some(at) => self.stack.truncate(at + 1),
            None => self.stack.push(i),
        }
    }

    /// The index of `commit`, added to the generations when new.
    fn known(&mut self, commit: &str) -> Option<usize> {
        if commit.is_empty() {
            return None;
        }
        if let Some(&i) = self.index.get(commit) {
            return Some(i);
        }
        let i = self.generations.len();
        self.generations.push(Generation { commit: commit.to_owned(), ready_at: None, replies: 0 });
        self.index.insert(commit.to_owned(), i);
        Some(i)
    }

    /// The generation `back` goes to: the one before the current one, or
    /// the one whose commit starts with `name`. `in_git` says whether git
    /// still has a commit.
    pub fn choose(
        &self,
        name: Option<&str>,
        in_git: impl Fn(&str) -> bool,
    ) -> Result<&Generation, Refusal> {
        let current = self.current().ok_or(Refusal::NoGeneration)?;
        let target = match name {
            None => self
                .before()
                .ok_or_else(|| Refusal::NothingBefore { current: current.short().to_owned() })?,
            Some(name) => self.named(name)?,
        };
        if target.commit == current.commit {
            return Err(Refusal::IsCurrent { commit: target.short().to_owned() });
        }
        if target.ready_at.is_none() {
            return Err(Refusal::NeverReady { commit: target.short().to_owned() });
        }
        if !in_git(&target.commit) {
            return Err(Refusal::Gone { commit: target.short().to_owned() });
        }
        Ok(target)
    }

    /// The one generation whose commit starts with `name`.
    fn named(&self, name: &str) -> Result<&Generation, Refusal> {
        let given = name.trim().to_ascii_lowercase();
        let hex = given.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || given.len() < SHORT || given.len() > 40 {
            return Err(Refusal::BadName { given: name.to_owned() });
        }
        let matches: Vec<&Generation> =
            self.generations.iter().filter(|g| g.commit.starts_with(&given)).collect();
        match matches.as_slice() {
            [] => Err(Refusal::Unknown { given }),
            [one] => Ok(one),
            many => {
                let names: Vec<&str> = many.iter().map(|g| g.commit.as_str()).collect();
                Err(Refusal::Ambiguous { given, matches: names.join(", ") })
            }
        }
    }
}

#[cfg(test)]
mod tests;
