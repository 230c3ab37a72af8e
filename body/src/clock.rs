//! The clock: a stimulus every `TENERAL_HEARTBEAT_MINUTES`, and the time of
//! day in RFC 3339 (UTC) for texts and envelopes.
//!
//! The clock is not a thread: the main loop waits for its other sensors with
//! a timeout that ends at the next tick. It stays silent until the soul is
//! written (a file exists under `soul/`), so a newborn agent is not woken
//! before it knows who it is.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Clock {
    every: Option<Duration>,
    next: Option<Instant>,
}

impl Clock {
    /// A clock ticking `every` from now; `None` for no clock.
    pub fn new(every: Option<Duration>) -> Clock {
        Clock { every, next: every.map(|d| Instant::now() + d) }
    }

    /// How long until the next tick; `None` when there is none.
    pub fn until_next(&self) -> Option<Duration> {
        self.next.map(|next| next.saturating_duration_since(Instant::now()))
    }

    /// True when a tick is due; the next one is then set.
    pub fn due(&mut self) -> bool {
        match (self.next, self.every) {
            (Some(next), Some(every)) if Instant::now() >= next => {
                self.next = Some(Instant::now() + every);
                true
            }
            _ => false,
        }
    }

    /// The text of a clock stimulus.
    pub fn text(&self) -> String {
        let minutes = self.every.map_or(0.0, |d| d.as_secs_f64() / 60.0);
        format!(
            "The clock woke you at {}; it does so every {minutes} minutes. Nothing else \
             happened. Do what you think is worth doing now, or nothing.",
            now_rfc3339()
        )
    }
}

/// The time now, such as `2026-11-30T07:40:12Z`.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since 1970 as RFC 3339 in UTC.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
