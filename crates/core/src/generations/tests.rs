//! Table tests of the lineage: which generation is current, which is before
//! it, and what `back` may go to.

use serde_json::{json, Value};

use super::*;
use crate::journal::parse_line;

/// A commit: one letter forty times, or a longer head padded with zeros.
fn commit(head: &str) -> String {
    match head.len() {
        1 => head.repeat(40),
        _ => format!("{head:0<40}"),
    }
}

/// One journal line as the kernel writes it.
fn event(kind: &str, by: &str, fields: Value) -> Event {
    let mut line =
        json!({"type": kind, "ts": format!("t-{kind}-{by}"), "seq": 1, "commit": commit(by)});
    if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
        line.extend(fields);
    }
    parse_line(line.to_string().as_bytes()).unwrap_or_else(|| panic!("not an event: {line}"))
}

/// A compact journal: `started A`, `ready A`, `reply A`, `accepted A B`,
/// `rolledback B A`, `sentback B A`.
fn journal(steps: &[&str]) -> Lineage {
    let mut lineage = Lineage::new();
    for step in steps {
        let words: Vec<&str> = step.split(' ').collect();
        let moved = |kind: &str| {
            let (from, to) = (commit(words[1]), commit(words[2]));
            event(kind, words[1], json!({"from": from, "to": to, "reason": "r", "by": "owner"}))
        };
        let e = match words[0] {
            "started" => event("kernel.started", words[1], json!({"pid": 1})),
            "ready" => event("generation.ready", words[1], json!({})),
            "reply" => event("reply", words[1], json!({"text": "hi"})),
            "accepted" => moved("mutation.accepted"),
            "rolledback" => moved("generation.rolledback"),
            "sentback" => moved("generation.sentback"),
            other => panic!("unknown step {other}"),
        };
        lineage.take(&e);
    }
    lineage
}

const LIVED: &[&str] = &[
    "started a",
    "ready a",
    "reply a",
    "accepted a b",
    "ready b",
    "reply b",
    "reply b",
    "accepted b c",
    "ready c",
];

#[test]
fn back_goes_where_the_rules_say() {
    let lived = |more: &[&'static str]| [LIVED, more].concat();
    type Case = (&'static str, Vec<&'static str>, Option<&'static str>, Result<String, Refusal>);
    let table: Vec<Case> = vec![
        ("a promotion is gone back from", lived(&[]), None, Ok(commit("b"))),
        ("after a rollback, one further", lived(&["rolledback c b"]), None, Ok(commit("a"))),
        (
            "a send-back pops to its target",
            lived(&["sentback c a"]),
            Some("bbbbbbb"),
            Ok(commit("b")),
        ),
        (
            "nothing below the birth generation",
            lived(&["sentback c a"]),
            None,
            Err(Refusal::NothingBefore { current: "aaaaaaa".into() }),
        ),
        (
            "the current one",
            lived(&[]),
            Some("ccccccc"),
            Err(Refusal::IsCurrent { commit: "ccccccc".into() }),
        ),
        (
            "never ready",
            [LIVED, &["accepted c d", "rolledback d c"]].concat(),
            Some("ddddddd"),
            Err(Refusal::NeverReady { commit: "ddddddd".into() }),
        ),
        (
            "a prefix too short",
            lived(&[]),
            Some("aaaaaa"),
            Err(Refusal::BadName { given: "aaaaaa".into() }),
        ),
        ("not hex", lived(&[]), Some("aaaaaaz"), Err(Refusal::BadName { given: "aaaaaaz".into() })),
        ("unknown", lived(&[]), Some("1234567"), Err(Refusal::Unknown { given: "1234567".into() })),
        ("upper case is read as lower", lived(&[]), Some("AAAAAAA"), Ok(commit("a"))),
        (
            "a whole commit",
            lived(&[]),
            Some("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
            Ok(commit("b")),
        ),
        ("no journal", vec![], None, Err(Refusal::NoGeneration)),
        (
            "only the birth generation",
            vec!["started a", "ready a"],
            None,
            Err(Refusal::NothingBefore { current: "aaaaaaa".into() }),
        ),
        (
            "a kernel restarted on the same generation changes nothing",
            lived(&["started c", "ready c"]),
            None,
            Ok(commit("b")),
        ),
        (
            "a kernel started on an older one goes there",
            lived(&["started b"]),
            None,
            Ok(commit("a")),
        ),
    ];
    for (what, steps, name, want) in table {
        let lineage = journal(&steps);
        let got = lineage.choose(name, |_| true).map(|g| g.commit.clone());
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn a_prefix_must_name_one_generation() {
    let (one, two) = ("abcdef01", "abcdef02");
    let steps = [
        format!("started {one}"),
        format!("ready {one}"),
        format!("accepted {one} {two}"),
        format!("ready {two}"),
        format!("accepted {two} c"),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let lineage = journal(&steps);
    let got = lineage.choose(Some("abcdef0"), |_| true).map(|g| g.commit.clone());
    let matches = format!("{}, {}", commit(one), commit(two));
    assert_eq!(got, Err(Refusal::Ambiguous { given: "abcdef0".into(), matches }));
    let got = lineage.choose(Some("abcdef02"), |_| true).map(|g| g.commit.clone());
    assert_eq!(got, Ok(commit(two)));
}

#[test]
fn a_commit_git_no_longer_has_is_refused() {
    let lineage = journal(LIVED);
    let b = commit("b");
    let got = lineage.choose(None, |c| c != b).map(|g| g.commit.clone());
    assert_eq!(got, Err(Refusal::Gone { commit: "bbbbbbb".into() }));
    let got = lineage.choose(Some("aaaaaaa"), |c| c != b).map(|g| g.commit.clone());
    assert_eq!(got, Ok(commit("a")), "another one is still there");
}

#[test]
fn each_generation_keeps_its_first_ready_and_counts_its_replies() {
    let lineage =
        journal(&[LIVED, &["rolledback c b", "started b", "ready b", "reply b"]].concat());
    let seen: Vec<(String, Option<String>, u64)> = lineage
        .generations()
        .iter()
        .map(|g| (g.short().to_owned(), g.ready_at.clone(), g.replies))
        .collect();
    let ready = |c: &str| Some(format!("t-generation.ready-{c}"));
    assert_eq!(
        seen,
        [
            ("aaaaaaa".to_owned(), ready("a"), 1),
            ("bbbbbbb".to_owned(), ready("b"), 3),
            ("ccccccc".to_owned(), ready("c"), 0),
        ]
    );
    assert_eq!(lineage.current().map(Generation::short), Some("bbbbbbb"));
    assert_eq!(lineage.before().map(Generation::short), Some("aaaaaaa"));
}

#[test]
fn refusals_say_what_to_do() {
    let all = [
        Refusal::NoGeneration,
        Refusal::NothingBefore { current: "a".into() },
        Refusal::BadName { given: "x".into() },
        Refusal::Unknown { given: "x".into() },
        Refusal::Ambiguous { given: "x".into(), matches: "y, z".into() },
        Refusal::IsCurrent { commit: "a".into() },
        Refusal::NeverReady { commit: "a".into() },
        Refusal::Gone { commit: "a".into() },
    ];
    for refusal in all {
        let text = refusal.to_string();
        let says = ["teneralctl back", "give more", "nothing to do", "no generation yet"];
        assert!(says.iter().any(|s| text.contains(s)), "{text}");
    }
}
