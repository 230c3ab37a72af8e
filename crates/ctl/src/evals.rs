//! `teneralctl evals`: the owner's evaluations across the lineage, from the
//! kernel's `eval.result` events: per generation, oldest first, each
//! evaluation's result, the pass count, tokens and time, where an
//! evaluation first passed and where it regressed; as a table, one JSON
//! object, or a small SVG chart of the pass rate and the tokens.
//!
//! Invariants: every figure is the kernel's (an `eval.result` is written by
//! the kernel alone, never by a body); a generation's last result of an
//! evaluation is the one shown; "regressed" compares with the nearest
//! earlier generation that was not refused.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::commit::short;
use crate::journal::{Event, EventKind, JOURNAL_PATH};

#[derive(Debug, thiserror::Error)]
pub enum EvalsError {
    #[error("cannot read the journal {path}: {source}; check that it is readable (ls -l {path})")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}; give --svg a path in a directory you may write")]
    Svg { path: PathBuf, source: io::Error },
    #[error("cannot write to stdout: {0}")]
    Out(io::Error),
}

/// What the owner asked for.
#[derive(Debug, Clone, Default)]
pub struct EvalsOptions {
    pub home: PathBuf,
    pub json: bool,
    pub svg: Option<PathBuf>,
}

/// One evaluation's last result on one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub result: String,
    pub tokens: u64,
    pub seconds: f64,
    /// The failed check's words and what was seen, when it failed.
    pub failed: Option<String>,
}

/// One generation's row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    pub commit: String,
    pub evaluations: BTreeMap<String, Shown>,
    /// `Some(true)` promoted, `Some(false)` refused, `None` neither (the
    /// first generation, or one run by hand).
    pub promoted: Option<bool>,
    pub first_passed: Vec<String>,
    pub regressed: Vec<String>,
}

impl Row {
    pub fn passed(&self) -> usize {
        self.evaluations.values().filter(|r| r.result == "passed").count()
    }
    pub fn tokens(&self) -> u64 {
        self.evaluations.values().map(|r| r.tokens).sum()
    }
    pub fn seconds(&self) -> f64 {
        self.evaluations.values().map(|r| r.seconds).sum()
    }
}

/// The lineage of evaluation results from the journal's events, oldest
/// first. Pure.
pub fn lineage(events: &[Event]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut verdicts: BTreeMap<String, bool> = BTreeMap::new();
    for event in events {
        match event.known_kind() {
            Some(EventKind::EvalResult) => {
                let commit = event.text("generation").to_owned();
                let name = event.text("evaluation").to_owned();
                if commit.is_empty() || name.is_empty() {
                    continue;
                }
                let at = match rows.iter().position(|r| r.commit == commit) {
                    Some(at) => at,
                    None => {
                        rows.push(Row { commit, ..Row::default() });
                        rows.len() - 1
                    }
                };
                let failed = match (event.fields.get("failed_check"), event.text("said")) {
                    (Some(Value::String(check)), said) => Some(format!("{check}: {said}")),
                    _ => None,
                };
                let result = Shown {
                    result: event.text("result").to_owned(),
                    tokens: event.fields.get("tokens").and_then(Value::as_u64).unwrap_or(0),
                    seconds: event.fields.get("seconds").and_then(Value::as_f64).unwrap_or(0.0),
                    failed,
                };
                rows[at].evaluations.insert(name, result);
            }
            Some(EventKind::MutationAccepted) => {
                verdicts.insert(event.text("to").to_owned(), true);
            }
            Some(EventKind::MutationRejected) => {
                verdicts.entry(event.text("candidate").to_owned()).or_insert(false);
            }
            _ => {}
        }
    }
    let mut ever: std::collections::BTreeSet<String> = Default::default();
    let mut parent: Option<usize> = None;
    for i in 0..rows.len() {
        rows[i].promoted = verdicts.get(&rows[i].commit).copied();
        let passing: Vec<String> = rows[i]
            .evaluations
            .iter()
            .filter(|(_, r)| r.result == "passed")
            .map(|(n, _)| n.clone())
            .collect();
        rows[i].first_passed = passing.iter().filter(|n| !ever.contains(*n)).cloned().collect();
        if let Some(p) = parent {
            let before = &rows[p].evaluations;
            rows[i].regressed = rows[i]
                .evaluations
                .iter()
                .filter(|(n, r)| {
                    r.result == "failed" && before.get(*n).is_some_and(|b| b.result == "passed")
                })
                .map(|(n, _)| n.clone())
                .collect();
        }
        ever.extend(passing);
        if rows[i].promoted != Some(false) {
            parent = Some(i);
        }
    }
    rows
}

/// One JSON object: `generations`, oldest first.
pub fn json(rows: &[Row]) -> Value {
    let generations: Vec<Value> = rows
        .iter()
        .map(|row| {
            let evaluations: serde_json::Map<String, Value> = row
                .evaluations
                .iter()
                .map(|(name, r)| {
                    let mut v =
                        json!({"result": r.result, "tokens": r.tokens, "seconds": r.seconds});
                    if let Some(failed) = &r.failed {
                        v["failed"] = json!(failed);
                    }
                    (name.clone(), v)
                })
                .collect();
            json!({
                "commit": row.commit,
                "promoted": row.promoted,
                "passed": row.passed(),
                "total": row.evaluations.len(),
                "tokens": row.tokens(),
                "seconds": (row.seconds() * 100.0).round() / 100.0,
                "first_passed": row.first_passed,
                "regressed": row.regressed,
                "evaluations": evaluations,
            })
        })
        .collect();
    json!({ "generations": generations })
}

/// The table for people.
pub fn table(rows: &[Row]) -> Vec<String> {
    if rows.is_empty() {
        return vec![
            "no evaluation has run yet: write evals/*.toml (docs/evals.md) and set TENERAL_EVALS=report or gate in .env"
                .into(),
        ];
    }
    let mut out = vec![format!(
        "{:<9} {:>6} {:>8} {:>8}  {:<9} notes",
        "commit", "passed", "tokens", "seconds", "verdict"
    )];
    for row in rows {
        let verdict = match row.promoted {
            Some(true) => "promoted",
            Some(false) => "refused",
            None => "-",
        };
        let mut notes = Vec::new();
        if !row.first_passed.is_empty() {
            notes.push(format!("first passed: {}", row.first_passed.join(", ")));
        }
        if !row.regressed.is_empty() {
            notes.push(format!("regressed: {}", row.regressed.join(", ")));
        }
        out.push(format!(
            "{:<9} {:>6} {:>8} {:>8.2}  {:<9} {}",
            short(&row.commit),
            format!("{}/{}", row.passed(), row.evaluations.len()),
            row.tokens(),
            row.seconds(),
            verdict,
            notes.join("; ")
        ));
        for (name, r) in &row.evaluations {
            if let Some(failed) = &r.failed {
                out.push(format!("          {name} failed: {failed}"));
            }
        }
    }
    out
}

/// One line per generation, for `/evals` in talk: the pass count, tokens,
/// time and verdict, and where an evaluation first passed or regressed.
pub fn compact(rows: &[Row]) -> Vec<String> {
    if rows.is_empty() {
        return vec![
            "no evaluation has run yet (docs/evals.md); all of it: teneralctl evals".into()
        ];
    }
    let mut out: Vec<String> = rows
        .iter()
        .map(|row| {
            let mut parts = vec![format!(
                "{}: {}/{} passed, {} tokens, {:.1} s",
                short(&row.commit),
                row.passed(),
                row.evaluations.len(),
                row.tokens(),
                row.seconds()
            )];
            match row.promoted {
                Some(true) => parts.push("promoted".into()),
                Some(false) => parts.push("refused".into()),
                None => {}
            }
            if !row.first_passed.is_empty() {
                parts.push(format!("first passed {}", row.first_passed.join(" ")));
            }
            if !row.regressed.is_empty() {
                parts.push(format!("regressed {}", row.regressed.join(" ")));
            }
            parts.join(", ")
        })
        .collect();
    out.push("the failed checks and a chart: teneralctl evals [--svg FILE]".into());
    out
}

/// The lines of [`compact`] for the individual at `home`.
pub fn compact_of(home: &Path) -> Result<Vec<String>, EvalsError> {
    Ok(compact(&lineage(&read_events(home)?)))
}

/// A small chart: the pass rate as a line and the tokens as bars, one
/// place per generation, oldest on the left.
pub fn svg(rows: &[Row]) -> String {
    let (step, left, top, height) = (40.0, 50.0, 30.0, 160.0);
    let width = left + step * rows.len().max(1) as f64 + 20.0;
    let total_height = top + height + 70.0;
    let most_tokens = rows.iter().map(Row::tokens).max().unwrap_or(0).max(1) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{total_height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    s += &format!(
        "<text x=\"{left}\" y=\"16\" font-weight=\"bold\">evaluations passed (line) and tokens (bars)</text>\n"
    );
    let base = top + height;
    s += &format!(
        "<text x=\"4\" y=\"{}\">100%</text>\n<text x=\"4\" y=\"{base}\">0</text>\n",
        top + 4.0
    );
    s += &format!(
        "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"#888\"/>\n",
        width - 20.0
    );
    let mut points = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let x = left + step * i as f64 + step / 2.0;
        let h = row.tokens() as f64 / most_tokens * height * 0.5;
        s += &format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#c9d6e8\"/>\n",
            x - step / 4.0,
            base - h,
            step / 2.0
        );
        let rate = match row.evaluations.len() {
            0 => 0.0,
            n => row.passed() as f64 / n as f64,
        };
        let y = base - rate * height;
        points.push(format!("{x:.1},{y:.1}"));
        let colour = match row.promoted {
            Some(false) => "#b5452f",
            _ => "#3b6ea5",
        };
        s += &format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>\n");
        let ty = base + 14.0;
        s += &format!(
            "<text x=\"{x:.1}\" y=\"{ty}\" transform=\"rotate(60 {x:.1} {ty})\">{}</text>\n",
            short(&row.commit)
        );
    }
    s += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#3b6ea5\" stroke-width=\"2\"/>\n",
        points.join(" ")
    );
    s += "</svg>\n";
    s
}

/// The journal's events, oldest first.
fn read_events(home: &Path) -> Result<Vec<Event>, EvalsError> {
    let path = home.join(JOURNAL_PATH);
    let failed = |source| EvalsError::Read { path: path.clone(), source };
    let file = match crate::journal::open_file(&path, crate::journal::Access::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(failed(e)),
    };
    let mut lines = crate::journal::Forwards::new(file);
    let mut events = Vec::new();
    while let Some(line) = lines.next_line().map_err(failed)? {
        if let Some(event) = crate::journal::parse_line(line) {
            if matches!(
                event.known_kind(),
                Some(
                    EventKind::EvalResult
                        | EventKind::MutationAccepted
                        | EventKind::MutationRejected
                )
            ) {
                events.push(event);
            }
        }
    }
    Ok(events)
}

/// Becomes `teneral evals` for `teneralctl evals run`; returns only when
/// that cannot be done.
pub fn run_now(home: &Path, generation: &str, json: bool) -> crate::replay::ReplayError {
    let mut args: Vec<std::ffi::OsString> = vec!["evals".into(), "--dir".into()];
    args.push(home.as_os_str().to_owned());
    args.extend(["--generation".into(), generation.into()]);
    if json {
        args.push("--json".into());
    }
    crate::replay::become_kernel(args)
}

/// Becomes `teneral evals --from-journal` for `teneralctl evals
/// from-journal`; returns only when that cannot be done.
pub fn from_journal(home: &Path, last: usize) -> crate::replay::ReplayError {
    let mut args: Vec<std::ffi::OsString> = vec!["evals".into(), "--dir".into()];
    args.push(home.as_os_str().to_owned());
    args.extend(["--from-journal".into(), last.to_string().into()]);
    crate::replay::become_kernel(args)
}

/// `teneralctl evals`.
pub fn run(options: &EvalsOptions, out: &mut impl Write) -> Result<i32, EvalsError> {
    let rows = lineage(&read_events(&options.home)?);
    if let Some(path) = &options.svg {
        std::fs::write(path, svg(&rows))
            .map_err(|source| EvalsError::Svg { path: path.clone(), source })?;
    }
    let text = match options.json {
        true => json(&rows).to_string(),
        false => table(&rows).join("\n"),
    };
    writeln!(out, "{text}").map_err(EvalsError::Out)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, fields: Value) -> Event {
        let mut line = fields;
        line["seq"] = json!(seq);
        line["ts"] = json!("2026-12-01T00:00:00.000Z");
        line["commit"] = json!("k");
        crate::journal::parse_line(line.to_string().as_bytes()).expect("a journal line")
    }

    fn result(seq: u64, generation: &str, name: &str, passed: bool, tokens: u64) -> Event {
        let mut v = json!({"type": "eval.result", "generation": generation, "evaluation": name,
            "result": if passed { "passed" } else { "failed" }, "tokens": tokens, "seconds": 1.0});
        if !passed {
            v["failed_check"] = json!("reply_contains \"x\"");
            v["said"] = json!("there was no reply");
        }
        event(seq, v)
    }

    fn lineage_of_three() -> Vec<Row> {
        let events = vec![
            result(1, "aaaa", "a", false, 10),
            result(2, "aaaa", "b", true, 10),
            result(3, "bbbb", "a", true, 10),
            result(4, "bbbb", "b", true, 8),
            event(5, json!({"type": "mutation.accepted", "from": "aaaa", "to": "bbbb"})),
            result(6, "bbbb", "a", true, 10),
            result(7, "cccc", "a", true, 10),
            result(8, "cccc", "b", false, 10),
            event(9, json!({"type": "mutation.rejected", "candidate": "cccc", "check": "evals"})),
            result(10, "dddd", "b", false, 10),
        ];
        lineage(&events)
    }

    #[test]
    fn the_lineage_says_where_each_first_passed_and_regressed() {
        let rows = lineage_of_three();
        type Seen<'a> = (&'a str, usize, Vec<&'a str>, Vec<&'a str>, Option<bool>);
        let got: Vec<Seen> = rows
            .iter()
            .map(|r| {
                let first = r.first_passed.iter().map(String::as_str).collect();
                let regressed = r.regressed.iter().map(String::as_str).collect();
                (r.commit.as_str(), r.passed(), first, regressed, r.promoted)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("aaaa", 1, vec!["b"], vec![], None),
                ("bbbb", 2, vec!["a"], vec![], Some(true)),
                ("cccc", 1, vec![], vec!["b"], Some(false)),
                // Compared with bbbb, not the refused cccc.
                ("dddd", 0, vec![], vec!["b"], None),
            ]
        );
        assert_eq!(
            rows[1].tokens(),
            18,
            "a later result of the same generation replaces the first"
        );
        let doc = json(&rows);
        assert_eq!(
            doc["generations"][2]["evaluations"]["b"]["failed"],
            "reply_contains \"x\": there was no reply"
        );
        let text = table(&rows).join("\n");
        assert!(text.contains("regressed: b") && text.contains("first passed: a"), "{text}");
        let lines = compact(&rows);
        assert_eq!(lines.len(), rows.len() + 1, "one line per generation and a pointer");
        assert_eq!(lines[0], "aaaa: 1/2 passed, 20 tokens, 2.0 s, first passed b");
        assert!(lines[1].ends_with(", promoted, first passed a"), "{}", lines[1]);
        assert!(lines[2].ends_with(", refused, regressed b"), "{}", lines[2]);
        assert!(compact(&[])[0].starts_with("no evaluation has run yet"));
    }

    /// The chart is well-formed XML: every tag closed in order, one point
    /// per generation on the line.
    #[test]
    fn the_chart_parses() {
        let svg = svg(&lineage_of_three());
        let mut open: Vec<String> = Vec::new();
        let mut rest = svg.as_str();
        while let Some(at) = rest.find('<') {
            let end = rest[at..].find('>').expect("a closed tag") + at;
            let tag = &rest[at + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop().as_deref(), Some(name), "{svg}");
            } else if !tag.ends_with('/') {
                open.push(tag.split_whitespace().next().unwrap_or_default().to_owned());
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "{open:?}");
        let points = svg.split("points=\"").nth(1).and_then(|p| p.split('"').next()).unwrap_or("");
        assert_eq!(points.split(' ').count(), 4, "{svg}");
        assert_eq!(svg.matches("<circle ").count(), 4);
        assert!(svg.contains(">cccc</text>"), "{svg}");
    }
}
