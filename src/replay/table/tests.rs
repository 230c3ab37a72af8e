use super::*;
use teneral_core::journal::parse_line;

fn tool(name: &str, failed: bool) -> Action {
    Action::Tool { name: name.into(), failed: Some(failed) }
}

fn reply(text: &str) -> Action {
    Action::Reply(text.into())
}

fn run(actions: Vec<Action>, reply_seconds: Option<f64>, ending: Ending) -> Run {
    Run { actions, reply_seconds, run_seconds: reply_seconds.unwrap_or(1.0) + 0.5, ending }
}

#[test]
fn the_first_difference() {
    use Ending::{BodyEnded, NotRun, TimeUp, TurnEnded};
    let hi = || reply("Hi.");
    type Case = (&'static str, Run, Run, Option<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "the same, times aside",
            run(vec![hi()], Some(0.2), TurnEnded),
            run(vec![hi()], Some(0.9), TurnEnded),
            None,
        ),
        (
            "B calls a tool first",
            run(vec![hi()], Some(0.2), TurnEnded),
            run(vec![tool("number", true), hi()], Some(0.3), TurnEnded),
            Some("step 1: A replied \"Hi.\", B called number (failed)"),
        ),
        (
            "other words",
            run(vec![tool("ls", false), hi()], None, TurnEnded),
            run(vec![tool("ls", false), reply("Hello.")], None, TurnEnded),
            Some("step 2: A replied \"Hi.\", B replied \"Hello.\""),
        ),
        (
            "the same tool, one fails",
            run(vec![tool("ls", false)], None, TurnEnded),
            run(vec![tool("ls", true)], None, TurnEnded),
            Some("step 1: A called ls, B called ls (failed)"),
        ),
        (
            "B stops short",
            run(vec![tool("ls", false), hi()], Some(1.0), TurnEnded),
            run(vec![tool("ls", false)], None, BodyEnded("exit status 7".into())),
            Some("step 2: A replied \"Hi.\", B ended (exit status 7)"),
        ),
        (
            "the same actions, another ending",
            run(vec![], None, TimeUp(30)),
            run(vec![], None, TurnEnded),
            Some("step 1: A did nothing more within 30 s, B ended its turn"),
        ),
        (
            "a call with no result",
            run(vec![Action::Tool { name: "sh".into(), failed: None }], None, TimeUp(5)),
            run(vec![], None, NotRun("cannot start the body".into())),
            Some("step 1: A called sh (no result), B did not run (cannot start the body)"),
        ),
        (
            "a tool name with controls in it",
            run(vec![tool("x\u{1b}[2Jy", false)], None, TurnEnded),
            run(vec![], None, TurnEnded),
            Some("step 1: A called x [2Jy, B ended its turn"),
        ),
        (
            "long words are cut",
            run(vec![reply(&"a".repeat(50))], None, TurnEnded),
            run(vec![reply("b\nc")], None, TurnEnded),
            Some(
                "step 1: A replied \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…\", B replied \"b c\"",
            ),
        ),
    ];
    for (what, a, b, want) in cases {
        assert_eq!(first_difference(&a, &b).as_deref(), want, "{what}");
    }
}

#[test]
fn the_figures() {
    let runs = [
        run(vec![tool("a", true), reply("x")], Some(0.4), Ending::TurnEnded),
        run(vec![tool("a", false), tool("b", true), reply("y")], Some(0.2), Ending::TurnEnded),
        run(vec![], None, Ending::TimeUp(9)),
    ];
    let all: Vec<&Run> = runs.iter().collect();
    let f = figures(&all);
    assert_eq!((f.replied, f.tool_calls, f.failed), (2, 3, 2));
    assert_eq!(f.median_reply_seconds, Some(0.30000000000000004));
    // 0.9 + 0.7 + 1.5 over three
    assert!((f.mean_run_seconds.unwrap_or_default() - 3.1 / 3.0).abs() < 1e-9);
    let odd = figures(&all[..1]);
    assert_eq!(odd.median_reply_seconds, Some(0.4));
    let none = figures(&[]);
    assert_eq!((none.replied, none.median_reply_seconds, none.mean_run_seconds), (0, None, None));
}

#[test]
fn actions_from_a_throwaway_journal() {
    let lines = [
        r#"{"type":"birth","seq":0,"text":"x"}"#,
        r#"{"type":"reply","seq":1,"text":"before the stimulus"}"#,
        r#"{"type":"owner.line","seq":2,"text":"hi","file":"a.txt"}"#,
        r#"{"type":"tool.call","seq":3,"id":"c1","name":"ls","input":{}}"#,
        r#"{"type":"tool.call","seq":4,"id":"c2","name":"cat","input":{}}"#,
        r#"{"type":"tool.result","seq":5,"id":"c2","output":"no","error":true}"#,
        r#"{"type":"tool.result","seq":6,"id":"c1","output":"ok"}"#,
        r#"{"type":"tool.call","seq":7,"id":"c3","name":"sh","input":{}}"#,
        r#"{"type":"reply","seq":8,"text":"done"}"#,
        r#"{"type":"tool.result","seq":9,"id":"unknown","output":"?","error":true}"#,
        r#"{"type":"turn.ended","seq":10}"#,
    ];
    let events: Vec<_> = lines.iter().filter_map(|l| parse_line(l.as_bytes())).collect();
    assert_eq!(
        actions_of(&events, 1),
        vec![
            tool("ls", false),
            tool("cat", true),
            Action::Tool { name: "sh".into(), failed: None },
            reply("done"),
        ]
    );
}

fn report() -> Report {
    let a = run(vec![reply("Answer one.")], Some(0.25), Ending::TurnEnded);
    let b = run(vec![tool("number", true), reply("Answer one.")], Some(0.5), Ending::TurnEnded);
    let same = run(vec![reply("Same.")], Some(0.125), Ending::TurnEnded);
    Report {
        from: "a".repeat(40),
        to: "b".repeat(40),
        rows: vec![
            Row { stimulus: "hello".into(), seq: 7, scripted: true, a, b },
            Row { stimulus: "21".into(), seq: 12, scripted: false, a: same.clone(), b: same },
        ],
        smoke_seconds: None,
    }
}

#[test]
fn the_table() {
    let want = [
        "replay of 2 stimuli: A = aaaaaaa, B = bbbbbbb (the stand-in model; nothing of the individual changed)",
        "  #  stimulus                 | A rep tools failed           time | B rep tools failed           time",
        "  1  \"hello\"                  | yes       0 -              0.25 s | yes       1 number         0.50 s",
        "     step 1: A replied \"Answer one.\", B called number (failed)",
        "  2  \"21\"                     | yes       0 -              0.12 s | yes       0 -              0.12 s",
        "     the same",
        "A: replied 2/2, 0 tool calls, 0 failed, median time to reply 0.19 s, 0.69 s a stimulus",
        "B: replied 2/2, 1 tool calls, 1 failed, median time to reply 0.31 s, 0.81 s a stimulus",
        "time: from the stimulus taken in to the first reply",
    ];
    assert_eq!(text(&report()), want);
    let timed = Report { smoke_seconds: Some(1.5), ..report() };
    let lines = text(&timed);
    assert_eq!(lines[lines.len() - 2], "one smoke run of A, as the gate makes it: 1.50 s");
}

#[test]
fn the_json() {
    let value = to_json(&report());
    assert_eq!(value["from"], json!("a".repeat(40)));
    assert_eq!(
        value["rows"][0],
        json!({
            "seq": 7, "stimulus": "hello", "scripted": true,
            "a": {"replied": true, "tool_calls": [], "failed": [], "reply_seconds": 0.25,
                  "run_seconds": 0.75, "ending": "turn.ended",
                  "actions": [{"reply": "Answer one."}]},
            "b": {"replied": true, "tool_calls": ["number"], "failed": ["number"],
                  "reply_seconds": 0.5, "run_seconds": 1.0, "ending": "turn.ended",
                  "actions": [{"tool": "number", "failed": true}, {"reply": "Answer one."}]},
            "first_difference": "step 1: A replied \"Answer one.\", B called number (failed)",
        })
    );
    assert_eq!(value["rows"][1]["first_difference"], Value::Null);
    assert_eq!(value["smoke_seconds"], Value::Null);
    assert_eq!(
        value["figures"]["b"],
        json!({"replied": 2, "tool_calls": 1, "failed": 1, "median_reply_seconds": 0.3125,
               "mean_run_seconds": 0.8125})
    );
}
