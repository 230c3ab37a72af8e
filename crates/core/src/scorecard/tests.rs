//! Journals of known histories, and every figure the scorecard gives them.

use serde_json::{json, Value};

use super::*;

/// A commit: one letter forty times.
fn c(letter: char) -> String {
    letter.to_string().repeat(40)
}

/// Seconds after 2026-11-30T10:00:00Z as the journal writes them.
fn ts(secs: f64) -> String {
    let base = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_032_800);
    let t = base + std::time::Duration::from_millis((secs * 1000.0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// A journal written line by line, as the kernel stamps it.
#[derive(Default)]
struct J {
    text: String,
    seq: u64,
}

impl J {
    fn at(&mut self, secs: f64, kind: &str, by: char, fields: Value) -> &mut Self {
        self.seq += 1;
        let mut line = json!({"type": kind, "ts": ts(secs), "seq": self.seq, "commit": c(by)});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        self.text.push_str(&line.to_string());
        self.text.push('\n');
        self
    }

    fn card(&self, since: Option<&str>) -> Vec<Figures> {
        read(self.text.as_bytes(), since.map(str::to_owned)).expect("a string reads")
    }
}

fn call(id: &str, name: &str) -> Value {
    json!({"id": id, "name": name, "input": {"command": "ls"}})
}

fn result(id: &str, error: bool) -> Value {
    json!({"id": id, "output": "x", "error": error})
}

/// Generation A answers three turns and asks for B; B is promoted, meets
/// retries, fails a tool, claims in a note that nothing failed, and is
/// interrupted.
fn two_generations() -> J {
    let mut j = J::default();
    j.at(0.0, "kernel.started", 'a', json!({"pid": 7}))
        .at(1.0, "generation.started", 'a', json!({"pid": 8}))
        .at(2.0, "generation.ready", 'a', json!({}))
        .at(10.0, "owner.line", 'a', json!({"file": "1.txt", "text": "hi"}))
        .at(11.0, "tool.call", 'a', call("c1", "bash"))
        .at(12.0, "tool.result", 'a', result("c1", true))
        .at(13.0, "tool.call", 'a', call("c2", "read_file"))
        .at(13.5, "tool.result", 'a', result("c2", false))
        .at(14.0, "usage", 'a', json!({"input_tokens": 1000, "output_tokens": 50}))
        .at(15.0, "reply", 'a', json!({"text": "hello"}))
        .at(16.0, "turn.ended", 'a', json!({}))
        .at(20.0, "stimulus", 'a', json!({"source": "clock", "text": "tick"}))
        .at(22.0, "reply", 'a', json!({"text": "tock"}))
        .at(22.5, "reply", 'a', json!({"text": "and more"}))
        .at(23.0, "turn.ended", 'a', json!({}))
        .at(30.0, "owner.line", 'a', json!({"file": "2.txt", "text": "change"}))
        .at(31.0, "mutation.requested", 'a', json!({"candidate": c('b')}))
        .at(32.0, "reply", 'a', json!({"text": "asked"}))
        .at(33.0, "turn.ended", 'a', json!({}))
        .at(
            34.0,
            "generation.exited",
            'a',
            json!({"status": "exit status 75", "result": "exit-code"}),
        )
        .at(
            40.0,
            "mutation.check",
            'a',
            json!({"candidate": c('b'), "check": "build", "result": "passed"}),
        )
        .at(41.0, "mutation.accepted", 'a', json!({"from": c('a'), "to": c('b')}))
        .at(42.0, "generation.started", 'b', json!({"pid": 9}))
        .at(43.0, "generation.ready", 'b', json!({}))
        .at(50.0, "owner.line", 'b', json!({"file": "3.txt", "text": "again"}))
        .at(
            51.0,
            "model.retry",
            'b',
            json!({"message": "busy", "retry": 1, "seconds": 10, "status": 429}),
        )
        .at(52.0, "model.retry", 'b', json!({"message": "unreachable", "retry": 2, "seconds": 60}))
        .at(60.0, "usage", 'b', json!({"input_tokens": 2000, "output_tokens": 100}))
        .at(61.0, "tool.call", 'b', call("d1", "bash"))
        .at(62.0, "tool.result", 'b', result("d1", true))
        .at(70.0, "reply", 'b', json!({"text": "done"}))
        .at(71.0, "turn.ended", 'b', json!({}))
        .at(
            72.0,
            "note",
            'b',
            json!({"kind": "self.report", "data": {"failures": 0, "tool_calls": 0}}),
        )
        .at(80.0, "owner.line", 'b', json!({"file": "4.txt", "text": "long task"}))
        .at(85.0, "turn.interrupted", 'b', json!({}));
    j
}

#[test]
fn two_generations_every_figure() {
    let card = two_generations().card(None);
    let got = serde_json::to_value(&card).expect("figures serialize");
    let want = json!([
        {
            "commit": c('a'), "ready_at": ts(2.0), "first_seen": ts(0.0), "last_seen": ts(41.0),
            "runs": 1, "lived_ms": 33_000, "running": false, "current": false,
            "replies": 4, "turns": 3, "answered": 3, "interrupts": 0,
            "latency": {"samples": 3, "median_ms": 2000, "p90_ms": 5000, "exact": true},
            "tool_calls": 2, "tool_failures": 1,
            "tools": {"bash": {"calls": 1, "failures": 1}, "read_file": {"calls": 1, "failures": 0}},
            "model": {"requests": 1, "retries": 0, "provider_errors": 0, "unreachable": 0,
                      "input_tokens": 1000, "output_tokens": 50},
            "crashes": 0, "rollbacks": 0, "sentback": 0,
            "mutations": {"requested": 1, "accepted": 1, "rejected": 0, "undecided": 0, "refused_by": {}},
            "body_notes": {}
        },
        {
            "commit": c('b'), "ready_at": ts(43.0), "first_seen": ts(42.0), "last_seen": ts(85.0),
            "runs": 1, "lived_ms": 43_000, "running": true, "current": true,
            "replies": 1, "turns": 2, "answered": 1, "interrupts": 1,
            "latency": {"samples": 1, "median_ms": 20_000, "p90_ms": 20_000, "exact": true},
            "tool_calls": 1, "tool_failures": 1,
            "tools": {"bash": {"calls": 1, "failures": 1}},
            "model": {"requests": 3, "retries": 2, "provider_errors": 1, "unreachable": 1,
                      "input_tokens": 2000, "output_tokens": 100},
            "crashes": 0, "rollbacks": 0, "sentback": 0,
            "mutations": {"requested": 0, "accepted": 0, "rejected": 0, "undecided": 0, "refused_by": {}},
            "body_notes": {"self.report": {"notes": 1, "last": {"failures": 0, "tool_calls": 0}}}
        }
    ]);
    assert_eq!(got, want, "{}", serde_json::to_string_pretty(&got).unwrap_or_default());
    assert_eq!(card[1].failure_rate(), 1.0);
}

#[test]
fn a_note_claiming_no_failures_changes_nothing_counted() {
    let mut j = two_generations();
    let before = j.card(None);
    j.at(
        90.0,
        "note",
        'b',
        json!({"kind": "tool.result", "data": {"failures": 0, "error": false}}),
    )
    .at(91.0, "note", 'b', json!({"kind": "self.report", "data": "0 failures"}));
    let after = j.card(None);
    assert_eq!(after[1].tool_failures, 1);
    assert_eq!(
        (after[1].tools.clone(), after[1].model.clone()),
        (before[1].tools.clone(), before[1].model.clone())
    );
    assert_eq!(after[1].body_notes["self.report"], Claim { notes: 2, last: json!("0 failures") });
    assert_eq!(after[1].body_notes["tool.result"].notes, 1);
}

#[test]
fn torn_last_line_and_unknown_types_are_passed_over() {
    let whole = two_generations();
    let mut more = two_generations();
    more.at(86.0, "future.thing", 'b', json!({"error": true, "name": "bash"})).at(
        87.0,
        "tool.outcome",
        'b',
        json!({"id": "d1", "error": true}),
    );
    more.text.push_str("not json at all\n");
    more.text.push_str(r#"{"type":"reply","ts":"2026-11-30T10:02:00.000Z","commit":"bbbb"#);
    assert_eq!(more.card(None), whole.card(None));
}

/// Five generations: B crashes and is rolled back, C is sent back by the
/// owner, D is refused twice and then promoted, E crashes by a signal and
/// runs on.
#[test]
fn five_generations_with_rollback_and_sendback() {
    let mut j = J::default();
    j.at(0.0, "kernel.started", 'a', json!({}))
        .at(1.0, "generation.started", 'a', json!({}))
        .at(2.0, "generation.ready", 'a', json!({}))
        .at(3.0, "mutation.requested", 'a', json!({"candidate": c('b')}))
        .at(4.0, "generation.exited", 'a', json!({"status": "exit status 75"}))
        .at(5.0, "mutation.accepted", 'a', json!({"from": c('a'), "to": c('b')}))
        .at(6.0, "generation.started", 'b', json!({}))
        .at(7.0, "generation.exited", 'b', json!({"status": "exit status 101"}))
        .at(
            8.0,
            "generation.rolledback",
            'b',
            json!({"from": c('b'), "to": c('a'), "reason": "crashed"}),
        )
        .at(10.0, "generation.started", 'a', json!({}))
        .at(11.0, "generation.ready", 'a', json!({}))
        .at(12.0, "mutation.requested", 'a', json!({"candidate": c('c')}))
        .at(13.0, "generation.exited", 'a', json!({"status": "exit status 75"}))
        .at(14.0, "mutation.accepted", 'a', json!({"from": c('a'), "to": c('c')}))
        .at(15.0, "generation.started", 'c', json!({}))
        .at(16.0, "generation.ready", 'c', json!({}))
        .at(20.0, "generation.exited", 'c', json!({"status": "exit status 0"}))
        .at(21.0, "generation.sentback", 'c', json!({"from": c('c'), "to": c('a'), "by": "owner"}))
        .at(30.0, "kernel.started", 'a', json!({}))
        .at(31.0, "generation.started", 'a', json!({}))
        .at(32.0, "mutation.requested", 'a', json!({"candidate": c('d')}))
        .at(
            33.0,
            "mutation.rejected",
            'a',
            json!({"candidate": c('d'), "check": "tests", "output": "1 failed"}),
        )
        .at(34.0, "mutation.requested", 'a', json!({"candidate": c('d')}))
        .at(35.0, "mutation.rejected", 'a', json!({"check": "undecided", "undecided": true}))
        .at(36.0, "molt.requested", 'a', json!({"candidate": c('d')}))
        .at(37.0, "generation.exited", 'a', json!({"status": "exit status 75"}))
        .at(38.0, "mutation.accepted", 'a', json!({"from": c('a'), "to": c('d')}))
        .at(39.0, "generation.started", 'd', json!({}))
        .at(40.0, "generation.ready", 'd', json!({}))
        .at(41.0, "mutation.requested", 'd', json!({"candidate": c('e')}))
        .at(42.0, "generation.exited", 'd', json!({"status": "exit status 75"}))
        .at(43.0, "mutation.accepted", 'd', json!({"from": c('d'), "to": c('e')}))
        .at(44.0, "generation.started", 'e', json!({}))
        .at(45.0, "generation.exited", 'e', json!({"status": "killed by signal 9"}))
        .at(46.0, "generation.started", 'e', json!({}))
        .at(47.0, "generation.ready", 'e', json!({}))
        .at(50.0, "reply", 'e', json!({"text": "up"}));
    let card = j.card(None);
    type Row = (char, u64, i64, u64, u64, u64, u64, u64, u64, u64, bool, bool);
    // commit, runs, lived, crashes, rollbacks, sentback, requested, accepted, rejected, undecided, running, current
    let want: [Row; 5] = [
        ('a', 3, 3000 + 3000 + 6000, 0, 0, 0, 5, 3, 2, 1, false, false),
        ('b', 1, 1000, 1, 1, 0, 0, 0, 0, 0, false, false),
        ('c', 1, 5000, 0, 0, 1, 0, 0, 0, 0, false, false),
        ('d', 1, 3000, 0, 0, 0, 1, 1, 0, 0, false, false),
        ('e', 2, 1000 + 4000, 1, 0, 0, 0, 0, 0, 0, true, true),
    ];
    let got: Vec<Row> = card
        .iter()
        .map(|f| {
            let m = &f.mutations;
            let letter = f.commit.chars().next().unwrap_or('?');
            (
                letter,
                f.runs,
                f.lived_ms,
                f.crashes,
                f.rollbacks,
                f.sentback,
                m.requested,
                m.accepted,
                m.rejected,
                m.undecided,
                f.running,
                f.current,
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(card[0].mutations.refused_by, BTreeMap::from([("tests".to_owned(), 1)]));
    assert_eq!(card[1].ready_at, None, "b never reported ready");
    assert_eq!(card[4].replies, 1);
    let since = j.card(Some(&ts(30.0)));
    let commits: Vec<char> = since.iter().filter_map(|f| f.commit.chars().next()).collect();
    assert_eq!(commits, ['a', 'd', 'e'], "only generations at work since then");
    assert_eq!((since[0].runs, since[0].mutations.requested), (1, 3));
}

#[test]
fn names_past_the_bound_are_counted_together() {
    let mut j = J::default();
    for i in 0..100 {
        j.at(f64::from(i), "tool.call", 'a', call(&format!("x{i}"), &format!("tool{i:03}")));
    }
    let card = j.card(None);
    assert_eq!(card[0].tools.len(), MAX_NAMES);
    assert_eq!(card[0].tools[OTHER].calls, 100 - (MAX_NAMES as u64 - 1));
    assert_eq!(card[0].tool_calls, 100);
}
