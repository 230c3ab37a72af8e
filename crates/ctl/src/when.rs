//! Times as the journal writes them and as people read them.
//!
//! Pure: the journal's RFC 3339 times to milliseconds and back, durations
//! in words ("0.3s", "4 min"), and how long ago something was ("for 4 min").

/// Milliseconds since the epoch of an RFC 3339 time in UTC
/// (`2026-11-30T19:52:33.123Z`), as the journal writes them.
pub fn parse_ts(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !ts.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, min, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = match ts.get(19..ts.len() - 1) {
        Some(frac) if frac.starts_with('.') => {
            let digits = format!("{:0<3}", &frac[1..]);
            digits.get(..3)?.parse::<i64>().ok()?
        }
        _ => 0,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + min) * 60_000 + s * 1000 + ms)
}

/// A duration as people read it: `0.3s`, `12s`, `4 min`, `3 h`, `2 days`.
pub fn duration(ms: i64) -> String {
    match ms.max(0) {
        ms if ms < 10_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 120_000 => format!("{}s", ms / 1000),
        ms if ms < 120 * 60_000 => format!("{} min", ms / 60_000),
        ms if ms < 48 * 3_600_000 => format!("{} h", ms / 3_600_000),
        ms => format!("{} days", ms / 86_400_000),
    }
}

/// The time of day of `ms` since the epoch, in UTC: `23:01:10`.
pub fn clock(ms: i64) -> String {
    let secs = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// An RFC 3339 time in UTC with milliseconds, as the journal writes them.
pub fn rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    // The civil date of a day number (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{}.{:03}Z", clock(rest), rest % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_and_back() {
        for ts in
            ["1970-01-01T00:00:00.000Z", "2000-02-29T23:59:59.999Z", "2026-11-30T19:52:33.123Z"]
        {
            let ms = parse_ts(ts).expect("a journal time");
            assert_eq!(rfc3339(ms), ts);
        }
        assert_eq!(clock(parse_ts("2026-11-30T19:52:33.123Z").expect("a time")), "19:52:33");
    }

    #[test]
    fn durations_table() {
        let table = [
            (300, "0.3s"),
            (42_000, "42s"),
            (240_000, "4 min"),
            (119 * 60_000, "119 min"),
            (3 * 3_600_000, "3 h"),
            (50 * 3_600_000, "2 days"),
            (-5, "0.0s"),
        ];
        for (ms, want) in table {
            assert_eq!(duration(ms), want, "{ms}");
        }
    }
}
