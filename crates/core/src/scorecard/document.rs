//! The scorecard of one individual, and the JSON it is shown as.

use serde_json::Value;

use super::{read, Figures};

/// The scorecard of the individual at `home` (its `memory/journal.jsonl`);
/// a missing journal has no generation. What the kernel calls to keep a
/// copy the body may read. The journal is opened following no link
/// (`journal::open_file`): a linked one is `ELOOP`.
pub fn of_individual(
    home: &std::path::Path,
    since: Option<String>,
) -> std::io::Result<Vec<Figures>> {
    let path = home.join(crate::journal::JOURNAL_PATH);
    match crate::journal::open_file(&path, crate::journal::Access::Read) {
        Ok(file) => read(file, since),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The figures as one JSON object, as `teneralctl generations --json`
/// prints them and as a copy the body may read would hold:
/// `{"generations": [...], "counted_by": ..., "latency": ...}`, each
/// generation with its `short` commit and `failure_rate` added.
pub fn document(all: &[Figures]) -> Value {
    let generations: Vec<Value> = all
        .iter()
        .map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("short".into(), Value::from(crate::commit::short(&f.commit)));
                o.insert("failure_rate".into(), Value::from(f.failure_rate()));
            }
            v
        })
        .collect();
    serde_json::json!({
        "generations": generations,
        "counted_by": "the kernel's journal; body_notes are the body's own words, not counted",
        "latency": format!(
            "owner line or stimulus to the first reply; exact up to {} turns per generation, \
             then within 1 %",
            super::latency::EXACT
        ),
    })
}
