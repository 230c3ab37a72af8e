//! Reading what a rig's run left: the journal's and the stand-in's request
//! log's lines, and questions the tests ask of them.

use std::fs;
use std::path::Path;

use serde_json::Value;

/// The JSON lines of `path` (none when it is missing; a line that is not
/// JSON is skipped).
pub(super) fn read_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The events of one type.
pub fn of<'a>(journal: &'a [Value], kind: &str) -> Vec<&'a Value> {
    journal.iter().filter(|e| e["type"] == kind).collect()
}

pub fn has(journal: &[Value], kind: &str) -> bool {
    journal.iter().any(|e| e["type"] == kind)
}

pub fn count(journal: &[Value], kind: &str) -> usize {
    of(journal, kind).len()
}

/// The types of the journal in order, for whole-sequence assertions.
pub fn types(journal: &[Value]) -> Vec<&str> {
    journal.iter().map(|e| e["type"].as_str().unwrap_or("?")).collect()
}

/// The request body of a logged request (the log may hold it as text).
pub fn body_of(request: &Value) -> Value {
    match &request["body"] {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}
