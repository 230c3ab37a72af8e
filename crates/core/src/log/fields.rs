//! Who a line is about, and how loud it is: what every journald entry of
//! the kernel carries besides its text, so that
//! `journalctl TENERAL_INDIVIDUAL=/srv/agents/ada -p warning` selects one
//! individual's warnings and errors.
//!
//! - `TENERAL_INDIVIDUAL`: the individual's directory, as `teneral run --dir`
//!   resolved it;
//! - `TENERAL_COMMIT`: the generation's full commit;
//! - `TENERAL_GENERATION`: its ordinal, 1 for the birth generation and one
//!   more for each generation the individual comes to for the first time
//!   (a generation gone back to keeps its number), the order of
//!   [`Lineage::generations`];
//! - `PRIORITY`: from the kind of line ([`event_priority`], [`level_priority`]).
//!
//! The decisions here are pure; the state they fill is set by the kernel at
//! its start ([`super::set_individual`], [`super::set_lineage`]) and at each
//! switch of generation ([`super::set_commit`]).

use std::collections::HashMap;

use super::Priority;
use crate::generations::Lineage;
use crate::journal::EventKind;

/// What the kernel is about, put on every entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    pub individual: Option<String>,
    pub commit: Option<String>,
    pub ordinal: Option<u64>,
    /// Every generation's ordinal, by commit.
    ordinals: HashMap<String, u64>,
}

impl Identity {
    /// Takes in the generations the journal records, oldest first; the
    /// journal's order replaces any ordinal given before.
    pub fn learn(&mut self, lineage: &Lineage) {
        self.ordinals.clear();
        for generation in lineage.generations() {
            let next = self.ordinals.len() as u64 + 1;
            self.ordinals.entry(generation.commit.clone()).or_insert(next);
        }
        if let Some(commit) = self.commit.clone() {
            self.switch(&commit);
        }
    }

    /// Makes `commit` the generation the lines are about; a commit not seen
    /// before gets the next ordinal, as the journal will give it once the
    /// switch is journaled.
    pub fn switch(&mut self, commit: &str) {
        let next = self.ordinals.len() as u64 + 1;
        let ordinal = *self.ordinals.entry(commit.to_owned()).or_insert(next);
        self.commit = Some(commit.to_owned());
        self.ordinal = Some(ordinal);
    }
}

/// The priority of a line about a journal event of `kind`, as the kind
/// has it ([`EventKind::priority`]).
pub fn event_priority(kind: EventKind) -> Priority {
    kind.priority()
}

/// The priority of a body's `log` event of `level` (syslog's names and the
/// usual short ones; anything else is info).
pub fn level_priority(level: &str) -> Priority {
    match level.to_ascii_lowercase().as_str() {
        "emerg" | "alert" | "crit" | "critical" | "fatal" | "err" | "error" => Priority::Error,
        "warn" | "warning" => Priority::Warning,
        "notice" => Priority::Notice,
        "debug" | "trace" => Priority::Debug,
        _ => Priority::Info,
    }
}

/// The unit a process runs in, from its `/proc/<pid>/cgroup`: the last
/// `*.service` component of the unified (`0::`) or `name=systemd` line.
pub fn unit_in_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (_, rest) = line.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        if !(controllers.is_empty() || controllers == "name=systemd") {
            return None;
        }
        path.rsplit('/').find(|part| part.ends_with(".service")).map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;

    fn event(kind: &str, commit: &str, fields: serde_json::Value) -> Event {
        let mut line = serde_json::json!({"seq": 1, "ts": "t", "type": kind, "commit": commit});
        if let (Some(line), Some(fields)) = (line.as_object_mut(), fields.as_object()) {
            line.extend(fields.clone());
        }
        crate::journal::reader::parse_line(line.to_string().as_bytes()).expect("a journal line")
    }

    #[test]
    fn ordinals_follow_the_journal_and_a_new_generation_gets_the_next() {
        let mut lineage = Lineage::new();
        for e in [
            event("kernel.started", "a", serde_json::json!({})),
            event("mutation.accepted", "a", serde_json::json!({"from": "a", "to": "b"})),
            event("mutation.accepted", "b", serde_json::json!({"from": "b", "to": "c"})),
            event("generation.rolledback", "c", serde_json::json!({"from": "c", "to": "b"})),
        ] {
            lineage.take(&e);
        }
        let mut id = Identity::default();
        id.switch("b");
        id.learn(&lineage);
        assert_eq!((id.commit.as_deref(), id.ordinal), (Some("b"), Some(2)), "learned late");
        let table = [("a", 1), ("c", 3), ("d", 4), ("b", 2), ("d", 4), ("e", 5)];
        for (commit, ordinal) in table {
            id.switch(commit);
            assert_eq!(id.ordinal, Some(ordinal), "{commit}");
        }
    }

    #[test]
    fn priorities() {
        let events = [
            ("generation.exited", Priority::Warning),
            ("generation.rolledback", Priority::Warning),
            ("mutation.rejected", Priority::Warning),
            ("mutation.accepted", Priority::Notice),
            ("kernel.started", Priority::Notice),
        ];
        for (kind, want) in events {
            let known = EventKind::parse(kind).expect("a kind");
            assert_eq!(event_priority(known), want, "{kind}");
        }
        let levels = [
            ("error", Priority::Error),
            ("ERR", Priority::Error),
            ("crit", Priority::Error),
            ("warn", Priority::Warning),
            ("Warning", Priority::Warning),
            ("notice", Priority::Notice),
            ("info", Priority::Info),
            ("debug", Priority::Debug),
            ("shouting", Priority::Info),
        ];
        for (level, want) in levels {
            assert_eq!(level_priority(level), want, "{level}");
        }
    }

    #[test]
    fn the_unit_is_read_from_the_cgroup() {
        let table = [
            ("0::/user.slice/user-0.slice/user@0.service/app.slice/teneral.service\n",
             Some("teneral.service")),
            ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/teneral@-srv-ada.service\n",
             Some("teneral@-srv-ada.service")),
            ("9:name=systemd:/user.slice/user-0.slice/user@0.service/teneral.service\n4:memory:/x\n0::/\n",
             Some("teneral.service")),
            ("0::/\n9:name=systemd:/user.slice/user-0.slice/user@0.service/teneral.service\n",
             Some("teneral.service")),
            ("0::/user.slice/user-0.slice/session-3.scope\n", None),
            ("0::/\n", None),
            ("", None),
        ];
        for (text, want) in table {
            assert_eq!(unit_in_cgroup(text).as_deref(), want, "{text:?}");
        }
    }
}
