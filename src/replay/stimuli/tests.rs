use super::*;
use teneral_core::journal::parse_line;

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn collect(lines: &[&str], last: usize) -> (Vec<Stimulus>, Lineage) {
    let mut collector = Collector::new(last);
    for line in lines {
        if let Some(event) = parse_line(line.as_bytes()) {
            collector.take(&event);
        }
    }
    collector.finish()
}

fn step(reply: Option<&str>, calls: &[(&str, Value)]) -> Step {
    Step {
        reply: reply.map(str::to_owned),
        calls: calls.iter().map(|(n, i)| ((*n).to_owned(), i.clone())).collect(),
    }
}

#[test]
fn stimuli_and_what_the_model_answered() {
    let envelope = r#"{"v":1,"id":"n1","from":"peer","to":"me","ts":"t","text":"ping"}"#;
    let lines = [
        r#"{"type":"kernel.started","seq":0,"commit":"A"}"#,
        r#"{"type":"owner.line","seq":1,"text":"first","file":"1.txt"}"#,
        r#"{"type":"reply","seq":2,"text":"one"}"#,
        r#"{"type":"turn.ended","seq":3}"#,
        r#"{"type":"owner.line","seq":4,"text":"second","file":"2.txt"}"#,
        // The model's words and two calls in one answer, a result, the
        // body's own call, then the last answer.
        r#"{"type":"reply","seq":5,"text":"let me look"}"#,
        r#"{"type":"tool.call","seq":6,"id":"c1","name":"ls","input":{"path":"."},"index":0}"#,
        r#"{"type":"tool.call","seq":7,"id":"c2","name":"cat","input":"raw","index":1}"#,
        r#"{"type":"tool.result","seq":8,"id":"c1","output":"x"}"#,
        r#"{"type":"tool.call","seq":9,"id":"own","name":"mine","input":{}}"#,
        r#"{"type":"tool.call","seq":10,"id":"c3","name":"sh","input":{},"index":0}"#,
        r#"{"type":"tool.result","seq":11,"id":"c3","output":"y"}"#,
        r#"{"type":"reply","seq":12,"text":"the body speaks","from":"body"}"#,
        r#"{"type":"reply","seq":13,"text":"done"}"#,
        r#"{"type":"turn.ended","seq":14}"#,
        r#"{"type":"reply","seq":15,"text":"outside any turn"}"#,
        r#"{"type":"stimulus","seq":16,"source":"clock","text":"tick"}"#,
        &format!(
            r#"{{"type":"stimulus","seq":17,"source":"inbox","text":"ping","envelope":{envelope}}}"#
        ),
        r#"{"type":"turn.interrupted","seq":18}"#,
        r#"{"type":"reply","seq":19,"text":"after the interrupt"}"#,
        "{\"type\":\"owner.line\",\"seq\":20,\"text\":\"torn",
    ];
    let (all, _) = collect(&lines, 10);
    let envelope: Map<String, Value> = serde_json::from_str(envelope).expect("an envelope");
    assert_eq!(
        all,
        vec![
            Stimulus {
                seq: 1,
                kind: Kind::Line("first".into()),
                script: vec![step(Some("one"), &[])]
            },
            Stimulus {
                seq: 4,
                kind: Kind::Line("second".into()),
                script: vec![
                    step(
                        Some("let me look"),
                        &[("ls", json!({"path": "."})), ("cat", json!("raw"))]
                    ),
                    step(None, &[("sh", json!({}))]),
                    step(Some("done"), &[]),
                ],
            },
            Stimulus { seq: 17, kind: Kind::Envelope(envelope), script: vec![] },
        ]
    );
    assert_eq!(all[2].text(), "ping");
    assert_eq!(all[2].script_text(), None, "no answer: the stand-in's default");
    assert_eq!(
        all[1].script_text().as_deref(),
        Some(concat!(
            r#"{"reply":"let me look","tool_calls":[{"name":"ls","arguments":{"path":"."}},{"name":"cat","arguments":"raw"}]}"#,
            "\n",
            r#"{"tool_calls":[{"name":"sh","arguments":{}}]}"#,
            "\n",
            r#"{"reply":"done"}"#,
            "\n"
        ))
    );
    // Every line of the script is one the stand-in takes.
    let script = all[1].script_text().unwrap_or_default();
    assert!(crate::standin::Script::parse(&script).is_ok_and(|s| s.remaining() == 3));
}

#[test]
fn only_the_last_are_kept() {
    let lines: Vec<String> = (0..7)
        .map(|i| format!(r#"{{"type":"owner.line","seq":{i},"text":"line {i}","file":"f"}}"#))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (kept, _) = collect(&refs, 3);
    let texts: Vec<&str> = kept.iter().map(Stimulus::text).collect();
    assert_eq!(texts, ["line 4", "line 5", "line 6"]);
    assert!(collect(&refs, 0).0.is_empty());
}

#[test]
fn a_turn_is_kept_to_its_bound() {
    let mut lines = vec![r#"{"type":"owner.line","seq":0,"text":"go","file":"f"}"#.to_owned()];
    for i in 0..MAX_STEPS + 10 {
        lines.push(format!(r#"{{"type":"reply","seq":{},"text":"r"}}"#, i + 1));
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(collect(&refs, 1).0[0].script.len(), MAX_STEPS);
}

#[test]
fn names_of_generations() {
    let commits = [A, B, "bbbbbbbcccccccccccccccccccccccccccccccccc"];
    let known = |c: &str| Ok(Named::Known(c.to_owned()));
    type Case = (&'static str, Result<Named, NameError>);
    let cases: Vec<Case> = vec![
        ("1", known(A)),
        ("#2", known(B)),
        (" current ", known(B)),
        ("aaaaaaa", known(A)),
        ("AAAAAAAAAA", known(A)),
        ("bbbbbbbb", known(B)),
        ("ddddddd", Ok(Named::Prefix("ddddddd".into()))),
        ("1234567", Ok(Named::Prefix("1234567".into()))),
        ("4", Err(NameError::NoSuchNumber { given: "4".into(), count: 3 })),
        ("0", Err(NameError::NoSuchNumber { given: "0".into(), count: 3 })),
        ("abc", Err(NameError::Bad("abc".into()))),
        ("#abcdefg", Err(NameError::Bad("#abcdefg".into()))),
        ("main", Err(NameError::Bad("main".into()))),
        ("HEAD~1", Err(NameError::Bad("HEAD~1".into()))),
        (
            "bbbbbbb",
            Err(NameError::Ambiguous {
                given: "bbbbbbb".into(),
                matches: "bbbbbbb, bbbbbbb".into(),
            }),
        ),
    ];
    for (given, want) in cases {
        assert_eq!(resolve(given, &commits, Some(B)), want, "{given}");
    }
    assert_eq!(resolve("current", &[], None), Err(NameError::NoCurrent));
}

#[test]
fn the_lineage_comes_with_the_stimuli() {
    let lines = [
        &format!(r#"{{"type":"kernel.started","seq":0,"commit":"{A}"}}"#) as &str,
        &format!(
            r#"{{"type":"mutation.accepted","seq":1,"commit":"{A}","from":"{A}","to":"{B}"}}"#
        ),
    ];
    let (_, lineage) = collect(&lines, 5);
    let commits: Vec<&str> = lineage.generations().iter().map(|g| g.commit.as_str()).collect();
    assert_eq!(commits, [A, B]);
    assert_eq!(lineage.current().map(|g| g.commit.as_str()), Some(B));
}
