//! Where a check's time went, read from what cargo and the test harness
//! print about themselves: the compile (cargo's `Finished … in 3.21s`), the
//! test binaries' own runs (each `test result: … finished in 0.52s`), and
//! the rest of the check's wall time (starting cargo in the cage, cargo's
//! own bookkeeping, starting the test binaries). Pure.

/// One check's time, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Took {
    /// From start to end, as the gate saw it.
    pub seconds: f64,
    /// What cargo reported for its compile, when it printed `Finished`.
    pub compile: Option<f64>,
    /// The sum of the test binaries' own run times, when any reported one.
    pub tests: Option<f64>,
}

impl Took {
    /// `seconds` of wall time split by what `stderr` and `results` (the
    /// `test result:` lines) say.
    pub fn read(seconds: f64, stderr: &str, results: &str) -> Took {
        let compile = stderr.lines().rev().find_map(finished_in);
        let runs: Vec<f64> = results.lines().filter_map(test_run_in).collect();
        let tests = (!runs.is_empty()).then(|| runs.iter().sum());
        Took { seconds, compile, tests }
    }

    /// What is neither the compile nor the tests: process starts, the cage,
    /// cargo's own work, waiting.
    pub fn rest(&self) -> f64 {
        (self.seconds - self.compile.unwrap_or(0.0) - self.tests.unwrap_or(0.0)).max(0.0)
    }
}

/// The gate's own steps before its checks, each timed from the end of the
/// one before: where the time goes that is neither compiler nor tests.
#[derive(Debug, Clone)]
pub struct Laps {
    last: std::time::Instant,
    laps: Vec<(&'static str, f64)>,
}

impl Default for Laps {
    fn default() -> Laps {
        Laps { last: std::time::Instant::now(), laps: Vec::new() }
    }
}

impl Laps {
    /// Ends the step `name` now.
    pub fn lap(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.laps.push((name, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    /// The seconds of all the steps.
    pub fn total(&self) -> f64 {
        self.laps.iter().map(|(_, s)| s).sum()
    }

    /// `take 0.12 s, paths 0.03 s, …`.
    pub fn words(&self) -> String {
        let laps: Vec<String> = self.laps.iter().map(|(n, s)| format!("{n} {s:.2} s")).collect();
        laps.join(", ")
    }
}

/// The seconds of cargo's `Finished <profile> target(s) in 1m 05s` or `in 3.21s`.
fn finished_in(line: &str) -> Option<f64> {
    let line = line.trim_start();
    if !line.starts_with("Finished ") {
        return None;
    }
    duration(line.rsplit_once(" in ")?.1)
}

/// The seconds of a test binary's `test result: ok. … finished in 0.52s`.
fn test_run_in(line: &str) -> Option<f64> {
    duration(line.rsplit_once("finished in ")?.1)
}

/// `3.21s`, `1m 05s` or `1h 02m 03s` (how cargo and libtest print spans).
fn duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    for part in text.split_whitespace() {
        let (number, scale) = if let Some(n) = part.strip_suffix('h') {
            (n, 3600.0)
        } else if let Some(n) = part.strip_suffix('m') {
            (n, 60.0)
        } else {
            (part.strip_suffix('s')?, 1.0)
        };
        total += number.parse::<f64>().ok()? * scale;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_where_the_time_went() {
        let finished = "   Compiling teneral-body v0.1.0\n    Finished `release` profile [optimized] target(s) in 4.50s\n     Running tests/all.rs";
        let results = "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.25s\ntest result: ok. 9 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.25s";
        let cases: [(&str, f64, &str, &str, Took); 5] = [
            (
                "compile and tests",
                7.0,
                finished,
                results,
                Took { seconds: 7.0, compile: Some(4.5), tests: Some(1.5) },
            ),
            (
                "a lint: compile only",
                3.0,
                "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 1m 05s",
                "",
                Took { seconds: 3.0, compile: Some(65.0), tests: None },
            ),
            (
                "rustfmt prints nothing",
                0.4,
                "",
                "",
                Took { seconds: 0.4, compile: None, tests: None },
            ),
            (
                "a garbled span is no figure",
                2.0,
                "    Finished dev in soon",
                "test result: ok. finished in ages",
                Took { seconds: 2.0, compile: None, tests: None },
            ),
            (
                "the last Finished counts",
                9.0,
                "    Finished a in 1.00s\n    Finished b in 2.00s",
                "",
                Took { seconds: 9.0, compile: Some(2.0), tests: None },
            ),
        ];
        for (what, seconds, stderr, results, want) in cases {
            assert_eq!(Took::read(seconds, stderr, results), want, "{what}");
        }
        let took = Took { seconds: 7.0, compile: Some(4.5), tests: Some(1.5) };
        assert!((took.rest() - 1.0).abs() < 1e-9);
        assert_eq!(Took { seconds: 1.0, compile: Some(2.0), tests: None }.rest(), 0.0);
        assert_eq!(duration("1h 02m 03s"), Some(3723.0));
    }

    #[test]
    fn laps_add_up_and_are_said_in_order() {
        let mut laps = Laps::default();
        laps.lap("take");
        std::thread::sleep(std::time::Duration::from_millis(20));
        laps.lap("checkout");
        assert!(laps.total() >= 0.02, "{laps:?}");
        let words = laps.words();
        assert!(words.starts_with("take 0.0") && words.contains(", checkout 0.0"), "{words}");
    }
}
