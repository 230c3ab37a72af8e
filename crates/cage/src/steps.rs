//! When each step of the cage ended, for `scripts/bench-confine`.
//!
//! When the helper's environment holds `TENERAL_BENCH_CONFINE_FD=<fd>` (an
//! open descriptor it inherited), the helper, the cage's first process and
//! the program's process each write one line per step to it:
//! `<step> <CLOCK_MONOTONIC nanoseconds>`, a single `write` each (shorter
//! than `PIPE_BUF`, so lines from the three processes never mix on an
//! `O_APPEND` file or a pipe). Without the variable nothing is written and a
//! step costs one load of an atomic. The kernel never sets it; it is the
//! benchmark's, which reads the lines back ([`parse`]) and shows where the
//! time goes. The descriptor is the helper's own: it is closed when the program is
//! executed, as every descriptor the plan does not name.

use std::sync::atomic::{AtomicI32, Ordering};

/// The environment variable naming the descriptor the steps are written to.
pub const ENV: &str = "TENERAL_BENCH_CONFINE_FD";

static FD: AtomicI32 = AtomicI32::new(-1);

/// Reads [`ENV`] once, at the helper's start. A value that is no open
/// descriptor is ignored.
pub fn init() {
    let Some(fd) = std::env::var(ENV).ok().and_then(|v| v.parse::<i32>().ok()) else { return };
    if fd < 0 {
        return;
    }
    if crate::sys::fd_is_open(fd) {
        FD.store(fd, Ordering::Relaxed);
    }
}

/// The descriptor the steps are written to, when one was given.
pub fn fd() -> Option<i32> {
    let fd = FD.load(Ordering::Relaxed);
    (fd >= 0).then_some(fd)
}

/// Notes that `step` ended now (nothing when no descriptor was given).
pub fn mark(step: &str) {
    let fd = FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let line = format!("{step} {}\n", crate::sys::monotonic_ns());
    crate::sys::write_raw(fd, line.as_bytes());
}

/// The lines [`mark`] wrote, as `(step, nanoseconds)`, in the order given;
/// lines that are not two fields are passed over.
pub fn parse(text: &str) -> Vec<(String, i128)> {
    text.lines()
        .filter_map(|line| {
            let (step, ns) = line.rsplit_once(' ')?;
            Some((step.to_owned(), ns.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_steps() {
        let table: [(&str, Vec<(String, i128)>); 4] = [
            ("", vec![]),
            ("start 10\n", vec![("start".into(), 10)]),
            ("a 1\nbroken\nb c 3\n", vec![("a".into(), 1), ("b c".into(), 3)]),
            ("x y\n", vec![]),
        ];
        for (text, want) in table {
            assert_eq!(parse(text), want, "{text:?}");
        }
    }
}
