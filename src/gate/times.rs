//! How long each check took when it last passed, by check name, so that
//! the status can say how long a step is expected to take ("body-tests
//! (about 40 s, from the last run)").
//!
//! The file is `.teneral/gate/times.json`, written atomically, one figure a
//! check name and at most [`MAX_NAMES`] names, so it stays small whatever
//! the gate runs. A missing or damaged file is empty: it only informs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::plan::Lane;

pub const TIMES_PATH: &str = ".teneral/gate/times.json";

/// The most check names the file holds; a new name past it is not kept.
pub const MAX_NAMES: usize = 32;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Times {
    /// Seconds of the last pass, by check name.
    seconds: BTreeMap<String, f64>,
    #[serde(skip)]
    path: PathBuf,
}

impl Times {
    pub fn load(home: &Path) -> Times {
        let path = home.join(TIMES_PATH);
        let mut times: Times = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        times.path = path;
        times
    }

    /// The seconds of `check`'s last pass, if one is known.
    pub fn last(&self, check: &str) -> Option<f64> {
        self.seconds.get(check).copied().filter(|s| s.is_finite() && *s >= 0.0)
    }

    /// Keeps `seconds` as `check`'s last; a failure to write only loses it.
    pub fn record(&mut self, check: &str, seconds: f64) {
        if !self.seconds.contains_key(check) && self.seconds.len() >= MAX_NAMES {
            return;
        }
        self.seconds.insert(check.to_owned(), (seconds * 10.0).round() / 10.0);
        if let Ok(bytes) = serde_json::to_vec(self) {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = teneral_core::fsutil::write_atomic(&self.path, &bytes);
        }
    }
}

/// How long checks run side by side are expected to take, from each one's
/// last time: the checks of one lane run one after the other, the lanes at
/// once, so the longest lane's sum. `None` when any check's time is unknown
/// (a guess from the others would say too little) or there is none.
pub fn expected(checks: &[(Lane, Option<f64>)]) -> Option<Duration> {
    if checks.is_empty() {
        return None;
    }
    let mut lanes: BTreeMap<usize, f64> = BTreeMap::new();
    for (lane, seconds) in checks {
        *lanes.entry(*lane as usize).or_default() += (*seconds)?;
    }
    let longest = lanes.values().copied().fold(0.0, f64::max);
    Some(Duration::from_secs_f64(longest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_time_is_the_longest_lane() {
        type Case<'a> = (&'a [(Lane, Option<f64>)], Option<u64>);
        let table: &[Case<'_>] = &[
            (&[], None),
            (&[(Lane::Test, Some(40.0))], Some(40)),
            (&[(Lane::Test, Some(40.0)), (Lane::Check, Some(25.0))], Some(40)),
            // One lane's checks wait for each other.
            (
                &[(Lane::Check, Some(20.0)), (Lane::Check, Some(25.0)), (Lane::Test, Some(40.0))],
                Some(45),
            ),
            (&[(Lane::Test, Some(40.0)), (Lane::Check, None)], None),
        ];
        for (checks, want) in table {
            assert_eq!(expected(checks), want.map(Duration::from_secs), "{checks:?}");
        }
    }

    #[test]
    fn keeps_the_last_time_of_a_bounded_number_of_checks() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let mut times = Times::load(dir.path());
        assert_eq!(times.last("body-tests"), None);
        times.record("body-tests", 41.26);
        times.record("body-tests", 38.04);
        assert_eq!(Times::load(dir.path()).last("body-tests"), Some(38.0));
        for i in 0..2 * MAX_NAMES {
            times.record(&format!("check-{i}"), 1.0);
        }
        let kept = Times::load(dir.path());
        assert_eq!(kept.seconds.len(), MAX_NAMES);
        assert_eq!(kept.last("body-tests"), Some(38.0), "a known name stays");
        std::fs::write(dir.path().join(TIMES_PATH), b"{not json").expect("the file can be written");
        assert_eq!(Times::load(dir.path()).last("body-tests"), None, "damaged: empty");
    }
}
