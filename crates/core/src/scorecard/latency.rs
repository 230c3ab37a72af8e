//! Median and p90 of a generation's turn latencies in bounded memory.
//!
//! Exact while a generation has at most [`EXACT`] samples (they are kept
//! and sorted); past that, every sample goes into a histogram of buckets
//! 2 % wide, and a quantile is the middle of its bucket (within 1 %),
//! clamped to the smallest and largest value seen. Memory per generation is
//! at most `EXACT` values or [`BUCKETS`] counters, whatever the journal's size.

/// Samples kept exactly before the histogram takes over.
pub const EXACT: usize = 1024;
/// Buckets of the histogram: 2 % each, from 1 ms to about 100 days.
pub const BUCKETS: usize = 1200;
const RATIO: f64 = 1.02;

/// Latencies in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    exact: Vec<i64>,
    /// Empty until more than `EXACT` samples came.
    histogram: Vec<u32>,
    count: u64,
    min: i64,
    max: i64,
}

fn bucket(ms: i64) -> usize {
    if ms < 1 {
        return 0;
    }
    let i = 1 + ((ms as f64).ln() / RATIO.ln()) as usize;
    i.min(BUCKETS - 1)
}

/// The middle of bucket `i` (geometric), in ms.
fn middle(i: usize) -> i64 {
    if i == 0 {
        return 0;
    }
    let low = RATIO.powi(i as i32 - 1);
    (low * RATIO.sqrt()).round() as i64
}

impl Latencies {
    pub fn add(&mut self, ms: i64) {
        let ms = ms.max(0);
        if self.count == 0 {
            (self.min, self.max) = (ms, ms);
        }
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
        self.count += 1;
        if self.histogram.is_empty() && self.exact.len() < EXACT {
            self.exact.push(ms);
            return;
        }
        if self.histogram.is_empty() {
            self.histogram = vec![0; BUCKETS];
            for v in std::mem::take(&mut self.exact) {
                self.histogram[bucket(v)] += 1;
            }
        }
        self.histogram[bucket(ms)] += 1;
    }

    /// How many samples were taken.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// True while the quantiles are exact.
    pub fn is_exact(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The `p`-quantile (0 < p <= 1) by nearest rank: the smallest value
    /// with at least `p` of the samples at or below it.
    pub fn quantile(&self, p: f64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
        if self.histogram.is_empty() {
            let mut sorted = self.exact.clone();
            sorted.sort_unstable();
            return sorted.get(rank as usize - 1).copied();
        }
        let mut seen = 0u64;
        for (i, &n) in self.histogram.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(middle(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_by_nearest_rank() {
        let table: [(&[i64], Option<i64>, Option<i64>); 4] = [
            (&[], None, None),
            (&[500], Some(500), Some(500)),
            (&[300, 100, 200, 400], Some(200), Some(400)),
            (&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], Some(5), Some(9)),
        ];
        for (samples, median, p90) in table {
            let mut l = Latencies::default();
            samples.iter().for_each(|&s| l.add(s));
            assert_eq!((l.quantile(0.5), l.quantile(0.9)), (median, p90), "{samples:?}");
            assert!(l.is_exact());
        }
    }

    #[test]
    fn past_the_cap_within_two_percent() {
        let mut l = Latencies::default();
        for i in 1..=100_000 {
            l.add(i);
        }
        assert!(!l.is_exact());
        assert_eq!(l.count(), 100_000);
        let within = |got: Option<i64>, want: f64| {
            let got = got.expect("a value") as f64;
            assert!((got - want).abs() / want <= 0.02, "{got} vs {want}");
        };
        within(l.quantile(0.5), 50_000.0);
        within(l.quantile(0.9), 90_000.0);
        assert_eq!(l.quantile(1.0), Some(100_000));
    }
}
