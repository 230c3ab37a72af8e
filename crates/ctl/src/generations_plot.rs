//! `teneralctl generations --plot` and `--svg FILE`: the trend across
//! generations, oldest first, where people would rather look than read:
//! each generation's median turn latency and its tool failure rate, as
//! rows of block characters in the terminal, or the same as an SVG.
//!
//! Pure: figures in, lines or SVG text out. A generation with no figure
//! (no answered turn, no tool call) draws no bar, never a zero one.

use crate::commit::short;
use crate::scorecard::Figures;
use crate::when::duration;

/// Rows of the terminal chart.
const ROWS: usize = 4;
/// Generations drawn at most: the newest.
const MAX_BARS: usize = 60;
const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Latency (ms) and failure rate of each generation drawn, oldest first.
fn series(all: &[Figures]) -> (&[Figures], Vec<Option<f64>>, Vec<Option<f64>>) {
    let shown = &all[all.len().saturating_sub(MAX_BARS)..];
    let latency = shown.iter().map(|f| f.latency.median_ms.map(|m| m as f64)).collect();
    let failures = shown.iter().map(|f| (f.tool_calls > 0).then(|| f.failure_rate())).collect();
    (shown, latency, failures)
}

/// The rows of one chart of bars, two columns per generation.
fn bars(values: &[Option<f64>], top: f64) -> Vec<String> {
    (0..ROWS)
        .rev()
        .map(|row| {
            let line: String = values
                .iter()
                .map(|v| {
                    let eighths = match v {
                        Some(v) if top > 0.0 => (v / top * (ROWS * 8) as f64).round() as usize,
                        _ => 0,
                    };
                    let here = eighths.saturating_sub(row * 8).min(8);
                    format!("{} ", EIGHTHS[here])
                })
                .collect();
            format!("  {}", line.trim_end())
        })
        .collect()
}

fn top(values: &[Option<f64>]) -> f64 {
    values.iter().flatten().fold(0.0, |a: f64, &b| a.max(b))
}

/// The chart for a terminal.
pub fn plot(all: &[Figures]) -> Vec<String> {
    if all.is_empty() {
        return vec!["no generation in the journal (for what was asked) yet".into()];
    }
    let (shown, latency, failures) = series(all);
    let mut out = Vec::new();
    if shown.len() < all.len() {
        out.push(format!("the newest {} of {} generations", shown.len(), all.len()));
    }
    let lmax = top(&latency);
    out.push(format!("median turn latency (top: {})", duration(lmax as i64)));
    out.extend(bars(&latency, lmax));
    let fmax = top(&failures).max(0.01);
    out.push(format!("tool failure rate (top: {:.0}%)", fmax * 100.0));
    out.extend(bars(&failures, fmax));
    let numbers: String = (1..=shown.len()).map(|i| format!("{:<2}", i % 10)).collect();
    out.push(format!("  {}", numbers.trim_end()));
    let first = shown.first().map(|f| short(&f.commit)).unwrap_or_default();
    let last = shown.last().map(|f| short(&f.commit)).unwrap_or_default();
    out.push(format!(
        "  oldest ({first}) to newest ({last}); no bar: no answered turn or no tool call"
    ));
    out
}

/// The same chart as an SVG document.
pub fn svg(all: &[Figures]) -> String {
    let (shown, latency, failures) = series(all);
    let (bar, gap, left, panel) = (18.0, 6.0, 60.0, 120.0);
    let width = left + (bar + gap) * shown.len().max(1) as f64 + 20.0;
    let height = 2.0 * panel + 120.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let lmax = top(&latency);
    let fmax = top(&failures).max(0.01);
    let charts = [
        ("median turn latency", &latency, lmax, duration(lmax as i64), 20.0, "#3b6ea5"),
        (
            "tool failure rate",
            &failures,
            fmax,
            format!("{:.0}%", fmax * 100.0),
            60.0 + panel,
            "#b5452f",
        ),
    ];
    for (title, values, max, label, y0, colour) in charts {
        let base = y0 + panel - 20.0;
        s +=
            &format!("<text x=\"{left}\" y=\"{}\" font-weight=\"bold\">{title}</text>\n", y0 - 4.0);
        s += &format!("<text x=\"4\" y=\"{}\">{label}</text>\n", y0 + 12.0);
        s += &format!("<text x=\"4\" y=\"{base}\">0</text>\n");
        s += &format!(
            "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"#888\"/>\n",
            width - 20.0
        );
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            let h = if max > 0.0 { v / max * (panel - 40.0) } else { 0.0 };
            let x = left + (bar + gap) * i as f64;
            s += &format!(
                "<rect x=\"{x}\" y=\"{:.1}\" width=\"{bar}\" height=\"{h:.1}\" fill=\"{colour}\"/>\n",
                base - h
            );
        }
    }
    let y = 2.0 * panel + 60.0;
    for (i, f) in shown.iter().enumerate() {
        let x = left + (bar + gap) * i as f64 + bar / 2.0;
        let mark = if f.current { " *" } else { "" };
        s += &format!(
            "<text x=\"{x}\" y=\"{y}\" transform=\"rotate(60 {x} {y})\">{}{mark}</text>\n",
            short(&f.commit)
        );
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(commit: char, median: Option<i64>, calls: u64, failures: u64) -> Figures {
        let mut f = Figures { commit: commit.to_string().repeat(40), ..Figures::default() };
        f.latency.median_ms = median;
        (f.tool_calls, f.tool_failures) = (calls, failures);
        f
    }

    #[test]
    fn bars_grow_with_the_figure() {
        let all = [
            figures('a', Some(1000), 4, 0),
            figures('b', Some(4000), 4, 2),
            figures('c', None, 0, 0),
        ];
        let lines = plot(&all);
        assert_eq!(lines[0], "median turn latency (top: 4.0s)");
        assert_eq!(&lines[1..5], ["    █", "    █", "    █", "  █ █"]);
        assert_eq!(lines[5], "tool failure rate (top: 50%)");
        assert_eq!(&lines[6..10], ["    █", "    █", "    █", "    █"]);
        assert_eq!(lines[10], "  1 2 3");
        let svg = svg(&all);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"), "{svg}");
        assert_eq!(svg.matches("<rect x=").count(), 4, "c has neither figure: {svg}");
        assert!(svg.contains("height=\"0.0\" fill=\"#b5452f\""), "a failed nothing: {svg}");
        assert!(svg.contains(">aaaaaaa</text>"), "{svg}");
    }
}
