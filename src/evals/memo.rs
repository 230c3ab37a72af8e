//! The kept results: one JSON file per (body tree, evaluation hash) in
//! `.teneral/evals/`, which no body's cage holds. A body is a program of
//! its `body/` tree alone (the build reads nothing else), and an evaluation
//! is its file's bytes, so a result kept under both is the result a new run
//! would be asked for. Only decided results are kept: a run that could not
//! be made or ran out of time is run again next time.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::checks::Outcome;
use super::Record;

/// Where the results are kept, in the individual.
pub const MEMO_DIR: &str = ".teneral/evals";

/// The kept results of one individual.
pub struct Memo {
    dir: PathBuf,
}

impl Memo {
    pub fn at(home: &Path) -> Memo {
        Memo { dir: home.join(MEMO_DIR) }
    }

    fn path(&self, body_tree: &str, hash: &str) -> Option<PathBuf> {
        let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
        (hex(body_tree) && hex(hash)).then(|| self.dir.join(format!("{body_tree}-{hash}.json")))
    }

    /// The result kept for `hash` on a body of `body_tree`.
    pub fn get(&self, body_tree: &str, hash: &str) -> Option<Record> {
        let bytes = std::fs::read(self.path(body_tree, hash)?).ok()?;
        let value: Value = serde_json::from_slice(&bytes).ok()?;
        from_json(&value).filter(|r| r.hash == hash)
    }

    /// Keeps `record`, decided, for a body of `body_tree`; a failure to
    /// keep it costs only a run next time.
    pub fn put(&self, body_tree: &str, record: &Record) {
        if matches!(record.outcome, Outcome::Undecided(_)) {
            return;
        }
        let Some(path) = self.path(body_tree, &record.hash) else { return };
        let _ = std::fs::create_dir_all(&self.dir);
        let _ = teneral_core::fsutil::write_atomic(&path, to_json(record).to_string().as_bytes());
    }
}

fn to_json(r: &Record) -> Value {
    let (check, said) = match &r.outcome {
        Outcome::Failed { check, said } => (Some(*check), Some(said.clone())),
        _ => (None, None),
    };
    json!({
        "name": r.name, "hash": r.hash, "result": r.outcome.word(),
        "failed": check, "said": said,
        "checks": r.checks.iter().map(|(c, f)| json!([c, f])).collect::<Vec<_>>(),
        "tokens": r.tokens, "seconds": r.seconds, "reply_seconds": r.reply_seconds,
        "budget": r.budget,
    })
}

fn from_json(v: &Value) -> Option<Record> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let outcome = match v.get("result")?.as_str()? {
        "passed" => Outcome::Passed,
        "failed" => Outcome::Failed {
            check: usize::try_from(v.get("failed")?.as_u64()?).ok()?,
            said: text("said")?,
        },
        _ => return None,
    };
    let checks = v
        .get("checks")?
        .as_array()?
        .iter()
        .map(|pair| {
            let words = pair.get(0)?.as_str()?.to_owned();
            let failed = pair.get(1)?.as_str().map(str::to_owned);
            Some((words, failed))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Record {
        name: text("name")?,
        hash: text("hash")?,
        outcome,
        checks,
        tokens: v.get("tokens")?.as_u64()?,
        seconds: v.get("seconds")?.as_f64()?,
        reply_seconds: v.get("reply_seconds").and_then(Value::as_f64),
        budget: v.get("budget").and_then(Value::as_u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_and_read_back_decided_only() {
        let dir = tempfile::tempdir().unwrap();
        let memo = Memo::at(dir.path());
        let failed = Record {
            name: "a".into(),
            hash: "ab12".into(),
            outcome: Outcome::Failed { check: 1, said: "x was not called".into() },
            checks: vec![
                ("tool_called \"y\"".into(), None),
                ("tool_called \"x\"".into(), Some("x was not called".into())),
            ],
            tokens: 12,
            seconds: 1.25,
            reply_seconds: Some(0.5),
            budget: Some(1000),
        };
        memo.put("cd34", &failed);
        assert_eq!(memo.get("cd34", "ab12"), Some(failed.clone()));
        assert_eq!(memo.get("cd35", "ab12"), None, "another body");
        assert_eq!(memo.get("cd34", "ab13"), None, "another evaluation");
        let undecided =
            Record { hash: "ef56".into(), outcome: Outcome::Undecided("time".into()), ..failed };
        memo.put("cd34", &undecided);
        assert_eq!(memo.get("cd34", "ef56"), None, "an undecided result is not kept");
        assert_eq!(memo.get("../x", "ab12"), None, "not a tree id");
    }
}
