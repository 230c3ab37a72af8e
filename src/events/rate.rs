//! How fast one generation may send: a token bucket for each class of
//! event (`log`, `note`, every other type), the excess dropped and counted.
//!
//! Invariants: a bucket never holds more than its burst, and refills at its
//! rate; an event is let through only by a whole token. Dropped events are
//! counted per class as one flood, and a flood is reported once
//! ([`Rates::due`]): when no event of its class was dropped for [`QUIET`],
//! or, while it goes on, once per [`REPORT_EVERY`] with the count since the
//! last report. What is still counted when the channel ends is reported
//! then ([`Rates::flush`]). Pure: the clock is given to every call.

use std::time::{Duration, Instant};

use teneral_core::journal::kind::EventKind;

/// A class of events with a bucket of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Log,
    Note,
    /// Every other type (and a line whose type could not be read).
    Event,
}

impl Class {
    const ALL: [Class; 3] = [Class::Log, Class::Note, Class::Event];

    /// The class of an event of raw type `kind` (as the scan read it).
    pub fn of(kind: Option<&[u8]>) -> Class {
        match kind.and_then(EventKind::named_bytes) {
            Some(EventKind::Log) => Class::Log,
            Some(EventKind::Note) => Class::Note,
            // Every other type is of one class, by design.
            _ => Class::Event,
        }
    }

    /// Its name in `events.dropped` (`kind`): the type of its events, or
    /// `event` for every other.
    pub fn name(self) -> &'static str {
        match self {
            Class::Log => EventKind::Log.name(),
            Class::Note => EventKind::Note.name(),
            Class::Event => "event",
        }
    }

    fn index(self) -> usize {
        match self {
            Class::Log => 0,
            Class::Note => 1,
            Class::Event => 2,
        }
    }
}

/// One bucket's bound: `burst` events at once, `per_second` after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub burst: u32,
    pub per_second: u32,
}

/// The rates of every channel (docs/contract.md, section 3): log, note, other.
pub const RATES: [Rate; 3] = [
    Rate { burst: 200, per_second: 20 },
    Rate { burst: 200, per_second: 20 },
    Rate { burst: 1000, per_second: 100 },
];

/// A flood is over once no event of its class was dropped for this long.
pub const QUIET: Duration = Duration::from_secs(2);

/// A flood that goes on is reported at most this often.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);

/// What one `events.dropped` line says.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub class: Class,
    pub count: u64,
    /// From the first drop counted here to the last.
    pub seconds: f64,
}

#[derive(Debug, Clone)]
struct Bucket {
    rate: Rate,
    tokens: f64,
    at: Instant,
    /// Dropped since the last report, with the first and last drop.
    dropped: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    /// When this flood was last reported (a flood that goes on).
    reported: Option<Instant>,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(self.rate.per_second))
            .min(f64::from(self.rate.burst));
        self.at = self.at.max(now);
    }

    fn report(&mut self, class: Class, now: Instant) -> Option<Dropped> {
        if self.dropped == 0 {
            return None;
        }
        let (first, last) = (self.first.unwrap_or(now), self.last.unwrap_or(now));
        let seconds = last.saturating_duration_since(first).as_secs_f64();
        let out = Dropped { class, count: self.dropped, seconds };
        self.dropped = 0;
        self.first = None;
        Some(out)
    }
}

/// The buckets of one generation's channel.
#[derive(Debug, Clone)]
pub struct Rates {
    buckets: Vec<Bucket>,
}

impl Rates {
    /// Full buckets at `now`, one per class of [`Class`] in order.
    pub fn new(rates: [Rate; 3], now: Instant) -> Rates {
        let bucket = |rate: Rate| Bucket {
            rate,
            tokens: f64::from(rate.burst),
            at: now,
            dropped: 0,
            first: None,
            last: None,
            reported: None,
        };
        Rates { buckets: rates.into_iter().map(bucket).collect() }
    }

    /// Whether an event of `class` may pass at `now`; one that may not is
    /// counted as dropped.
    pub fn take(&mut self, class: Class, now: Instant) -> bool {
        let Some(bucket) = self.buckets.get_mut(class.index()) else { return true };
        bucket.refill(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return true;
        }
        bucket.dropped += 1;
        bucket.first.get_or_insert(now);
        bucket.last = Some(now);
        false
    }

    /// The floods to report at `now`: each over (quiet for [`QUIET`]), and
    /// each going on whose last report is [`REPORT_EVERY`] old.
    pub fn due(&mut self, now: Instant) -> Vec<Dropped> {
        let mut out = Vec::new();
        for (bucket, class) in self.buckets.iter_mut().zip(Class::ALL) {
            let (Some(first), Some(last)) = (bucket.first, bucket.last) else { continue };
            let over = now.saturating_duration_since(last) >= QUIET;
            let since = bucket.reported.unwrap_or(first);
            let long = now.saturating_duration_since(since) >= REPORT_EVERY;
            if over || long {
                bucket.reported = if over { None } else { Some(now) };
                out.extend(bucket.report(class, now));
            }
        }
        out
    }

    /// Whether drops are counted and not yet reported: only then has
    /// [`Rates::due`] anything to say.
    pub fn counting(&self) -> bool {
        self.buckets.iter().any(|b| b.first.is_some())
    }

    /// Everything still counted, reported at `now` (the channel ends).
    pub fn flush(&mut self, now: Instant) -> Vec<Dropped> {
        let mut out = Vec::new();
        for (bucket, class) in self.buckets.iter_mut().zip(Class::ALL) {
            bucket.reported = None;
            out.extend(bucket.report(class, now));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: [Rate; 3] = [
        Rate { burst: 3, per_second: 1 },
        Rate { burst: 2, per_second: 10 },
        Rate { burst: 5, per_second: 5 },
    ];

    #[test]
    fn class_table() {
        let table: [(Option<&[u8]>, Class); 5] = [
            (Some(b"log"), Class::Log),
            (Some(b"note"), Class::Note),
            (Some(b"reply"), Class::Event),
            (Some(b"Log"), Class::Event),
            (None, Class::Event),
        ];
        for (kind, want) in table {
            assert_eq!(Class::of(kind), want, "{kind:?}");
        }
    }

    /// (milliseconds after the start, class): whether it passed.
    #[test]
    fn buckets_table() {
        let t0 = Instant::now();
        let mut rates = Rates::new(SMALL, t0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let table: &[(u64, Class, bool)] = &[
            (0, Class::Log, true),
            (0, Class::Log, true),
            (0, Class::Log, true),
            (0, Class::Log, false),
            (0, Class::Note, true),
            (500, Class::Log, false),
            (1000, Class::Log, true),
            (1000, Class::Log, false),
            (1000, Class::Note, true),
            (1000, Class::Note, true),
            (1000, Class::Note, false),
            (1100, Class::Note, true),
            (1100, Class::Event, true),
            // A long rest fills a bucket to its burst, no more.
            (100_000, Class::Log, true),
            (100_000, Class::Log, true),
            (100_000, Class::Log, true),
            (100_000, Class::Log, false),
            // A clock that goes back takes nothing away and gives nothing.
            (50_000, Class::Log, false),
        ];
        for (n, (ms, class, want)) in table.iter().enumerate() {
            assert_eq!(rates.take(*class, at(*ms)), *want, "row {n}: {ms} ms {class:?}");
        }
    }

    /// A flood of a million in ten seconds is reported once, after it ends;
    /// one that goes on is reported once a minute, each count new.
    #[test]
    fn a_flood_is_reported_once() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut rates = Rates::new(SMALL, t0);
        assert!(!rates.counting(), "no drop, nothing to look at");
        let mut passed = 0u64;
        let mut reports = Vec::new();
        for i in 0..1_000_000u64 {
            let now = at(i / 100);
            passed += u64::from(rates.take(Class::Log, now));
            if i % 1000 == 0 {
                reports.extend(rates.due(now));
            }
        }
        assert_eq!(reports, vec![], "nothing while it goes on");
        assert!(rates.counting(), "a flood is counted");
        assert_eq!(rates.due(at(9_999 + 1_999)), vec![], "not yet quiet");
        let report = rates.due(at(9_999 + 2_000));
        assert!(!rates.counting(), "nothing is left to look at once it is reported");
        assert_eq!(report.len(), 1, "{report:?}");
        assert_eq!((report[0].class, report[0].count), (Class::Log, 1_000_000 - passed));
        assert!((passed as i64 - 13).abs() <= 1, "3 at once, then 1 a second: {passed}");
        assert!((report[0].seconds - 10.0).abs() < 0.1, "{report:?}");
        assert_eq!(rates.due(at(20_000)), vec![], "reported once");
        assert_eq!(rates.flush(at(20_000)), vec![], "nothing left");

        let mut rates = Rates::new(SMALL, t0);
        let mut reports = Vec::new();
        for s in 0..=150u64 {
            for _ in 0..10 {
                rates.take(Class::Note, at(s * 1000));
            }
            reports.extend(rates.due(at(s * 1000)));
        }
        let counts: Vec<u64> = reports.iter().map(|r| r.count).collect();
        assert_eq!(reports.len(), 2, "at 60 s and 120 s: {reports:?}");
        assert!(counts.iter().all(|c| *c > 0));
        let left = rates.flush(at(151_000));
        assert_eq!(left.len(), 1, "the rest when the channel ends: {left:?}");
        let total: u64 = counts.iter().sum::<u64>() + left[0].count;
        assert_eq!(total, 151 * 8, "every drop counted once: {counts:?} {left:?}");
    }
}
