//! The side-by-side: what one run of a body on one stimulus did, read from
//! its throwaway journal; the first difference between two runs; the
//! figures of each generation; the table and the JSON. Pure.

use serde_json::{json, Value};

use teneral_core::journal::{Event, EventKind};

/// One thing a body did in its turn, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A tool call and whether its result was an error (`None`: no result).
    Tool { name: String, failed: Option<bool> },
    /// Words shown to the owner (the model's or the body's own).
    Reply(String),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The turn ended (`turn.ended`).
    TurnEnded,
    Interrupted,
    /// The body ended, as said, before its turn did.
    BodyEnded(String),
    /// The limit of this many seconds ran out.
    TimeUp(u64),
    /// The run could not be made: why.
    NotRun(String),
}

/// One generation's run on one stimulus.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub actions: Vec<Action>,
    /// From the stimulus taken in to the first reply, in seconds.
    pub reply_seconds: Option<f64>,
    /// The whole run, in seconds: setting up its throwaway individual and
    /// stand-in, the body's start, its turn, stopping both, cleaning up.
    pub run_seconds: f64,
    pub ending: Ending,
}

impl Run {
    pub fn replied(&self) -> bool {
        self.actions.iter().any(|a| matches!(a, Action::Reply(_)))
    }

    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.actions.iter().filter_map(|a| match a {
            Action::Tool { name, .. } => Some(name.as_str()),
            Action::Reply(_) => None,
        })
    }

    /// The names of the tool calls whose result was an error, in order.
    pub fn failed(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::Tool { name, failed: Some(true) } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// What a run did from its throwaway journal: the events after the
/// stimulus's (`after` is its `seq`), tool results matched to their calls
/// by id.
pub fn actions_of(events: &[Event], after: u64) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut ids: Vec<(String, usize)> = Vec::new();
    for event in events.iter().filter(|e| e.seq > after) {
        // A type this build does not know is passed over.
        let Some(kind) = event.known_kind() else { continue };
        match kind {
            EventKind::Reply => actions.push(Action::Reply(event.text("text").to_owned())),
            EventKind::ToolCall => {
                ids.push((event.text("id").to_owned(), actions.len()));
                actions.push(Action::Tool { name: event.text("name").to_owned(), failed: None });
            }
            EventKind::ToolResult => {
                let failed = event.fields.get("error").and_then(Value::as_bool) == Some(true);
                let at = ids.iter().rev().find(|(id, _)| id == event.text("id")).map(|(_, at)| *at);
                if let Some(Action::Tool { failed: slot, .. }) = at.and_then(|i| actions.get_mut(i))
                {
                    *slot = Some(failed);
                }
            }
            // Not an action of the run.
            EventKind::GenerationReady
            | EventKind::OwnerLine
            | EventKind::Birth
            | EventKind::Reasoning
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
            | EventKind::EvalResult => {}
        }
    }
    actions
}

/// The words of an action or an ending; what the body wrote (words, tool
/// names, exit) is cut to one line without controls.
fn said(action: Option<&Action>, ending: &Ending) -> String {
    match action {
        Some(Action::Tool { name, failed }) => {
            let how = match failed {
                Some(true) => " (failed)",
                Some(false) => "",
                None => " (no result)",
            };
            format!("called {}{how}", cut(name, 40))
        }
        Some(Action::Reply(text)) => format!("replied {:?}", cut(text, 40)),
        None => match ending {
            Ending::TurnEnded => "ended its turn".into(),
            Ending::Interrupted => "was interrupted".into(),
            Ending::BodyEnded(exit) => format!("ended ({exit})"),
            Ending::TimeUp(secs) => format!("did nothing more within {secs} s"),
            Ending::NotRun(why) => format!("did not run ({})", cut(why, 60)),
        },
    }
}

/// The first place where the two runs did something else, in words, or
/// `None` when they did the same (times aside).
pub fn first_difference(a: &Run, b: &Run) -> Option<String> {
    let steps = a.actions.len().max(b.actions.len());
    for i in 0..=steps {
        let (x, y) = (a.actions.get(i), b.actions.get(i));
        if i == steps && a.ending == b.ending {
            return None;
        }
        if x != y || i == steps {
            return Some(format!(
                "step {}: A {}, B {}",
                i + 1,
                said(x, &a.ending),
                said(y, &b.ending)
            ));
        }
    }
    None
}

/// One generation's figures over all the stimuli.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub replied: usize,
    pub tool_calls: usize,
    pub failed: usize,
    /// The median time to reply over the runs that replied.
    pub median_reply_seconds: Option<f64>,
    /// The mean time of a whole run (start to end) per stimulus.
    pub mean_run_seconds: Option<f64>,
}

pub fn figures(runs: &[&Run]) -> Figures {
    let mut times: Vec<f64> = runs.iter().filter_map(|r| r.reply_seconds).collect();
    times.sort_by(f64::total_cmp);
    let median = match times.len() {
        0 => None,
        n if n % 2 == 1 => Some(times[n / 2]),
        n => Some((times[n / 2 - 1] + times[n / 2]) / 2.0),
    };
    let total: f64 = runs.iter().map(|r| r.run_seconds).sum();
    Figures {
        replied: runs.iter().filter(|r| r.replied()).count(),
        tool_calls: runs.iter().map(|r| r.tools().count()).sum(),
        failed: runs.iter().map(|r| r.failed().len()).sum(),
        median_reply_seconds: median,
        mean_run_seconds: (!runs.is_empty()).then(|| total / runs.len() as f64),
    }
}

/// One stimulus, run through both generations.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub stimulus: String,
    /// Its `seq` in the individual's journal.
    pub seq: u64,
    /// Whether the stand-in was scripted from the journal (else its default).
    pub scripted: bool,
    pub a: Run,
    pub b: Run,
}

/// The whole replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub from: String,
    pub to: String,
    pub rows: Vec<Row>,
    /// One smoke run of A, start to answer, when it was asked for.
    pub smoke_seconds: Option<f64>,
}

fn cut(text: &str, max: usize) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match one_line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

fn seconds(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{s:.2} s"))
}

fn side(run: &Run) -> String {
    let failed = run.failed();
    let failed = if failed.is_empty() { "-".to_owned() } else { failed.join(",") };
    format!(
        "{:<5} {:>5} {:<12} {:>8}",
        if run.replied() { "yes" } else { "no" },
        run.tools().count(),
        cut(&failed, 12),
        seconds(run.reply_seconds)
    )
}

/// The table for people: a row per stimulus, the first difference under
/// it, the figures of each generation last.
pub fn text(report: &Report) -> Vec<String> {
    let short = teneral_core::commit::short;
    let mut out = vec![
        format!(
            "replay of {} stimuli: A = {}, B = {} (the stand-in model; nothing of the individual changed)",
            report.rows.len(),
            short(&report.from),
            short(&report.to)
        ),
        format!(
            "{:>3}  {:<24} | {:<5} {:>5} {:<12} {:>8} | {:<5} {:>5} {:<12} {:>8}",
            // not an event kind: "stimulus" is a column's head
            "#", "stimulus", "A rep", "tools", "failed", "time", "B rep", "tools", "failed", "time"
        ),
    ];
    for (i, row) in report.rows.iter().enumerate() {
        out.push(format!(
            "{:>3}  {:<24} | {} | {}",
            i + 1,
            cut(&format!("{:?}", row.stimulus), 24),
            side(&row.a),
            side(&row.b)
        ));
        let difference = first_difference(&row.a, &row.b).unwrap_or_else(|| "the same".into());
        out.push(format!("     {difference}"));
    }
    let a: Vec<&Run> = report.rows.iter().map(|r| &r.a).collect();
    let b: Vec<&Run> = report.rows.iter().map(|r| &r.b).collect();
    for (name, f) in [("A", figures(&a)), ("B", figures(&b))] {
        out.push(format!(
            "{name}: replied {}/{}, {} tool calls, {} failed, median time to reply {}, {} a stimulus",
            f.replied,
            report.rows.len(),
            f.tool_calls,
            f.failed,
            seconds(f.median_reply_seconds),
            seconds(f.mean_run_seconds)
        ));
    }
    if let Some(smoke) = report.smoke_seconds {
        out.push(format!("one smoke run of A, as the gate makes it: {}", seconds(Some(smoke))));
    }
    out.push("time: from the stimulus taken in to the first reply".into());
    out
}

fn ending_json(ending: &Ending) -> Value {
    match ending {
        Ending::TurnEnded => json!(EventKind::TurnEnded.name()),
        Ending::Interrupted => json!(EventKind::TurnInterrupted.name()),
        Ending::BodyEnded(exit) => json!({"body_ended": exit}),
        Ending::TimeUp(secs) => json!({"time_up_seconds": secs}),
        Ending::NotRun(why) => json!({"not_run": why}),
    }
}

fn run_json(run: &Run) -> Value {
    let actions: Vec<Value> = run
        .actions
        .iter()
        .map(|a| match a {
            Action::Tool { name, failed } => json!({"tool": name, "failed": failed}),
            Action::Reply(text) => json!({"reply": text}), // not an event kind: the report's key
        })
        .collect();
    json!({
        "replied": run.replied(),
        "tool_calls": run.tools().collect::<Vec<_>>(),
        "failed": run.failed(),
        "reply_seconds": run.reply_seconds,
        "run_seconds": run.run_seconds,
        "ending": ending_json(&run.ending),
        "actions": actions,
    })
}

fn figures_json(f: &Figures) -> Value {
    json!({
        "replied": f.replied,
        "tool_calls": f.tool_calls,
        "failed": f.failed,
        "median_reply_seconds": f.median_reply_seconds,
        "mean_run_seconds": f.mean_run_seconds,
    })
}

/// The same as one JSON object for scripts.
pub fn to_json(report: &Report) -> Value {
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|row| {
            json!({
                "seq": row.seq,
                "stimulus": row.stimulus, // not an event kind: the report's key
                "scripted": row.scripted,
                "a": run_json(&row.a),
                "b": run_json(&row.b),
                "first_difference": first_difference(&row.a, &row.b),
            })
        })
        .collect();
    let a: Vec<&Run> = report.rows.iter().map(|r| &r.a).collect();
    let b: Vec<&Run> = report.rows.iter().map(|r| &r.b).collect();
    json!({
        "from": report.from,
        "to": report.to,
        "rows": rows,
        "figures": {"a": figures_json(&figures(&a)), "b": figures_json(&figures(&b))},
        "smoke_seconds": report.smoke_seconds,
    })
}

#[cfg(test)]
mod tests;
