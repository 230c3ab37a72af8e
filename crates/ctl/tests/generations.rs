//! `teneralctl generations` on journals of known histories: every figure
//! in the table and in `--json`, the chart, the SVG, and the narrowing.
#![allow(clippy::expect_used)]
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use teneral_testkit::{Within, SLOW};

fn c(letter: char) -> String {
    letter.to_string().repeat(40)
}

/// Writes the journal: (seconds after 10:00:00, type, generation, fields).
fn individual(events: &[(u32, &str, char, Value)], tail: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir_all(dir.path().join("memory")).expect("memory/");
    let mut text = String::new();
    for (seq, (secs, kind, by, fields)) in events.iter().enumerate() {
        let ts = format!("2026-11-30T10:{:02}:{:02}.000Z", secs / 60, secs % 60);
        let mut line = json!({"type": kind, "ts": ts, "seq": seq + 1, "commit": c(*by)});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields.clone()) {
            line.extend(fields);
        }
        text.push_str(&format!("{line}\n"));
    }
    text.push_str(tail);
    std::fs::write(dir.path().join("memory/journal.jsonl"), text).expect("the journal");
    dir
}

fn teneralctl(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .arg("generations")
        .arg("-d")
        .arg(home)
        .args(args)
        .output_within(SLOW)
        .expect("teneralctl runs")
}

fn stdout(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A answers two turns (a tool fails in the first) and asks for B; B is
/// promoted, meets two retries, fails a tool, claims in a note that
/// nothing failed, and is interrupted. A torn last line ends the journal.
fn two_generations() -> tempfile::TempDir {
    let call = |id: &str, name: &str| json!({"id": id, "name": name, "input": {}});
    let result = |id: &str, error: bool| json!({"id": id, "output": "", "error": error});
    individual(
        &[
            (0, "kernel.started", 'a', json!({"pid": 7})),
            (1, "generation.started", 'a', json!({"pid": 8})),
            (2, "generation.ready", 'a', json!({})),
            (10, "owner.line", 'a', json!({"file": "1.txt", "text": "hi"})),
            (11, "tool.call", 'a', call("c1", "bash")),
            (12, "tool.result", 'a', result("c1", true)),
            (13, "usage", 'a', json!({"input_tokens": 1000, "output_tokens": 50})),
            (15, "reply", 'a', json!({"text": "hello"})),
            (16, "turn.ended", 'a', json!({})),
            (20, "owner.line", 'a', json!({"file": "2.txt", "text": "change"})),
            (21, "mutation.requested", 'a', json!({"candidate": c('b')})),
            (23, "reply", 'a', json!({"text": "asked"})),
            (24, "turn.ended", 'a', json!({})),
            (25, "generation.exited", 'a', json!({"status": "exit status 75"})),
            (
                30,
                "mutation.rejected",
                'a',
                json!({"candidate": c('b'), "check": "tests", "output": "1 failed"}),
            ),
            (31, "generation.started", 'a', json!({})),
            (32, "mutation.requested", 'a', json!({"candidate": c('b')})),
            (33, "generation.exited", 'a', json!({"status": "exit status 75"})),
            (40, "mutation.accepted", 'a', json!({"from": c('a'), "to": c('b')})),
            (41, "generation.started", 'b', json!({})),
            (43, "generation.ready", 'b', json!({})),
            (50, "owner.line", 'b', json!({"file": "3.txt", "text": "again"})),
            (
                51,
                "model.retry",
                'b',
                json!({"message": "busy", "retry": 1, "seconds": 10, "status": 429}),
            ),
            (52, "model.retry", 'b', json!({"message": "no route", "retry": 2, "seconds": 60})),
            (60, "usage", 'b', json!({"input_tokens": 2000, "output_tokens": 100})),
            (61, "tool.call", 'b', call("d1", "bash")),
            (62, "tool.result", 'b', result("d1", true)),
            (70, "reply", 'b', json!({"text": "done"})),
            (71, "turn.ended", 'b', json!({})),
            (72, "note", 'b', json!({"kind": "self.report", "data": {"failures": 0}})),
            (73, "future.event", 'b', json!({"error": true})),
            (80, "owner.line", 'b', json!({"file": "4.txt", "text": "long"})),
            (85, "turn.interrupted", 'b', json!({})),
        ],
        r#"{"type":"tool.result","id":"d2","error":tr"#,
    )
}

#[test]
fn the_table_gives_every_figure() {
    let home = two_generations();
    let text = stdout(&teneralctl(home.path(), &[]));
    let want = [
        "gen       ready (UTC)       lived replies turns    p50    p90  tools failed   model retries errors   tok in  tok out intr crash rollb sentb mutations",
        "aaaaaaa   11-30 10:00:02      26s       2     2   3.0s   5.0s      1      1       1       0      0     1000       50    0     0     0     0     2/1/1",
        "bbbbbbb*  11-30 10:00:43      44s       1     2    20s    20s      1      1       3       2      1     2000      100    1     0     0     0     0/0/0",
    ];
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..3], want, "{text}");
    assert!(text.contains("tools of aaaaaaa: bash 1 (1 failed)"), "{text}");
    assert!(text.contains("refused mutations of aaaaaaa: tests 1"), "{text}");
    assert!(text.contains("the body's own notes (its words about itself, not counted above):\n  bbbbbbb self.report: 1 note, last {\"failures\":0}"), "{text}");
}

#[test]
fn json_gives_every_figure() {
    let home = two_generations();
    let value: Value = serde_json::from_str(&stdout(&teneralctl(home.path(), &["--json"])))
        .expect("one JSON object");
    let want = json!([
        {
            "commit": c('a'), "short": "aaaaaaa", "ready_at": "2026-11-30T10:00:02.000Z",
            "first_seen": "2026-11-30T10:00:00.000Z", "last_seen": "2026-11-30T10:00:40.000Z",
            "runs": 2, "lived_ms": 26_000, "running": false, "current": false,
            "replies": 2, "turns": 2, "answered": 2, "interrupts": 0,
            "latency": {"samples": 2, "median_ms": 3000, "p90_ms": 5000, "exact": true},
            "tool_calls": 1, "tool_failures": 1, "failure_rate": 1.0,
            "tools": {"bash": {"calls": 1, "failures": 1}},
            "model": {"requests": 1, "retries": 0, "provider_errors": 0, "unreachable": 0,
                      "input_tokens": 1000, "output_tokens": 50},
            "crashes": 0, "rollbacks": 0, "sentback": 0,
            "mutations": {"requested": 2, "accepted": 1, "rejected": 1, "undecided": 0,
                          "refused_by": {"tests": 1}},
            "body_notes": {}
        },
        {
            "commit": c('b'), "short": "bbbbbbb", "ready_at": "2026-11-30T10:00:43.000Z",
            "first_seen": "2026-11-30T10:00:41.000Z", "last_seen": "2026-11-30T10:01:25.000Z",
            "runs": 1, "lived_ms": 44_000, "running": true, "current": true,
            "replies": 1, "turns": 2, "answered": 1, "interrupts": 1,
            "latency": {"samples": 1, "median_ms": 20_000, "p90_ms": 20_000, "exact": true},
            "tool_calls": 1, "tool_failures": 1, "failure_rate": 1.0,
            "tools": {"bash": {"calls": 1, "failures": 1}},
            "model": {"requests": 3, "retries": 2, "provider_errors": 1, "unreachable": 1,
                      "input_tokens": 2000, "output_tokens": 100},
            "crashes": 0, "rollbacks": 0, "sentback": 0,
            "mutations": {"requested": 0, "accepted": 0, "rejected": 0, "undecided": 0,
                          "refused_by": {}},
            "body_notes": {"self.report": {"notes": 1, "last": {"failures": 0}}}
        }
    ]);
    assert_eq!(value["generations"], want, "{value:#}");
    assert!(value["counted_by"].as_str().is_some_and(|s| s.contains("body's own")), "{value}");
}

#[test]
fn narrowed_by_commit_and_time() {
    let home = two_generations();
    let one = |args: &[&str]| -> Vec<String> {
        let value: Value =
            serde_json::from_str(&stdout(&teneralctl(home.path(), args))).expect("one JSON object");
        let all = value["generations"].as_array().cloned().unwrap_or_default();
        all.iter().map(|g| g["short"].as_str().unwrap_or("?").to_owned()).collect()
    };
    assert_eq!(one(&["--json", "--commit", "BBBB"]), ["bbbbbbb"]);
    assert_eq!(one(&["--json", "--since", "2026-11-30T10:00:41Z"]), ["bbbbbbb"]);
    assert_eq!(one(&["--json", "--since", "2026-11-30"]), ["aaaaaaa", "bbbbbbb"]);
    let out = teneralctl(home.path(), &["--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--since takes a time in UTC like 2026-11-30"), "{err}");
    let out = teneralctl(home.path(), &["--commit", "xyz"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--commit takes 4 to 40 hex digits"),
        "{out:?}"
    );
}

#[test]
fn plot_and_svg() {
    let home = two_generations();
    let svg = home.path().join("trend.svg");
    let svg_arg = svg.to_str().expect("a UTF-8 path");
    let text = stdout(&teneralctl(home.path(), &["--plot", "--svg", svg_arg]));
    let want = [
        "median turn latency (top: 20s)",
        "    █",
        "    █",
        "    █",
        "  ▅ █",
        "tool failure rate (top: 100%)",
        "  █ █",
        "  █ █",
        "  █ █",
        "  █ █",
        "  1 2",
        "  oldest (aaaaaaa) to newest (bbbbbbb); no bar: no answered turn or no tool call",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), want, "{text}");
    let drawn = std::fs::read_to_string(&svg).expect("the SVG was written");
    assert!(drawn.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{drawn}");
    assert!(drawn.contains(">bbbbbbb *</text>"), "{drawn}");
}

#[test]
fn a_journal_with_no_generation_and_a_wrong_directory() {
    let home = individual(&[], "");
    assert_eq!(
        stdout(&teneralctl(home.path(), &[])).trim(),
        "no generation in the journal (for what was asked) yet"
    );
    let value: Value =
        serde_json::from_str(&stdout(&teneralctl(home.path(), &["--json"]))).expect("JSON");
    assert_eq!(value["generations"], json!([]));
    let nowhere = tempfile::tempdir().expect("a temp dir");
    let out = teneralctl(nowhere.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a teneral individual"),
        "{out:?}"
    );
}

#[test]
fn a_fleet_is_compared_one_row_per_lineage() {
    let two = two_generations();
    let empty = individual(&[], "");
    let nowhere = tempfile::tempdir().expect("a temp dir");
    let fleet = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_teneralctl"));
        cmd.args(["generations", "--fleet"]).args([two.path(), empty.path(), nowhere.path()]);
        cmd.args(extra).output_within(SLOW).expect("teneralctl runs")
    };
    let out = fleet(&[]);
    assert_eq!(out.status.code(), Some(1), "one of them is no individual: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows[0].starts_with("individual") && rows[0].contains("p50 first→now"), "{text}");
    // Both generations of the first summed: 3 replies, 2 of 2 tool calls
    // failed, 3000 + 2000 tokens in, 2 asked, 1 accepted, 1 refused; its
    // latency went from A's 3.0s to the current B's 20s.
    for want in ["   2 bbbbbbb", "      3 ", "3.0s→20s", "2/2", "3000", "150", "2/1/1"] {
        assert!(rows[1].contains(want), "{want:?} in {:?}", rows[1]);
    }
    assert!(rows[2].contains("no generation in its journal yet"), "{text}");
    assert!(rows[3].contains("cannot be read") && rows[3].contains("not a teneral individual"));
    let value: Value = serde_json::from_slice(&fleet(&["--json"]).stdout).expect("JSON");
    let lineage = &value["individuals"][0]["lineage"]["generations"];
    assert_eq!(lineage.as_array().map(Vec::len), Some(2), "{value:#}");
    assert_eq!(value["individuals"][1]["lineage"]["generations"], json!([]));
    assert!(value["individuals"][2]["error"].is_string(), "{value:#}");
    let both = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(["generations", "--plot", "--fleet"])
        .arg(two.path())
        .output_within(SLOW)
        .expect("teneralctl runs");
    assert_eq!(both.status.code(), Some(2), "--plot is one individual's: {both:?}");
}
