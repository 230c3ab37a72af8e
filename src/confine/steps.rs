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
//! time goes. The descriptor reaches the program as any inherited one.

use std::os::fd::BorrowedFd;
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
    // SAFETY: the descriptor is only checked for being open, never owned.
    let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    if open {
        FD.store(fd, Ordering::Relaxed);
    }
}

/// Notes that `step` ended now (nothing when no descriptor was given).
pub fn mark(step: &str) {
    let fd = FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let ns = i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec);
    let line = format!("{step} {ns}\n");
    // SAFETY: `fd` was open at `init` and this process never closes it.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = rustix::io::write(fd, line.as_bytes());
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
