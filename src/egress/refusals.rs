//! How often a refusal reaches the kernel's log: at most one line per host
//! per [`INTERVAL`], the next one saying how many were left out since. A
//! body retrying a refused host in a loop cannot flood the log (or
//! journald) with it, and the owner still sees every host and a count.
//!
//! A pure decision over the time given, tested by tables; the proxy keeps
//! one behind a lock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One line per host at most this often.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// Hosts remembered at most; past it the oldest are forgotten (a host
/// forgotten is logged again at its next refusal).
const HOSTS: usize = 1024;

/// The last line logged for each host, and the refusals left out since.
#[derive(Debug, Default)]
pub struct Refusals {
    hosts: HashMap<String, (Instant, u64)>,
}

impl Refusals {
    /// A refusal of `host` at `now`: the line to log, or `None` when one was
    /// logged for it less than [`INTERVAL`] ago (it is counted instead).
    /// `line` is the refusal's own line; a count of those left out since
    /// the last one is added to it.
    pub fn note(&mut self, host: &str, line: &str, now: Instant) -> Option<String> {
        let key = host.to_ascii_lowercase();
        if let Some((last, left_out)) = self.hosts.get_mut(&key) {
            if now.saturating_duration_since(*last) < INTERVAL {
                *left_out += 1;
                return None;
            }
            let count = std::mem::take(left_out);
            *last = now;
            return Some(if count == 0 {
                line.to_owned()
            } else {
                format!(
                    "{line} (and {count} more refusals of {host} not logged in the last minute)"
                )
            });
        }
        if self.hosts.len() >= HOSTS {
            let oldest = self.hosts.iter().min_by_key(|(_, (t, _))| *t).map(|(h, _)| h.clone());
            if let Some(oldest) = oldest {
                self.hosts.remove(&oldest);
            }
        }
        self.hosts.insert(key, (now, 0));
        Some(line.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_host_per_interval_then_the_count() {
        let t0 = Instant::now();
        let mut log = Refusals::default();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        // (host, seconds after t0, what is logged)
        let table: &[(&str, u64, Option<&str>)] = &[
            ("a.test", 0, Some("refused a.test")),
            ("a.test", 1, None),
            ("A.TEST", 2, None),
            ("b.test", 3, Some("refused b.test")),
            ("a.test", 59, None),
            (
                "a.test",
                60,
                Some(
                    "refused a.test (and 3 more refusals of a.test not logged in the last minute)",
                ),
            ),
            ("a.test", 200, Some("refused a.test")),
            ("b.test", 63, Some("refused b.test")),
        ];
        for (host, at, want) in table {
            let line = format!("refused {}", host.to_ascii_lowercase());
            assert_eq!(log.note(host, &line, s(*at)).as_deref(), *want, "{host} at {at}s");
        }
    }

    #[test]
    fn the_remembered_hosts_are_bounded() {
        let t0 = Instant::now();
        let mut log = Refusals::default();
        for i in 0..(HOSTS + 10) {
            let host = format!("h{i}.test");
            assert!(log.note(&host, "refused", t0 + Duration::from_millis(i as u64)).is_some());
        }
        assert_eq!(log.hosts.len(), HOSTS);
        // The first ones were forgotten: logged again.
        assert!(log.note("h0.test", "refused", t0 + Duration::from_secs(1)).is_some());
    }
}
