//! `teneralctl generations`: what each generation the individual lived in
//! actually did, from the kernel's journal ([`crate::scorecard`]): a plain
//! table for people, one JSON object for scripts, a small chart
//! ([`crate::generations_plot`]).
//!
//! Invariants: the figures are the scorecard's alone; what a body said of
//! itself in notes is printed apart, under a heading that says so, and
//! sanitized (it is the body's text). `--since` and `--commit` only narrow.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::commit::short;
use crate::scorecard::{self, Figures};
use crate::talk::render::{cut, sanitize};
use crate::when::{duration, parse_ts, rfc3339};

#[derive(Debug, thiserror::Error)]
pub enum GenerationsError {
    #[error("--since takes a time in UTC like 2026-11-30 or 2026-11-30T10:00:00Z, not {0:?}")]
    BadSince(String),
    #[error("--commit takes 4 to 40 hex digits of a generation's commit, not {0:?}")]
    BadCommit(String),
    #[error("cannot read the journal {path}: {source}; check that it is readable (ls -l {path})")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}; give --svg a path in a directory you may write")]
    Svg { path: PathBuf, source: io::Error },
    #[error("cannot write to stdout: {0}")]
    Out(io::Error),
}

/// What the owner asked for.
#[derive(Debug, Clone, Default)]
pub struct GenerationsOptions {
    pub home: PathBuf,
    pub json: bool,
    /// As given: a date or an RFC 3339 time.
    pub since: Option<String>,
    /// The start of a generation's commit.
    pub commit: Option<String>,
    pub plot: bool,
    pub svg: Option<PathBuf>,
}

/// `--since` as the journal writes times (`2026-11-30T10:00:00.000Z`).
pub fn since_ts(given: &str) -> Result<String, GenerationsError> {
    let bad = || GenerationsError::BadSince(given.to_owned());
    let given = given.trim();
    let full = match given.len() {
        10 => format!("{given}T00:00:00Z"),
        16 => format!("{given}:00Z"),
        _ if given.ends_with('Z') => given.to_owned(),
        _ => format!("{given}Z"),
    };
    parse_ts(&full).map(rfc3339).ok_or_else(bad)
}

/// The figures of `home`'s journal, narrowed as asked.
pub fn figures(
    home: &Path,
    since: Option<&str>,
    commit: Option<&str>,
) -> Result<Vec<Figures>, GenerationsError> {
    let since = since.map(since_ts).transpose()?;
    let prefix = match commit.map(|c| c.trim().to_ascii_lowercase()) {
        Some(c) if (4..=40).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(c)
        }
        Some(_) => return Err(GenerationsError::BadCommit(commit.unwrap_or_default().to_owned())),
        None => None,
    };
    let path = home.join(crate::journal::JOURNAL_PATH);
    let all = scorecard::of_individual(home, since)
        .map_err(|source| GenerationsError::Read { path, source })?;
    Ok(all
        .into_iter()
        .filter(|f| prefix.as_deref().is_none_or(|p| f.commit.starts_with(p)))
        .collect())
}

/// Runs the command, printing to `out`; the exit status.
pub fn run(options: &GenerationsOptions, out: &mut impl Write) -> Result<i32, GenerationsError> {
    let all = figures(&options.home, options.since.as_deref(), options.commit.as_deref())?;
    if let Some(path) = &options.svg {
        let svg = crate::generations_plot::svg(&all);
        std::fs::write(path, svg)
            .map_err(|source| GenerationsError::Svg { path: path.clone(), source })?;
    }
    let text = if options.json {
        json(&all).to_string()
    } else if options.plot {
        crate::generations_plot::plot(&all).join("\n")
    } else {
        table(&all).join("\n")
    };
    writeln!(out, "{text}").map_err(GenerationsError::Out)?;
    Ok(0)
}

/// One JSON object: the figures of each generation, oldest first
/// ([`scorecard::document`]).
pub fn json(all: &[Figures]) -> Value {
    scorecard::document(all)
}

/// A body's text made one harmless line.
fn clean(text: &str) -> String {
    sanitize(text).replace(['\n', '\t'], " ")
}

fn ms(v: Option<i64>) -> String {
    v.map_or("-".into(), duration)
}

/// The plain table, and below it the details and the body's own notes.
pub fn table(all: &[Figures]) -> Vec<String> {
    if all.is_empty() {
        return vec!["no generation in the journal (for what was asked) yet".into()];
    }
    let mut out = vec![format!(
        "{:<9} {:<15} {:>7} {:>7} {:>5} {:>6} {:>6} {:>6} {:>6} {:>7} {:>7} {:>6} {:>8} {:>8} {:>4} {:>5} {:>5} {:>5} {:>9}",
        "gen", "ready (UTC)", "lived", "replies", "turns", "p50", "p90", "tools", "failed",
        "model", "retries", "errors", "tok in", "tok out", "intr", "crash", "rollb", "sentb",
        "mutations"
    )];
    for f in all {
        let mark = if f.current { "*" } else { " " };
        let ready = f.ready_at.as_deref().map_or("never ready".to_owned(), |t| {
            format!("{} {}", t.get(5..10).unwrap_or(""), t.get(11..19).unwrap_or(""))
        });
        let m = &f.mutations;
        out.push(format!(
            "{:<9} {:<15} {:>7} {:>7} {:>5} {:>6} {:>6} {:>6} {:>6} {:>7} {:>7} {:>6} {:>8} {:>8} {:>4} {:>5} {:>5} {:>5} {:>9}",
            format!("{}{mark}", short(&f.commit)),
            ready,
            duration(f.lived_ms),
            f.replies,
            f.turns,
            ms(f.latency.median_ms),
            ms(f.latency.p90_ms),
            f.tool_calls,
            f.tool_failures,
            f.model.requests,
            f.model.retries,
            f.model.provider_errors,
            f.model.input_tokens,
            f.model.output_tokens,
            f.interrupts,
            f.crashes,
            f.rollbacks,
            f.sentback,
            format!("{}/{}/{}", m.requested, m.accepted, m.rejected),
        ));
    }
    out.push(
        "* current. p50/p90: owner line or stimulus to reply. model: requests; errors: the \
         provider's. mutations: asked/accepted/rejected."
            .into(),
    );
    details(all, &mut out);
    out
}

/// Each generation in a few words, for `/generations` in talk: how long it
/// lived, turns and latency, tool failures, retries, crashes and mutations
/// (asked/accepted/rejected, as the last row says), laid out in rows of at
/// most `width` columns, broken after a comma, so that no figure falls off
/// the terminal's edge.
pub fn compact(all: &[Figures], width: usize) -> Vec<String> {
    if all.is_empty() {
        return vec!["no generation in the journal yet".into()];
    }
    let mut out = Vec::new();
    for f in all {
        let mark = if f.current { " (current)" } else { "" };
        let mut parts = vec![
            format!("{}{mark}: lived {}", short(&f.commit), duration(f.lived_ms)),
            format!("{} turns", f.turns),
        ];
        if let (Some(p50), Some(p90)) = (f.latency.median_ms, f.latency.p90_ms) {
            parts.push(format!("p50 {} p90 {}", duration(p50), duration(p90)));
        }
        let m = &f.mutations;
        parts.extend([
            format!("{}/{} tools failed", f.tool_failures, f.tool_calls),
            format!("{} retries", f.model.retries),
            format!("{} crashes", f.crashes),
            format!("mutations {}/{}/{}", m.requested, m.accepted, m.rejected),
        ]);
        out.extend(rows(&parts, ",", width));
    }
    let legend = ["mutations: asked/accepted/rejected", "all of it: teneralctl generations"];
    out.extend(rows(&legend.map(String::from), ";", width));
    out
}

/// `parts` joined with `after` and a blank, in rows of at most `width`
/// columns where they fit, a row after the first indented by four.
fn rows(parts: &[String], after: &str, width: usize) -> Vec<String> {
    const INDENT: &str = "    ";
    let mut out: Vec<String> = Vec::new();
    let mut row = String::new();
    for (i, part) in parts.iter().enumerate() {
        let part = if i + 1 < parts.len() { format!("{part}{after}") } else { part.clone() };
        if row.is_empty() {
            row = if out.is_empty() { part } else { format!("{INDENT}{part}") };
        } else if row.chars().count() + 1 + part.chars().count() <= width {
            row = format!("{row} {part}");
        } else {
            out.push(std::mem::take(&mut row));
            row = format!("{INDENT}{part}");
        }
    }
    out.push(row);
    out
}

fn details(all: &[Figures], out: &mut Vec<String>) {
    let named = |pairs: Vec<String>| pairs.join(", ");
    for f in all.iter().filter(|f| !f.tools.is_empty()) {
        let tools = f.tools.iter().map(|(name, t)| match t.failures {
            0 => format!("{} {}", clean(name), t.calls),
            n => format!("{} {} ({n} failed)", clean(name), t.calls),
        });
        out.push(format!("tools of {}: {}", short(&f.commit), named(tools.collect())));
    }
    for f in all.iter().filter(|f| f.mutations.rejected > 0) {
        let mut by: Vec<String> = f
            .mutations
            .refused_by
            .iter()
            .map(|(check, n)| format!("{} {n}", clean(check)))
            .collect();
        if f.mutations.undecided > 0 {
            by.push(format!("undecided {}", f.mutations.undecided));
        }
        out.push(format!("refused mutations of {}: {}", short(&f.commit), named(by)));
    }
    let noted: Vec<&Figures> = all.iter().filter(|f| !f.body_notes.is_empty()).collect();
    if !noted.is_empty() {
        out.push("the body's own notes (its words about itself, not counted above):".into());
    }
    for f in noted {
        for (kind, claim) in &f.body_notes {
            let last = match &claim.last {
                Value::String(text) => format!("{:?}", clean(text)),
                other => clean(&other.to_string()),
            };
            let last = cut(&last, 80);
            let times = if claim.notes == 1 { "1 note" } else { &format!("{} notes", claim.notes) };
            out.push(format!("  {} {}: {times}, last {last}", short(&f.commit), clean(kind)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_read_as_the_journal_writes_times() {
        let table = [
            ("2026-11-30", Some("2026-11-30T00:00:00.000Z")),
            ("2026-11-30T10:00", Some("2026-11-30T10:00:00.000Z")),
            ("2026-11-30T10:00:05Z", Some("2026-11-30T10:00:05.000Z")),
            ("2026-11-30T10:00:05.25Z", Some("2026-11-30T10:00:05.250Z")),
            ("yesterday", None),
        ];
        for (given, want) in table {
            assert_eq!(since_ts(given).ok().as_deref(), want, "{given}");
        }
    }

    fn lines_of_one() -> Vec<Figures> {
        vec![Figures { commit: "c".repeat(40), ..Figures::default() }]
    }

    #[test]
    fn compact_lines_for_talk() {
        let mut f = Figures { commit: "a".repeat(40), current: true, ..Figures::default() };
        (f.lived_ms, f.turns, f.tool_calls, f.tool_failures) = (26_000, 2, 4, 1);
        (f.latency.median_ms, f.latency.p90_ms) = (Some(3000), Some(5000));
        f.mutations.requested = 2;
        let lines = compact(&[f.clone()], 200);
        assert_eq!(
            lines[0],
            "aaaaaaa (current): lived 26s, 2 turns, p50 3.0s p90 5.0s, 1/4 tools failed, \
             0 retries, 0 crashes, mutations 2/0/0"
        );
        assert_eq!(compact(&[], 80), ["no generation in the journal yet"]);
        // Talk's terminal of 80 columns, less the two the rows are indented
        // by: every figure on it, the mutation counts the last row names too.
        (f.mutations.accepted, f.mutations.rejected) = (1, 1);
        let mut older = Figures { commit: "b".repeat(40), ..f.clone() };
        (older.lived_ms, older.current, older.turns) = (90_061_000, false, 12_345);
        let lines = compact(&[older, f], 78);
        assert_eq!(
            lines,
            [
                "bbbbbbb: lived 25 h, 12345 turns, p50 3.0s p90 5.0s, 1/4 tools failed,",
                "    0 retries, 0 crashes, mutations 2/1/1",
                "aaaaaaa (current): lived 26s, 2 turns, p50 3.0s p90 5.0s, 1/4 tools failed,",
                "    0 retries, 0 crashes, mutations 2/1/1",
                "mutations: asked/accepted/rejected; all of it: teneralctl generations",
            ]
        );
        let narrow = compact(&lines_of_one(), 38);
        assert!(narrow.iter().all(|row| row.chars().count() <= 38), "{narrow:#?}");
        assert!(narrow.iter().any(|row| row.contains("mutations 0/0/0")), "{narrow:#?}");
    }

    #[test]
    fn the_bodys_words_reach_the_terminal_harmless() {
        let mut f = Figures { commit: "a".repeat(40), ..Figures::default() };
        f.tools.insert("\u{1b}[2Jwipe\nline".into(), scorecard::Tool { calls: 1, failures: 1 });
        let claim =
            scorecard::Claim { notes: 1, last: Value::from("\u{1b}]0;title\u{7}0 failures") };
        f.body_notes.insert("self\nreport".into(), claim);
        let text = table(&[f]).join("\n");
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("tools of aaaaaaa: wipe line 1 (1 failed)"), "{text}");
        assert!(text.contains("  aaaaaaa self report: 1 note, last \"0 failures\""), "{text}");
    }
}
