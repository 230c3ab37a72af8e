//! The kill -9 suite's checks of the invariants of docs/design.md
//! ("Crashes") over a quiet individual, and its counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use super::scenario::Scenario;
use super::{lineage_of, state_of, verdicts_of};
use crate::common::*;

#[derive(Default, Debug)]
pub struct Counts {
    pub tried: usize,
    /// Kills made while the scenario was under way.
    pub mid_action: usize,
    /// The others: the kernel outlived its scenario and was killed after.
    pub not_mid_action: Vec<String>,
    pub random: usize,
    /// Random moments drawn again because the scenario ended before them.
    pub redrawn: usize,
    pub lines_lost: usize,
    pub lines_duplicated: usize,
    pub unanswered_or_twice: usize,
    /// The state against the lineage, or against the journal's last move.
    pub disagreements: usize,
    pub leftover_processes: usize,
    pub leftover_files: usize,
    /// Lines journaled with no answer after them and no word of a cut turn.
    pub lines_unanswered: usize,
    /// Individuals whose restart did not become ready.
    pub unstartable: usize,
    /// The named points the kernel died at.
    pub reached: BTreeSet<String>,
    /// The dry run's passes of each point, by scenario.
    pub passes: BTreeMap<Scenario, BTreeMap<String, u32>>,
    /// The system-call mode's dry run: the most calls of each durability
    /// call one kernel thread made, by scenario.
    pub calls: BTreeMap<Scenario, BTreeMap<String, u32>>,
}

impl Counts {
    /// The last round was a random moment after its scenario's end: it is
    /// not counted as a point, and its moment is drawn again.
    pub fn redraw(&mut self) {
        self.tried -= 1;
        self.random -= 1;
        self.not_mid_action.pop();
        self.redrawn += 1;
    }

    /// Prints the figures; fails unless every count is 0.
    pub fn report(&self, took: Duration) {
        let names: Vec<&str> = teneral_core::crash::POINTS.iter().map(|(n, _)| *n).collect();
        println!(
            "points tried: {} (named: {}, random moments: {}, drawn again: {})",
            self.tried,
            self.tried - self.random,
            self.random,
            self.redrawn
        );
        println!(
            "mid-action kills: {}; after the scenario had ended: {} {:?}",
            self.mid_action,
            self.not_mid_action.len(),
            self.not_mid_action
        );
        let missed: Vec<&str> =
            names.iter().copied().filter(|n| !self.reached.contains(*n)).collect();
        println!(
            "named points reached: {} of {}; not reached: {missed:?}",
            self.reached.len(),
            names.len()
        );
        println!("lines lost: {}", self.lines_lost);
        println!("lines duplicated: {}", self.lines_duplicated);
        println!("mutations without exactly one verdict: {}", self.unanswered_or_twice);
        println!("state/lineage/journal disagreements: {}", self.disagreements);
        println!("leftover processes: {}", self.leftover_processes);
        println!("leftover files: {}", self.leftover_files);
        println!("owner lines unanswered, with no word of a cut turn: {}", self.lines_unanswered);
        println!("restarts that did not become ready: {}", self.unstartable);
        println!("time: {took:?}");
        let bad = self.lines_lost
            + self.lines_duplicated
            + self.unanswered_or_twice
            + self.disagreements
            + self.leftover_processes
            + self.leftover_files;
        assert_eq!(bad, 0, "{self:?}");
    }
}

fn kill_all(found: &[(u32, String)]) {
    for (pid, _) in found {
        send(*pid, libc::SIGKILL);
    }
}

fn leftover_files(home: &Path) -> Vec<String> {
    let mut files = event_sockets(home);
    files.extend(super::temp_leftovers(home));
    // Staging directories of the organ cache (`.unpack-…`, `.set-…`,
    // `.stale-…`): the kernel is stopped, so none is in use.
    let organs = home.join(teneral::organs::cache::CACHE_DIR);
    for dir in [organs.join("trees"), organs.join("sets")] {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                files.push(entry.path().display().to_string());
            }
        }
    }
    // A send-back request no client waits for any more: a later SIGHUP
    // would act on it by surprise.
    let request = home.join(teneral_core::back_request::BACK_REQUEST);
    if request.exists() {
        files.push(request.display().to_string());
    }
    // Groups still listed; the first line names the kernel the list is of.
    let children = std::fs::read_to_string(home.join(".teneral/run/children")).unwrap_or_default();
    let groups: Vec<&str> = children.lines().filter(|l| !l.starts_with("kernel ")).collect();
    if !groups.is_empty() {
        files.push(format!(".teneral/run/children: {}", groups.join("; ")));
    }
    files
}

/// What the dead kernel started must be gone (the keeper's work).
pub fn after_kill(ind: &Individual, c: &mut Counts, what: &str) {
    std::thread::sleep(Duration::from_millis(1000));
    let left = processes_under(ind.path());
    if !left.is_empty() {
        c.leftover_processes += left.len();
        eprintln!("{what}: after the kill, left running: {left:?}");
        kill_all(&left);
    }
}

/// What answers an owner line: a reply, the end or interruption of a turn,
/// or a verdict, journaled after it; or the start's word that its turn was
/// cut.
const ANSWERS: &[&str] =
    &["reply", "turn.ended", "turn.interrupted", "mutation.accepted", "mutation.rejected"];

pub fn answered(journal: &[serde_json::Value], name: &str) -> bool {
    let Some(at) = journal.iter().position(|e| e["type"] == "owner.line" && e["file"] == name)
    else {
        return false;
    };
    let seq = &journal[at]["seq"];
    journal[at + 1..].iter().any(|e| {
        ANSWERS.iter().any(|t| e["type"] == *t)
            || (e["type"] == "kernel.notice" && &e["cut_turn"] == seq)
    })
}

/// The events from the owner line of file `name` on, briefly: kind, seq and
/// whatever names a cut turn.
fn after_line(journal: &[serde_json::Value], name: &str) -> Vec<String> {
    let at = journal.iter().position(|e| e["type"] == "owner.line" && e["file"] == name);
    journal[at.unwrap_or(journal.len())..]
        .iter()
        .map(|e| match e.get("cut_turn") {
            Some(cut) => format!("{} {} cut_turn={cut}", e["seq"], e["type"]),
            None => format!("{} {}", e["seq"], e["type"]),
        })
        .collect()
}

/// Checks the invariants over a quiet individual (its kernel stopped).
pub fn check(ind: &Individual, written: &[String], c: &mut Counts, what: &str) {
    std::thread::sleep(Duration::from_millis(300));
    let left = processes_under(ind.path());
    if !left.is_empty() {
        c.leftover_processes += left.len();
        eprintln!("{what}: after a clean stop, left running: {left:?}");
        kill_all(&left);
    }
    let journal = ind.journal();
    let waiting = ind.owner_files();
    for name in written {
        let n = journal
            .iter()
            .filter(|e| e["type"] == "owner.line" && e["file"] == name.as_str())
            .count();
        if n > 1 {
            c.lines_duplicated += 1;
            eprintln!("{what}: line {name} journaled {n} times");
        }
        if n == 0 && !waiting.contains(name) {
            c.lines_lost += 1;
            eprintln!("{what}: line {name} lost");
        }
        if n == 1 && !answered(&journal, name) {
            c.lines_unanswered += 1;
            eprintln!("{what}: line {name} journaled, never answered, no word of a cut turn");
            eprintln!("{what}: the journal from that line on: {:?}", after_line(&journal, name));
        }
    }
    for request in journal.iter().filter(|e| e["type"] == "mutation.requested") {
        let n = verdicts_of(&journal, &request["seq"]).len();
        if n != 1 {
            c.unanswered_or_twice += 1;
            eprintln!("{what}: request {} has {n} verdicts", request["seq"]);
        }
    }
    let state = state_of(ind.path());
    let generation = state["generation"].as_str().map(str::to_owned);
    if generation != lineage_of(ind.path()) {
        c.disagreements += 1;
        eprintln!("{what}: state {generation:?}, lineage {:?}", lineage_of(ind.path()));
    }
    // The journal's last move (a promotion, a rollback, a send-back) is
    // where the state must be: a move journaled is finished by the start.
    let moves = ["mutation.accepted", "generation.rolledback", "generation.sentback"];
    let last_move = journal.iter().rev().find(|e| moves.iter().any(|m| e["type"] == *m));
    if let Some(last) = last_move {
        if last["to"].as_str() != generation.as_deref() {
            c.disagreements += 1;
            eprintln!("{what}: state {generation:?}, the journal's last move {last}");
        }
    }
    let files = leftover_files(ind.path());
    if !files.is_empty() {
        c.leftover_files += files.len();
        eprintln!("{what}: files left: {files:?}");
    }
}
