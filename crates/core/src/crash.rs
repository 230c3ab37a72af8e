//! The kernel's own fault injection: named durability points.
//!
//! After every fsync, rename and unlink the kernel makes on its state, its
//! journal, `lineage/local` and the owner's files, it calls [`point`] with
//! the point's name. When `TENERAL_TEST_CRASH_AT=<name>[@<n>]` names that
//! point, the kernel SIGKILLs itself there the `n`-th time it passes it
//! (the first time when `@<n>` is left out), so a test can stop it at an
//! exact step and check what the next start makes of it. Unset, a point
//! costs one load of a value read once.
//!
//! Every point is listed in [`POINTS`] (`teneral crash-points` prints them),
//! so the kill -9 suite can try each one. With `TENERAL_TEST_CRASH_TRACE=
//! <file>` the kernel appends `<pid> <point>` to `file` at every point it
//! passes, so the suite can count the passes a scenario makes and ask only
//! for those (a kill at a pass the scenario never makes is no kill at all).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The variable that names the point to die at.
pub const CRASH_VAR: &str = "TENERAL_TEST_CRASH_AT";

/// The variable that names a file to trace every point passed to.
pub const TRACE_VAR: &str = "TENERAL_TEST_CRASH_TRACE";

/// Every durability point, with what has just been made durable there.
pub const POINTS: &[(&str, &str)] = &[
    ("journal.synced", "an event was appended to the journal and synced"),
    ("state.saved", "state.json was replaced and its directory synced"),
    ("owner.journaled", "an owner line is in the journal; its file is not yet removed"),
    ("owner.removed", "an owner line's file was removed"),
    (
        "request.journaled",
        "a mutation.requested is in the journal; the supervisor has not heard of it",
    ),
    ("pending.saved", "the requested mutation is recorded in state.json"),
    ("verdict.journaled", "a verdict is in the journal; state and lineage not yet moved"),
    ("lineage.moved", "lineage/local points at the new generation; state.json not yet"),
    ("switched", "state.json names the new generation"),
    ("rolledback.journaled", "a generation.rolledback is in the journal; nothing moved yet"),
    ("sentback.journaled", "a generation.sentback is in the journal; nothing moved yet"),
    ("undecided.journaled", "a mutation was answered \"nothing decided\""),
    ("trial.saved", "a trial's deadline was written to state.json"),
    ("trial.ended", "a trial's end (the first reply) was written to state.json"),
    (
        "exited.journaled",
        "a generation.exited, with the counts its decision left, is in the journal",
    ),
    ("body.recorded", "the running body's process is recorded in state.json"),
    ("children.recorded", "the list of the kernel's process groups was replaced"),
    ("socket.bound", "a run's event socket was bound and renamed into place"),
    ("socket.removed", "a run's event socket was removed"),
    ("reconciled", "the start finished or undid what the last kernel left half done"),
    (
        "handover.trial.saved",
        ".teneral/trial.json names a promoted generation; state.json does not yet",
    ),
    (
        "launcher.rolledback.journaled",
        "the launcher journaled a failed trial's generation.rolledback; nothing moved yet",
    ),
    ("launcher.switched", "the launcher's rollback wrote state.json; lineage/local not yet"),
    (
        "launcher.lineage.moved",
        "the launcher's rollback moved lineage/local; its trial file is left",
    ),
    (
        "offer.answering",
        "an offer.requested is in the journal and the kernel began answering it; no answer yet",
    ),
    (
        "offer.published.journaled",
        "an offer went out and offer.published (naming its request) is journaled; offer.answered not yet",
    ),
    ("offer.reconciled", "the start answered an offer request its kernel never answered"),
    (
        "checkout.discarded",
        "a checkout's old tree was renamed away (its removal under way); the new one not yet made",
    ),
    (
        "stop.sweeping",
        "a clean stop ended the stand-in; its listed process groups are not yet killed",
    ),
];

/// The point to die at and at which passing, read once.
fn target() -> Option<&'static (String, u32)> {
    static TARGET: OnceLock<Option<(String, u32)>> = OnceLock::new();
    TARGET.get_or_init(|| parse(&std::env::var(CRASH_VAR).ok()?)).as_ref()
}

/// `name` or `name@n` (n ≥ 1).
fn parse(text: &str) -> Option<(String, u32)> {
    let (name, n) = match text.split_once('@') {
        Some((name, n)) => (name, n.parse().ok().filter(|&n| n >= 1)?),
        None => (text, 1),
    };
    (!name.is_empty()).then(|| (name.to_owned(), n))
}

/// A durability point: dies here when [`CRASH_VAR`] names it (see the module doc).
pub fn point(name: &'static str) {
    trace(name);
    let Some((want, at)) = target() else { return };
    if want != name {
        return;
    }
    static PASSED: AtomicU32 = AtomicU32::new(0);
    if PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *at {
        crate::log::at(crate::log::Priority::Notice, format!("crash point {name}@{at}: dying"));
        let me = rustix::process::getpid();
        let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
    }
}

/// Appends `<pid> <name>` to the trace file, when [`TRACE_VAR`] names one.
fn trace(name: &str) {
    static FILE: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let path = std::env::var_os(TRACE_VAR)?;
        std::fs::OpenOptions::new().create(true).append(true).open(path).ok()
    });
    if let Some(mut file) = file.as_ref() {
        use std::io::Write;
        // One write of one line: O_APPEND keeps lines of processes whole.
        let _ = file.write_all(format!("{} {name}\n", std::process::id()).as_bytes());
    }
}

/// Whether `name` is a known point.
pub fn is_point(name: &str) -> bool {
    POINTS.iter().any(|(p, _)| *p == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_counts() {
        let table = [
            ("journal.synced", Some(("journal.synced", 1))),
            ("state.saved@3", Some(("state.saved", 3))),
            ("state.saved@0", None),
            ("state.saved@x", None),
            ("", None),
        ];
        for (text, want) in table {
            let got = parse(text);
            assert_eq!(got.as_ref().map(|(n, c)| (n.as_str(), *c)), want, "{text}");
        }
    }

    #[test]
    fn points_are_unique() {
        let mut names: Vec<_> = POINTS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), POINTS.len());
        assert!(is_point("switched") && !is_point("nowhere"));
    }
}
