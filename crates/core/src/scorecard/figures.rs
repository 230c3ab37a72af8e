//! The figures of one generation, as the scorecard gives them (and
//! `teneralctl generations --json` prints them).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Calls of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tool {
    pub calls: u64,
    pub failures: u64,
}

/// Requests to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Model {
    /// Answered (`usage`) and failed (`model.retry`) requests.
    pub requests: u64,
    pub retries: u64,
    /// Retries after the provider answered with an error status.
    pub provider_errors: u64,
    /// Retries after the model could not be reached at all.
    pub unreachable: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Mutations asked for and the kernel's verdicts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Mutations {
    pub requested: u64,
    pub accepted: u64,
    pub rejected: u64,
    /// Rejections that were no verdict (`undecided`): asked again.
    pub undecided: u64,
    /// Rejections by the check that refused.
    pub refused_by: BTreeMap<String, u64>,
}

/// What the body said of itself in notes of one kind: not checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Claim {
    pub notes: u64,
    /// The last note's `data` (cut to a string when long).
    pub last: Value,
}

/// Turn latency, owner line or stimulus to reply, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    pub samples: u64,
    pub median_ms: Option<i64>,
    pub p90_ms: Option<i64>,
    /// False past [`super::latency::EXACT`] samples: then within 1 %.
    pub exact: bool,
}

/// The figures of one generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub commit: String,
    pub ready_at: Option<String>,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    /// Runs of its body (`generation.started`).
    pub runs: u64,
    /// Milliseconds its runs lasted, together.
    pub lived_ms: i64,
    /// It runs still: a run with no `generation.exited` ends the journal.
    pub running: bool,
    pub current: bool,
    pub replies: u64,
    pub turns: u64,
    /// Turns that got a reply.
    pub answered: u64,
    pub interrupts: u64,
    pub latency: Latency,
    pub tool_calls: u64,
    pub tool_failures: u64,
    pub tools: BTreeMap<String, Tool>,
    pub model: Model,
    pub crashes: u64,
    pub rollbacks: u64,
    pub sentback: u64,
    pub mutations: Mutations,
    /// The body's own words about itself, by note kind: not the kernel's.
    pub body_notes: BTreeMap<String, Claim>,
}

impl Figures {
    /// Failed tool calls per tool call, 0 without calls.
    pub fn failure_rate(&self) -> f64 {
        if self.tool_calls == 0 {
            return 0.0;
        }
        self.tool_failures as f64 / self.tool_calls as f64
    }
}
