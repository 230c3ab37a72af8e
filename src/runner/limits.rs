//! The limits of one launch, from the owner's settings: one type for every
//! kind of child, so a body, its build, a check and an organ check are held
//! alike.

use std::time::Duration;

use crate::settings::Settings;

/// The limits one run gets. `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of memory (`MemoryMax`).
    pub memory_max: Option<u64>,
    /// Processes and threads (`TasksMax`).
    pub tasks_max: Option<u64>,
    /// How long it may run before it is stopped (`RuntimeMaxSec`); a gate
    /// check has one, a body none.
    pub runtime_max: Option<Duration>,
    /// Between SIGTERM and SIGKILL when it is stopped (`TimeoutStopSec`).
    pub stop_timeout: Duration,
    /// Work nobody waits for: the lowest CPU priority (`Nice=19`) and, under
    /// systemd, idle IO (`IOSchedulingClass=idle`), so the conversation
    /// stays responsive while it runs.
    pub background: bool,
}

impl Limits {
    /// The owner's limits for a body: no runtime limit.
    pub fn for_body(settings: &Settings) -> Limits {
        Limits {
            memory_max: settings.quota.memory_max,
            tasks_max: settings.quota.tasks_max,
            runtime_max: None,
            stop_timeout: settings.test.timing.stop_grace,
            background: false,
        }
    }

    /// The owner's limits for one check of a mutation (and a body's build):
    /// the body's, and at most `TENERAL_CHECK_MINUTES` of running (none
    /// when it is 0).
    pub fn for_check(settings: &Settings) -> Limits {
        let runtime_max = match (settings.test.timing.check_limit, settings.check_minutes) {
            (Some(limit), _) => Some(limit),
            (None, 0) => None,
            (None, m) => Some(Duration::from_secs(u64::from(m) * 60)),
        };
        Limits { runtime_max, ..Limits::for_body(settings) }
    }

    /// The owner's limits for building a body: the body's, and at most
    /// `TENERAL_CHECK_MINUTES` of running (a build is not a check, so the
    /// tests' short check limit does not apply).
    pub fn for_build(settings: &Settings) -> Limits {
        let minutes = u64::from(settings.check_minutes);
        let runtime_max = (minutes > 0).then(|| Duration::from_secs(minutes * 60));
        Limits { runtime_max, ..Limits::for_body(settings) }
    }

    /// The owner's limits for building a generation's own kernel (and its
    /// client): the body's, and at most three times `TENERAL_CHECK_MINUTES`
    /// of running. A kernel is the largest tree teneral builds, and its first
    /// build starts from nothing: on a busy 2-core machine it took longer
    /// than the 10 minutes one check gets, and a species update was then
    /// rolled back only because the machine was slow.
    pub fn for_kernel_build(settings: &Settings) -> Limits {
        let minutes = 3 * u64::from(settings.check_minutes);
        let runtime_max = (minutes > 0).then(|| Duration::from_secs(minutes * 60));
        Limits { runtime_max, ..Limits::for_body(settings) }
    }

    /// The same for a check that compiles and tests the whole kernel (its
    /// type check, its tests): three times the running time, as a kernel's
    /// build gets ([`Limits::for_kernel_build`]). A mutation that touches
    /// the kernel compiles its whole test suite in the gate's cache, from
    /// nothing the first time: on a 2-core machine that came to 530 s of
    /// the 600 one check gets, and a container's slower disk made it 600.
    pub fn for_whole_kernel(self) -> Limits {
        Limits { runtime_max: self.runtime_max.map(|d| d * 3), ..self }
    }

    /// The same with another runtime limit.
    pub fn with_runtime_max(self, runtime_max: Option<Duration>) -> Limits {
        Limits { runtime_max, ..self }
    }

    /// The same, at background priority.
    pub fn in_background(self) -> Limits {
        Limits { background: true, ..self }
    }

    /// No limit at all, stopped with `stop_timeout` of grace.
    pub fn none(stop_timeout: Duration) -> Limits {
        Limits {
            memory_max: None,
            tasks_max: None,
            runtime_max: None,
            stop_timeout,
            background: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minutes of running each kind of work gets, by `TENERAL_CHECK_MINUTES`.
    #[test]
    fn how_long_each_kind_may_run() {
        let minutes = |m: Option<Duration>| m.map(|d| d.as_secs() / 60);
        for (check_minutes, check, build, kernel) in [
            (10, Some(10), Some(10), Some(30)),
            (1, Some(1), Some(1), Some(3)),
            (0, None, None, None),
        ] {
            let text = format!("TENERAL_PROVIDER=standin\nTENERAL_CHECK_MINUTES={check_minutes}\n");
            let settings = Settings::parse(&text).expect("a good .env");
            assert_eq!(minutes(Limits::for_check(&settings).runtime_max), check, "{check_minutes}");
            assert_eq!(minutes(Limits::for_build(&settings).runtime_max), build, "{check_minutes}");
            assert_eq!(
                minutes(Limits::for_kernel_build(&settings).runtime_max),
                kernel,
                "{check_minutes}"
            );
            assert_eq!(Limits::for_body(&settings).runtime_max, None);
        }
    }
}
