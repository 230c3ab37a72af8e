//! `teneralctl back --list`: the generations of the journal, oldest first,
//! each with its commit's subject, when it became ready (and how long ago),
//! its replies and a mark on the current one; or the same as JSON.
//!
//! Pure over the lineage, a way to find a commit's subject and the time now.

use serde_json::{json, Value};

use crate::generations::Lineage;
use crate::talk::render::{cut, sanitize};
use crate::when::{duration, parse_ts};

/// A commit's subject (its first line), when the repository has it.
pub type Subjects<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One line per generation.
pub fn lines(lineage: &Lineage, subject: Subjects<'_>, now: i64) -> Vec<String> {
    let current = lineage.current().map(|g| g.commit.as_str());
    let when = |ts: &str| match (ts.get(..10), ts.get(11..19)) {
        (Some(day), Some(time)) => format!("ready {day} {time} UTC"),
        _ => format!("ready {ts}"),
    };
    let ago =
        |ts: &str| parse_ts(ts).map_or(String::new(), |t| format!("{} ago", duration(now - t)));
    lineage
        .generations()
        .iter()
        .map(|g| {
            let ready = g.ready_at.as_deref().map_or("never ready".to_owned(), when);
            let ago = g.ready_at.as_deref().map_or(String::new(), ago);
            let word = if g.replies == 1 { "reply" } else { "replies" }; // not an event kind: a word
            let replies = format!("{} {word}", g.replies);
            let about = subject(&g.commit).map_or(String::new(), |s| {
                format!("  {}", cut(&sanitize(&s).replace('\n', " "), 50))
            });
            let mark = if Some(g.commit.as_str()) == current { "  (current)" } else { "" };
            format!("{}  {ready:<29}  {ago:<11}  {replies:<11}{about}{mark}", g.short())
        })
        .collect()
}

/// The generations as a JSON array, times as the journal wrote them.
pub fn json(lineage: &Lineage, subject: Subjects<'_>) -> Value {
    let current = lineage.current().map(|g| g.commit.as_str());
    let all: Vec<Value> = lineage
        .generations()
        .iter()
        .map(|g| {
            json!({
                "commit": g.commit,
                "short": g.short(),
                "subject": subject(&g.commit),
                "ready_at": g.ready_at,
                "replies": g.replies,
                "current": Some(g.commit.as_str()) == current,
            })
        })
        .collect();
    Value::Array(all)
}

/// The subject of `commit` in the repository at `home`, sanitized.
pub fn subject_in(repo: Option<&git2::Repository>, commit: &str) -> Option<String> {
    let oid = git2::Oid::from_str(commit).ok()?;
    let found = repo?.find_commit(oid).ok()?;
    let subject = sanitize(found.summary()?).replace(['\n', '\t'], " ");
    Some(subject.trim().to_owned()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_line;

    fn lineage() -> Lineage {
        let mut l = Lineage::new();
        let events = [
            r#"{"type":"generation.ready","ts":"2026-11-30T10:00:00.000Z","seq":1,"commit":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#,
            r#"{"type":"reply","text":"hi","ts":"2026-11-30T10:00:01.000Z","seq":2,"commit":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#,
            r#"{"type":"mutation.accepted","from":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","to":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","ts":"2026-11-30T11:00:00.000Z","seq":3,"commit":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#,
        ];
        for e in events {
            l.take(&parse_line(e.as_bytes()).expect("an event"));
        }
        l
    }

    #[test]
    fn subjects_and_ages() {
        let subject =
            |c: &str| c.starts_with('a').then(|| "body: a first \u{1b}[31mstep".to_owned());
        let now = parse_ts("2026-11-30T13:00:00.000Z").expect("a time");
        let got = lines(&lineage(), &subject, now);
        assert_eq!(
            got,
            [
                "aaaaaaa  ready 2026-11-30 10:00:00 UTC  3 h ago      1 reply      body: a first step",
                "bbbbbbb  never ready                                 0 replies    (current)",
            ]
        );
        let value = json(&lineage(), &subject);
        assert_eq!(value[0]["ready_at"], "2026-11-30T10:00:00.000Z");
        assert_eq!(value[0]["subject"], "body: a first \u{1b}[31mstep");
        assert_eq!(value[1]["current"], true);
        assert_eq!(value[1]["subject"], Value::Null);
    }
}
