//! The view's decisions, table by table.

use super::*;
use crate::journal::parse_line;

fn ev(json: &str) -> Event {
    parse_line(json.as_bytes()).unwrap_or_else(|| panic!("not an event: {json}"))
}

fn text(rows: &[Line<'_>]) -> Vec<String> {
    rows.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect()).collect()
}

#[test]
fn times_and_durations() {
    assert_eq!(parse_ts("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_ts("1970-01-02T00:00:01.5Z"), Some(86_401_500));
    assert_eq!(parse_ts("2000-03-01T00:00:00.000Z"), Some(951_868_800_000));
    assert_eq!(parse_ts("not a time"), None);
    assert_eq!(duration(300), "0.3s");
    assert_eq!(duration(42_000), "42s");
    assert_eq!(duration(240_000), "4 min");
}

#[test]
fn events_table() {
    let table: &[(&[&str], &[&str])] = &[
        (&[r#"{"type":"owner.line","text":"hi\nthere"}"#], &["› hi", "  there"]),
        (
            &[
                r#"{"type":"owner.line","text":"look\n[image: memory/images/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.png]\n[image: /etc/passwd]"}"#,
            ],
            &["› look", "  [image 1 · png · 9f86d08]", "  [image: /etc/passwd]"],
        ),
        (&[r#"{"type":"reply","text":"**Yes.**"}"#], &["● Yes."]),
        (
            &[
                r#"{"type":"tool.call","id":"1","name":"bash","input":{"command":"ls"},"ts":"2026-01-01T00:00:00.000Z"}"#,
                r#"{"type":"tool.result","id":"1","output":"a","ts":"2026-01-01T00:00:00.300Z"}"#,
            ],
            &["▪ bash  command: ls ✓ 0.3s"],
        ),
        (
            &[
                r#"{"type":"tool.call","id":"2","name":"t","input":{}}"#,
                r#"{"type":"tool.result","id":"2","output":"x\nboom","error":true}"#,
            ],
            &["▪ t ✗ failed", "    boom"],
        ),
        (&[r#"{"type":"turn.interrupted"}"#], &["  interrupted by you"]),
        (&[r#"{"type":"stimulus","source":"clock"}"#], &["  woken by the clock"]),
        (&[r#"{"type":"stimulus","source":"web"}"#], &["  woken by the body's web"]),
        (
            &[r#"{"type":"stimulus","source":"owner"}"#],
            &["  woken by what the body calls \"owner\""],
        ),
        (
            &[r#"{"type":"mutation.accepted","from":"0123456789ab","to":"fedcba987654"}"#],
            &["│ mutation accepted: 0123456 → fedcba9"],
        ),
        (
            &[
                r#"{"type":"mutation.rejected","candidate":"0123456789ab","check":"tests","output":"ok\nFAILED x"}"#,
            ],
            &["│ mutation to 0123456 rejected at gate tests", "│   ok", "│   FAILED x"],
        ),
        (&[r#"{"type":"reply","text":"said","from":"body"}"#], &["! not from the model", "● said"]),
        (&[r#"{"type":"usage","input_tokens":1,"output_tokens":1}"#], &[]),
        (
            &[
                r#"{"type":"model.retry","message":"HTTP 429: slow \u001b[2Jdown","retry":1,"seconds":10,"ts":"2026-01-01T10:00:00.000Z"}"#,
            ],
            &[
                "│ the model failed: HTTP 429: slow down",
                "│   retry 1 in 10s (at 10:00:10 UTC); Esc gives up the turn",
            ],
        ),
        (
            &[
                r#"{"type":"mutation.requested","candidate":"0123456789ab"}"#,
                r#"{"type":"mutation.check","check":"paths","result":"passed","seconds":0.02}"#,
                r#"{"type":"generation.exited","status":"exit status 75"}"#,
                r#"{"type":"mutation.check","check":"kernel tests","result":"failed","seconds":95}"#,
                r#"{"type":"mutation.check","check":"kernel-tests","result":"reused","seconds":0,"why":"the running generation's kernel"}"#,
            ],
            &[
                "  asked for a mutation to 0123456",
                "  gate paths ✓ passed 0.0s",
                "  the body stepped aside for the gate",
                "  gate kernel tests ✗ failed 95s",
                "  gate kernel-tests ✓ reused: the running generation's kernel",
            ],
        ),
        (
            &[r#"{"type":"generation.exited","status":"exit status 101"}"#],
            &["! the body ended (exit status 101)"],
        ),
        (&[r#"{"type":"generation.exited","status":"exit status 0"}"#], &[]),
    ];
    for (events, want) in table {
        let mut view = View::new(Theme::new(false, true), 80);
        let rows: Vec<Line<'_>> = events.iter().flat_map(|e| view.event(&ev(e))).collect();
        assert_eq!(text(&rows), *want, "{events:?}");
    }
}

#[test]
fn the_live_state_follows_the_turn() {
    let mut view = View::new(Theme::new(false, true), 80);
    view.event(&ev(r#"{"type":"owner.line","text":"go"}"#));
    assert_eq!(view.doing, Doing::Thinking);
    view.event(&ev(r#"{"type":"tool.call","id":"1","name":"bash","input":{}}"#));
    assert_eq!(view.doing, Doing::Running("bash".into()));
    assert_eq!(view.pending.len(), 1);
    view.event(&ev(r#"{"type":"reply","text":"Done?"}"#));
    view.event(&ev(r#"{"type":"turn.ended"}"#));
    assert_eq!((view.doing.clone(), view.pending.len(), view.question), (Doing::Resting, 0, true));
}

#[test]
fn the_gate_steps_come_from_the_kernels_status() {
    let table = [
        ("checking mutation 0123abc: paths", Some("paths")),
        ("checking mutation 0123abc: kernel tests, body tests", Some("kernel tests, body tests")),
        ("checking mutation 0123abc: smoke; meanwhile warming", Some("smoke")),
        (
            "checking mutation 0123abc: lint-body, body-tests (about 40 s, from the last run); \
             meanwhile the gate warms up",
            Some("lint-body, body-tests (about 40 s, from the last run)"),
        ),
        ("checking mutation 0123abc: \u{1b}]0;x\u{7}smoke", Some("smoke")),
        ("generation 0123abc: resting", None),
        ("checking mutation 0123abc: ", None),
    ];
    for (status, want) in table {
        let got = gate_step(status);
        assert_eq!(got.as_ref().map(|(_, s)| s.as_str()), want, "{status:?}");
        assert!(got.is_none_or(|(c, _)| c == "0123abc"), "{status:?}");
    }
    let mut view = View::new(Theme::new(false, true), 80);
    let status = "checking mutation 0123456: paths";
    assert!(view.gate_status(status).is_empty(), "no mutation asked for");
    view.event(&ev(r#"{"type":"mutation.requested","candidate":"0123456789ab"}"#));
    assert!(view.gate_status("checking mutation fedcba9: paths").is_empty(), "another's");
    assert_eq!(text(&view.gate_status(status)), ["  gate paths …"]);
    assert!(view.gate_status(status).is_empty(), "said once");
    assert_eq!(view.doing, Doing::Mutating(Some("paths".into())));
    let two = "checking mutation 0123456: kernel tests, body tests";
    assert_eq!(text(&view.gate_status(two)), ["  gate kernel tests, body tests …"]);
    view.event(&ev(r#"{"type":"mutation.check","check":"kernel tests","result":"passed"}"#));
    assert!(view.gate_status(two).is_empty(), "one check of the two ended: not said again");
    let timed = "checking mutation 0123456: body-tests (about 40 s, from the last run)";
    assert_eq!(
        text(&view.gate_status(timed)),
        ["  gate body-tests (about 40 s, from the last run) …"]
    );
}

#[test]
fn a_retry_can_be_interrupted() {
    let mut view = View::new(Theme::new(false, true), 80);
    view.event(&ev(r#"{"type":"owner.line","text":"go"}"#));
    view.event(&ev(
        r#"{"type":"model.retry","message":"m","retry":3,"seconds":300,"ts":"1970-01-01T00:00:00Z"}"#,
    ));
    assert_eq!(view.doing, Doing::Retrying { retry: 3, at: Some(300_000) });
    assert!(view.doing.interruptible());
}

/// What talk shows is what the kinds say it shows: an event of every kind,
/// with every field either client reads, prints something in one of the
/// two forms exactly when its kind is [`EventKind::shown_in_talk`]; and
/// the look back passes over unread only kinds that neither shows nor
/// says anything of what the agent does.
#[test]
fn talk_shows_what_the_kinds_say() {
    for &kind in EventKind::ALL {
        let line = serde_json::json!({
            "type": kind.name(), "seq": 1, "ts": "2026-01-01T00:00:00.000Z", "commit": "c0ffee",
            "text": "words", "name": "bash", "id": "1", "input": {}, "output": "out",
            "error": true, "status": "exit status 1", "source": "clock", "candidate": "abc",
            "check": "build", "result": "failed", "from": "a", "to": "b", "reason": "why",
            "message": "busy", "retry": 1, "seconds": 1, "kind": "k", "data": 1,
        });
        let e = ev(&line.to_string());
        let mut view = View::new(Theme::new(false, true), 80);
        view.event(&ev(r#"{"type":"tool.call","id":"1","name":"bash","input":{}}"#));
        let full = !view.event(&e).is_empty();
        let plain = crate::talk::render::render(&e, 80).is_some();
        assert_eq!(full || plain, kind.shown_in_talk(), "{kind}: full {full}, plain {plain}");
        let unread = crate::talk::turns::passed_over(kind);
        assert!(!unread || !(full || plain), "{kind} is shown, yet passed over");
    }
    assert!(crate::talk::turns::passed_over(EventKind::Note));
    assert!(!crate::talk::turns::passed_over(EventKind::TurnEnded));
    assert!(!crate::talk::turns::passed_over(EventKind::Reply));
}
