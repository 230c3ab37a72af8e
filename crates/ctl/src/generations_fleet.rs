//! `teneralctl generations --fleet DIR…`: the lineages of many individuals
//! side by side, one row each, from each one's journal through the same
//! scorecard as `teneralctl generations`: how many generations it went
//! through, where its latency started and where it stands now, its tool
//! failures, tokens, crashes and mutations over the whole lineage.
//!
//! Invariants: every figure is the scorecard's; an individual whose journal
//! cannot be read is a row saying why, never the end of the listing.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::commit::short;
use crate::generations_card::{figures, GenerationsError};
use crate::scorecard::{self, Figures};
use crate::when::duration;

/// One individual's lineage, or why it could not be read.
pub struct Lineage {
    pub dir: PathBuf,
    pub figures: Result<Vec<Figures>, String>,
}

/// Reads the lineage of each of `dirs`, narrowed to `since`.
pub fn lineages(dirs: &[PathBuf], since: Option<&str>) -> Result<Vec<Lineage>, GenerationsError> {
    // A bad --since is the owner's mistake once, not a row per individual.
    if let Some(given) = since {
        crate::generations_card::since_ts(given)?;
    }
    Ok(dirs
        .iter()
        .map(|dir| Lineage {
            dir: dir.clone(),
            figures: crate::individual::check(dir)
                .map_err(|e| e.to_string())
                .and_then(|()| figures(dir, since, None).map_err(|e| e.to_string())),
        })
        .collect())
}

/// Runs `generations --fleet`, printing to `out`; the exit status: 0, or 1
/// when some individual could not be read.
pub fn run(
    dirs: &[PathBuf],
    since: Option<&str>,
    as_json: bool,
    out: &mut impl Write,
) -> Result<i32, GenerationsError> {
    let all = lineages(dirs, since)?;
    let text = if as_json { document(&all).to_string() } else { table(&all).join("\n") };
    writeln!(out, "{text}").map_err(GenerationsError::Out)?;
    Ok(if all.iter().all(|l| l.figures.is_ok()) { 0 } else { 1 })
}

/// The name a row goes by: the directory's last component.
fn name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// What a lineage adds up to.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sums {
    replies: u64,
    tool_calls: u64,
    tool_failures: u64,
    tokens_in: u64,
    tokens_out: u64,
    crashes: u64,
    rollbacks: u64,
    asked: u64,
    accepted: u64,
    rejected: u64,
}

fn sums(all: &[Figures]) -> Sums {
    let mut s = Sums::default();
    for f in all {
        s.replies += f.replies;
        s.tool_calls += f.tool_calls;
        s.tool_failures += f.tool_failures;
        s.tokens_in += f.model.input_tokens;
        s.tokens_out += f.model.output_tokens;
        s.crashes += f.crashes;
        s.rollbacks += f.rollbacks;
        s.asked += f.mutations.requested;
        s.accepted += f.mutations.accepted;
        s.rejected += f.mutations.rejected;
    }
    s
}

/// The median latency of the first generation that had one, and of the
/// current one (or the last that had one): where the lineage started and
/// where it stands.
fn latency_span(all: &[Figures]) -> (Option<i64>, Option<i64>) {
    let first = all.iter().find_map(|f| f.latency.median_ms);
    let now = all
        .iter()
        .find(|f| f.current)
        .and_then(|f| f.latency.median_ms)
        .or_else(|| all.iter().rev().find_map(|f| f.latency.median_ms));
    (first, now)
}

/// The side-by-side table, one row per individual, and a legend.
pub fn table(all: &[Lineage]) -> Vec<String> {
    let ms = |v: Option<i64>| v.map_or("-".to_owned(), duration);
    let mut out = vec![format!(
        "{:<16} {:>4} {:<8} {:>7} {:>15} {:>11} {:>9} {:>9} {:>6} {:>9}",
        "individual",
        "gens",
        "current",
        "replies",
        "p50 first→now",
        "tools fail",
        "tok in",
        "tok out",
        "crash",
        "mutations"
    )];
    for lineage in all {
        let who = name(&lineage.dir);
        let figures = match &lineage.figures {
            Ok(f) => f,
            Err(why) => {
                out.push(format!("{who:<16} cannot be read: {why}"));
                continue;
            }
        };
        if figures.is_empty() {
            out.push(format!("{who:<16} no generation in its journal yet"));
            continue;
        }
        let current = figures.iter().find(|f| f.current).or(figures.last());
        let s = sums(figures);
        let (first, now) = latency_span(figures);
        out.push(format!(
            "{:<16} {:>4} {:<8} {:>7} {:>15} {:>11} {:>9} {:>9} {:>6} {:>9}",
            who,
            figures.len(),
            current.map_or("-".to_owned(), |f| short(&f.commit).to_owned()),
            s.replies,
            format!("{}→{}", ms(first), ms(now)),
            format!("{}/{}", s.tool_failures, s.tool_calls),
            s.tokens_in,
            s.tokens_out,
            s.crashes + s.rollbacks,
            format!("{}/{}/{}", s.asked, s.accepted, s.rejected),
        ));
    }
    out.push(
        "gens: generations in the journal. p50: owner line or stimulus to reply, of the first \
         generation and of the current one. crash: crashes and rollbacks. mutations: \
         asked/accepted/rejected. Each: teneralctl generations -d DIR."
            .into(),
    );
    out
}

/// One JSON object: each individual's directory and the scorecard document
/// of its lineage, or why it could not be read.
pub fn document(all: &[Lineage]) -> Value {
    let individuals: Vec<Value> = all
        .iter()
        .map(|l| match &l.figures {
            Ok(f) => json!({"dir": l.dir, "name": name(&l.dir), "lineage": scorecard::document(f)}),
            Err(why) => json!({"dir": l.dir, "name": name(&l.dir), "error": why}),
        })
        .collect();
    json!({ "individuals": individuals })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(commit: char, current: bool, median: Option<i64>, replies: u64) -> Figures {
        let mut f = Figures {
            commit: commit.to_string().repeat(40),
            current,
            replies,
            ..Default::default()
        };
        f.latency.median_ms = median;
        f.tool_calls = 4;
        f.tool_failures = 1;
        f.mutations.requested = 2;
        f.mutations.accepted = 1;
        f.mutations.rejected = 1;
        f
    }

    #[test]
    fn each_individual_is_one_row_with_its_lineage_summed() {
        let all = vec![
            Lineage {
                dir: PathBuf::from("/srv/a"),
                figures: Ok(vec![
                    generation('a', false, Some(3_000), 5),
                    generation('b', false, None, 0),
                    generation('c', true, Some(1_500), 2),
                ]),
            },
            Lineage { dir: PathBuf::from("/srv/b"), figures: Ok(vec![]) },
            Lineage { dir: PathBuf::from("/srv/c"), figures: Err("not an individual".into()) },
        ];
        let rows = table(&all);
        assert_eq!(rows.len(), 5, "{rows:#?}");
        let a = &rows[1];
        for want in ["a ", "   3 ", "ccccccc", "      7 ", "3.0s→1.5s", "3/12", "6/3/3"] {
            assert!(a.contains(want), "{want:?} in {a:?}");
        }
        assert!(rows[2].starts_with("b ") && rows[2].contains("no generation"), "{}", rows[2]);
        assert!(rows[3].contains("cannot be read: not an individual"), "{}", rows[3]);
        let doc = document(&all);
        assert_eq!(doc["individuals"][0]["name"], "a");
        assert_eq!(doc["individuals"][2]["error"], "not an individual");
    }

    #[test]
    fn where_the_latency_stands_is_the_current_generations_or_the_last_known() {
        let table = [
            (vec![(None, false), (Some(900), false), (Some(400), true)], (Some(900), Some(400))),
            (vec![(Some(900), false), (None, true)], (Some(900), Some(900))),
            (vec![(None, false), (None, true)], (None, None)),
        ];
        for (gens, want) in table {
            let all: Vec<Figures> = gens
                .iter()
                .enumerate()
                .map(|(i, (m, cur))| generation((b'a' + i as u8) as char, *cur, *m, 1))
                .collect();
            assert_eq!(latency_span(&all), want, "{gens:?}");
        }
    }
}
