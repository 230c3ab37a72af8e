//! Timings for `scripts/bench-talk`: when `TENERAL_TALK_TRACE` names a
//! file, the full client appends one line per measurement to it
//! (`attach_us`, `attach_cpu_us`, `attach_runq_us` (the main thread's time
//! on a CPU and waiting for one, from the process's start), `peak_kb` once
//! the first frame is drawn, and before it
//! `phase_us <name> <n>`, the time from the start to the end of each step
//! of attaching; `draw_us <n>`
//! from a key to its frame drawn, `reply_ms <n>` from a
//! reply's journal time to its rows printed, `word_us <n>` the wall clock in
//! microseconds since the epoch when the first words of a streamed reply
//! were drawn). Unset, it costs nothing.

use std::fs::File;
use std::io::Write;
use std::time::Instant;

/// Where timings go, when anywhere.
pub struct Trace(Option<File>, Writing);

/// Where the reply being written stands, for `word_us`.
#[derive(Default, PartialEq)]
enum Writing {
    /// No words of the reply in progress yet.
    #[default]
    None,
    /// Its first words were read and are not drawn yet.
    Read,
    /// Its first words were drawn.
    Drawn,
}

impl Trace {
    /// The trace `TENERAL_TALK_TRACE` asks for.
    pub fn from_env() -> Self {
        let file = std::env::var_os("TENERAL_TALK_TRACE")
            .and_then(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).ok());
        Self(file, Writing::None)
    }

    /// The reply being written is now `text`.
    pub fn writing(&mut self, text: &str) {
        if text.is_empty() {
            self.1 = Writing::None;
        } else if self.1 == Writing::None {
            self.1 = Writing::Read;
        }
    }

    /// A frame was drawn: the time, when it is the first with new words.
    pub fn drawn(&mut self) {
        if self.1 != Writing::Read {
            return;
        }
        self.1 = Writing::Drawn;
        if let Some(f) = &mut self.0 {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let _ = writeln!(f, "word_us {}", now.map_or(0, |d| d.as_micros()));
        }
    }

    pub fn on(&self) -> bool {
        self.0.is_some()
    }

    /// Records how long since `start`, in microseconds.
    pub fn draw(&mut self, start: Instant) {
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "draw_us {}", start.elapsed().as_micros());
        }
    }

    /// Records the time from `start` to the end of the step `name` of attaching.
    pub fn phase(&mut self, name: &str, start: Instant) {
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "phase_us {name} {}", start.elapsed().as_micros());
        }
    }

    /// Records the time from `start` to the first frame, and the peak RSS.
    pub fn attach(&mut self, start: Instant) {
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "attach_us {}", start.elapsed().as_micros());
            // This thread's time on a CPU and waiting for one, since it
            // started (ns): on a loaded machine the wait is most of it.
            let sched = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
            let mut ns = sched.split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
            if let (Some(run), Some(wait)) = (ns.next(), ns.next()) {
                let _ = writeln!(f, "attach_cpu_us {}", run / 1000);
                let _ = writeln!(f, "attach_runq_us {}", wait / 1000);
            }
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            if let Some(kb) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                let _ = writeln!(f, "peak_kb {}", kb.trim().trim_end_matches(" kB"));
            }
        }
    }

    /// Records how long ago (ms) the event journaled at `ts` was.
    pub fn reply(&mut self, ts: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
        if let (Some(f), Some(at)) = (&mut self.0, super::view::parse_ts(ts)) {
            let _ = writeln!(f, "reply_ms {}", now - at);
        }
    }
}
