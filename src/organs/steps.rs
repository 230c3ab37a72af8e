//! Step marks of making a tree, for `scripts/bench-organs`: when each step
//! of [`super::cache::make_tree`] ended and the CPU time used by then, in
//! the kernel's process and in the caged unpacker.
//!
//! Off unless a benchmark turns it on in its own process ([`record`]); the
//! kernel never does, and then a mark costs the load of an atomic. While
//! on, the caged unpacker is asked (`unpack-organ --steps`) for its own
//! figures, one line before its summary ([`child_line`]), which the kernel
//! reads back ([`parse_child_line`]) and files beside its own marks. Times
//! are `CLOCK_REALTIME` in nanoseconds, the one clock both processes read
//! alike whatever namespaces the cage made.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Whose figures a mark holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// The kernel's process: every thread of it.
    Kernel,
    /// The caged unpacker's process.
    Unpacker,
}

/// One step's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub step: &'static str,
    pub whose: Whose,
    /// When it ended, in nanoseconds since the epoch.
    pub at_ns: i128,
    /// CPU time `whose` had used by then, user and system, in microseconds.
    pub user_us: u64,
    pub sys_us: u64,
}

static ON: AtomicBool = AtomicBool::new(false);
static MARKS: Mutex<Vec<Mark>> = Mutex::new(Vec::new());

/// From now on, marks are kept in this process.
pub fn record() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether marks are kept.
pub fn recording() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The marks kept so far, in the order made; none are kept after.
pub fn take() -> Vec<Mark> {
    std::mem::take(&mut *MARKS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

/// Notes that the kernel's step `step` ended now (nothing when off).
pub fn mark(step: &'static str) {
    if !recording() {
        return;
    }
    let (user_us, sys_us) = crate::sys::cpu_us(false);
    keep(Mark { step, whose: Whose::Kernel, at_ns: now_ns(), user_us, sys_us });
}

fn keep(mark: Mark) {
    MARKS.lock().unwrap_or_else(|p| p.into_inner()).push(mark);
}

/// The unpacker's own figures: when it read its first byte and when it
/// had unpacked everything, with its CPU time at each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildSteps {
    pub first_read_ns: i128,
    pub first_read_cpu: (u64, u64),
    pub unpacked_ns: i128,
    pub unpacked_cpu: (u64, u64),
}

/// The unpacker's line of its figures.
pub fn child_line(s: &ChildSteps) -> String {
    format!(
        "steps {} {} {} {} {} {}",
        s.first_read_ns,
        s.first_read_cpu.0,
        s.first_read_cpu.1,
        s.unpacked_ns,
        s.unpacked_cpu.0,
        s.unpacked_cpu.1
    )
}

/// Reads [`child_line`] from any line of `output`; `None` without one.
pub fn parse_child_line(output: &str) -> Option<ChildSteps> {
    let line = output.lines().find_map(|l| l.strip_prefix("steps "))?;
    let words: Vec<&str> = line.split(' ').collect();
    let [a, b, c, d, e, f] = words.as_slice() else { return None };
    Some(ChildSteps {
        first_read_ns: a.parse().ok()?,
        first_read_cpu: (b.parse().ok()?, c.parse().ok()?),
        unpacked_ns: d.parse().ok()?,
        unpacked_cpu: (e.parse().ok()?, f.parse().ok()?),
    })
}

/// Files the unpacker's figures as marks (nothing when off).
pub fn mark_child(s: &ChildSteps) {
    if !recording() {
        return;
    }
    let at = |step, at_ns, (user_us, sys_us)| Mark {
        step,
        whose: Whose::Unpacker,
        at_ns,
        user_us,
        sys_us,
    };
    keep(at("first byte read", s.first_read_ns, s.first_read_cpu));
    keep(at("unpacked", s.unpacked_ns, s.unpacked_cpu));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unpackers_line_reads_back_and_nothing_else_does() {
        let s = ChildSteps {
            first_read_ns: 1_700_000_000_123_456_789,
            first_read_cpu: (1200, 3400),
            unpacked_ns: 1_700_000_002_000_000_000,
            unpacked_cpu: (800_000, 1_500_000),
        };
        let line = child_line(&s);
        assert_eq!(parse_child_line(&line), Some(s));
        assert_eq!(parse_child_line(&format!("{line}\nunpacked 1 2 abc\n")), Some(s));
        for bad in ["", "steps", "steps 1 2 3 4 5", "steps 1 2 3 4 5 6 7", "steps a 2 3 4 5 6"] {
            assert_eq!(parse_child_line(bad), None, "{bad:?}");
        }
    }
}
