//! The scorecard: what each generation actually did, from the journal alone.
//!
//! One pass over the journal's lines, oldest first ([`Scorecard::take_line`]),
//! in memory bounded by the number of generations, never by the journal's
//! size: per generation a fixed set of counters, at most [`MAX_NAMES`]
//! tool names, note kinds and refusing checks (the rest counted under
//! [`OTHER`]), and the latency estimator of [`latency`]. Pure: lines in,
//! figures out.
//!
//! Only what the kernel stamped counts: each event's type, `ts` and `commit`
//! (the generation that sent it), and the kernel's own events. What a
//! body says of itself in a `note` is kept apart ([`Figures::body_notes`]),
//! never added to a figure. What counts as what:
//!
//! - a turn opens at `owner.line` or `stimulus` (when none is open), its
//!   latency is from there to the same generation's first `reply`, and it
//!   closes at `turn.ended`, `turn.interrupted` (an interrupt), or when the
//!   body's run ends (`generation.exited`, `generation.started`, `kernel.*`);
//! - a run is `generation.started` to `generation.exited`; how long a
//!   generation lived is the sum of its runs (a run still open is counted
//!   to the last event of the journal);
//! - a crash is `generation.exited` whose status is not `exit status 0` or
//!   `exit status 75`;
//! - model requests are `usage` events (answered) plus `model.retry` events
//!   (failed); a retry with an HTTP `status` is a provider error, one
//!   without is an unreachable model;
//! - a tool fails when its `tool.result` carries `error: true`;
//! - rollbacks and send-backs count against their `from`; mutation verdicts
//!   against the generation that asked (the event's `commit`).

mod document;
mod figures;
pub mod latency;
pub mod line;

pub use document::{document, of_individual};
pub use figures::{Claim, Figures, Latency, Model, Mutations, Tool};

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::generations::Lineage;
use crate::journal::{Event, EventKind};
use latency::Latencies;
use line::Line;

/// Distinct tool names, note kinds and refusing checks kept per generation.
/// The copy the kernel keeps for the body, read-only in its cage.
pub const SCORECARD_PATH: &str = "memory/scorecard.json";

pub const MAX_NAMES: usize = 64;
/// Where names past [`MAX_NAMES`] are counted.
pub const OTHER: &str = "(other)";
/// Tool calls awaiting their result that are remembered (by id).
const MAX_OPEN_CALLS: usize = 4096;
/// Bytes of a note's data kept as its last claim.
const MAX_CLAIM: usize = 512;

#[derive(Debug, Default)]
struct Stats {
    figures: Figures,
    latencies: Latencies,
}

#[derive(Debug)]
struct Turn {
    generation: usize,
    started: Option<i64>,
    replied: bool,
}

/// The scorecard being built; see the module's comment.
#[derive(Debug, Default)]
pub struct Scorecard {
    lineage: Lineage,
    stats: Vec<Stats>,
    index: HashMap<String, usize>,
    /// Events older than this (RFC 3339, compared as text) are not counted.
    since: Option<String>,
    turn: Option<Turn>,
    /// The run going on: its generation and start (ms).
    run: Option<(usize, Option<i64>)>,
    calls: HashMap<String, String>,
    last_ms: Option<i64>,
}

/// Milliseconds since the epoch of the journal's `ts`.
fn ms(ts: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339(ts).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// One more under `name` in a map of at most [`MAX_NAMES`] names.
fn bump<'m, T: Default>(map: &'m mut BTreeMap<String, T>, name: &str) -> &'m mut T {
    let name = if map.contains_key(name) || map.len() < MAX_NAMES - 1 { name } else { OTHER };
    map.entry(name.to_owned()).or_default()
}

impl Scorecard {
    /// A scorecard counting only events at or after `since` (RFC 3339);
    /// earlier ones still place the generations in order.
    pub fn new(since: Option<String>) -> Scorecard {
        Scorecard { since, ..Scorecard::default() }
    }

    /// Takes in one journal line, oldest first. Lines that are no whole
    /// event and types it does not know are passed over.
    pub fn take_line(&mut self, bytes: &[u8]) {
        let Some(line) = Line::parse(bytes) else { return };
        // A type this build does not know is passed over.
        let Some(kind) = line.kind() else { return };
        if crate::generations::moves_lineage(kind) {
            self.lineage.take(&lineage_event(kind, &line));
        }
        if self.since.as_deref().is_some_and(|since| line.ts.str() < since) {
            return;
        }
        self.count(kind, &line, bytes);
    }

    fn generation(&mut self, commit: &str) -> usize {
        if let Some(&i) = self.index.get(commit) {
            return i;
        }
        let i = self.stats.len();
        let mut stats = Stats::default();
        stats.figures.commit = commit.to_owned();
        self.stats.push(stats);
        self.index.insert(commit.to_owned(), i);
        i
    }

    fn count(&mut self, kind: EventKind, line: &Line<'_>, bytes: &[u8]) {
        let commit = line.commit.str();
        if commit.is_empty() || !kind.counted_by_scorecard() {
            return;
        }
        let g = self.generation(commit);
        let at = ms(line.ts.str());
        let before = self.last_ms;
        if at.is_some() {
            self.last_ms = at;
        }
        {
            let f = &mut self.stats[g].figures;
            if f.first_seen.is_none() {
                f.first_seen = Some(line.ts.str().to_owned());
            }
            f.last_seen = Some(line.ts.str().to_owned());
        }
        match kind {
            EventKind::OwnerLine | EventKind::Stimulus => {
                if self.turn.is_none() {
                    self.stats[g].figures.turns += 1;
                    self.turn = Some(Turn { generation: g, started: at, replied: false });
                }
            }
            EventKind::Reply => {
                self.stats[g].figures.replies += 1;
                let Some(turn) = self.turn.as_mut().filter(|t| t.generation == g && !t.replied)
                else {
                    return;
                };
                turn.replied = true;
                let stats = &mut self.stats[g];
                stats.figures.answered += 1;
                if let (Some(start), Some(end)) = (turn.started, at) {
                    stats.latencies.add(end - start);
                }
            }
            EventKind::TurnEnded => self.turn = None,
            EventKind::TurnInterrupted => {
                self.stats[g].figures.interrupts += 1;
                self.turn = None;
            }
            EventKind::ToolCall => {
                let name = line.name.str();
                let f = &mut self.stats[g].figures;
                f.tool_calls += 1;
                bump(&mut f.tools, name).calls += 1;
                if self.calls.len() >= MAX_OPEN_CALLS {
                    self.calls.clear();
                }
                self.calls.insert(line.id.str().to_owned(), name.to_owned());
            }
            EventKind::ToolResult => {
                let name = self.calls.remove(line.id.str());
                if line.error.is_true() {
                    let f = &mut self.stats[g].figures;
                    f.tool_failures += 1;
                    bump(&mut f.tools, name.as_deref().unwrap_or("?")).failures += 1;
                }
            }
            EventKind::Usage => {
                let m = &mut self.stats[g].figures.model;
                m.requests += 1;
                let tokens = |s: &line::Scalar<'_>| s.num().map_or(0, |n| n.max(0.0) as u64);
                m.input_tokens += tokens(&line.input_tokens);
                m.output_tokens += tokens(&line.output_tokens);
            }
            EventKind::ModelRetry => {
                let m = &mut self.stats[g].figures.model;
                m.requests += 1;
                m.retries += 1;
                if line.status.is_present() {
                    m.provider_errors += 1;
                } else {
                    m.unreachable += 1;
                }
            }
            EventKind::GenerationStarted => {
                self.end_run(before);
                self.stats[g].figures.runs += 1;
                self.run = Some((g, at));
            }
            EventKind::GenerationExited => {
                self.end_run(at.or(before));
                let status = line.status.str();
                if status != "exit status 0" && status != "exit status 75" {
                    self.stats[g].figures.crashes += 1;
                }
            }
            EventKind::KernelStarted => self.end_run(before),
            EventKind::KernelStopped => self.end_run(at.or(before)),
            EventKind::GenerationRolledback | EventKind::GenerationSentback => {
                let from = match line.from.str() {
                    "" => g,
                    from => self.generation(from),
                };
                let f = &mut self.stats[from].figures;
                if kind == EventKind::GenerationRolledback {
                    f.rollbacks += 1;
                } else {
                    f.sentback += 1;
                }
            }
            EventKind::MutationRequested => self.stats[g].figures.mutations.requested += 1,
            EventKind::MutationAccepted => {
                let from = match line.from.str() {
                    "" => g,
                    from => self.generation(from),
                };
                self.stats[from].figures.mutations.accepted += 1;
            }
            EventKind::MutationRejected => {
                let m = &mut self.stats[g].figures.mutations;
                m.rejected += 1;
                if line.undecided.is_true() {
                    m.undecided += 1;
                } else {
                    *bump(&mut m.refused_by, line.check.str()) += 1;
                }
            }
            EventKind::Note => self.note(g, line.note_kind.str(), bytes),
            // Counted only as a sign of life (first and last seen).
            EventKind::GenerationReady
            | EventKind::Birth
            | EventKind::Reasoning
            | EventKind::KernelNotice
            | EventKind::MutationCheck => {}
            // Not counted (`counted_by_scorecard`): returned above.
            EventKind::OfferRequested
            | EventKind::Log
            | EventKind::ReplyDelta
            | EventKind::EventsDropped
            | EventKind::OfferAnswered
            | EventKind::OfferPublished
            | EventKind::SpeciesAccepted
            | EventKind::EvalResult => {}
        }
    }

    /// Ends the run going on at `end` (ms); any turn ends with it.
    fn end_run(&mut self, end: Option<i64>) {
        self.turn = None;
        if let Some((g, start)) = self.run.take() {
            if let (Some(start), Some(end)) = (start, end) {
                self.stats[g].figures.lived_ms += (end - start).max(0);
            }
        }
    }

    fn note(&mut self, g: usize, kind: &str, bytes: &[u8]) {
        let data = serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|mut v| v.get_mut("data").map(Value::take))
            .unwrap_or(Value::Null);
        let text = data.to_string();
        let last = if text.len() <= MAX_CLAIM {
            data
        } else {
            let mut cut = MAX_CLAIM;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            Value::String(format!("{}...", &text[..cut]))
        };
        let claim = bump(&mut self.stats[g].figures.body_notes, kind);
        claim.notes += 1;
        claim.last = last;
    }

    /// The figures, one per generation, oldest first (in the lineage's
    /// order, then any generation only its own events name).
    pub fn finish(mut self) -> Vec<Figures> {
        let open = self.run.map(|(g, _)| g);
        if let (Some((g, Some(start))), Some(end)) = (self.run, self.last_ms) {
            self.stats[g].figures.lived_ms += (end - start).max(0);
        }
        let current = self.lineage.current().map(|g| g.commit.clone());
        let mut order: Vec<usize> = Vec::new();
        for generation in self.lineage.generations() {
            let i = match self.index.get(&generation.commit) {
                Some(&i) => i,
                None if self.since.is_some() => continue,
                None => {
                    let i = self.stats.len();
                    let mut stats = Stats::default();
                    stats.figures.commit = generation.commit.clone();
                    self.stats.push(stats);
                    i
                }
            };
            self.stats[i].figures.ready_at.clone_from(&generation.ready_at);
            order.push(i);
        }
        let mut placed = vec![false; self.stats.len()];
        order.iter().for_each(|&i| placed[i] = true);
        order.extend((0..self.index.len()).filter(|&i| !placed[i]));
        let mut stats: Vec<Option<Stats>> = self.stats.into_iter().map(Some).collect();
        order
            .into_iter()
            .filter_map(|i| {
                let Stats { mut figures, latencies } = stats[i].take()?;
                figures.running = open == Some(i);
                figures.current = current.as_deref() == Some(figures.commit.as_str());
                figures.latency = Latency {
                    samples: latencies.count(),
                    median_ms: latencies.quantile(0.5),
                    p90_ms: latencies.quantile(0.9),
                    exact: latencies.is_exact(),
                };
                Some(figures)
            })
            .collect()
    }
}

/// The scorecard of a journal read from `reader`, oldest line first, in
/// one pass; memory holds one line at a time, of at most
/// [`crate::journal::READ`] (a longer one is passed over as it is read).
pub fn read(reader: impl std::io::Read, since: Option<String>) -> std::io::Result<Vec<Figures>> {
    let mut card = Scorecard::new(since);
    let mut lines = crate::journal::Forwards::new(reader);
    while let Some(line) = lines.next_line()? {
        card.take_line(line);
    }
    Ok(card.finish())
}

/// The few fields the lineage reads, as an [`Event`].
fn lineage_event(kind: EventKind, line: &Line<'_>) -> Event {
    let mut fields = serde_json::Map::new();
    for (name, value) in [("from", &line.from), ("to", &line.to)] {
        if let line::Scalar::Str(s) = value {
            fields.insert(name.to_owned(), Value::String(s.to_string()));
        }
    }
    Event {
        kind: kind.name().to_owned(),
        seq: 0,
        ts: line.ts.str().to_owned(),
        commit: line.commit.str().to_owned(),
        fields,
    }
}

#[cfg(test)]
mod tests;
