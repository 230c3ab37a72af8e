//! Wake-ups of a process at rest: the context switches of each of its
//! threads over an idle window, read from `/proc/<pid>/task/*/status`
//! (reading them does not wake the process).
//!
//! Threads are sampled all through the window, not only at its two ends, so
//! a thread that ends inside it still counts what it did up to its last
//! sample, plus one for its end. A thread born inside it counts all of its
//! own switches (the thread that made it was awake too, and counts that).
//! Every figure is a difference of one thread's counter with itself, never
//! below zero, so the total cannot wrap. A thread that lived and ended
//! between two samples is seen only through the thread that started it.

use std::collections::BTreeMap;

/// One sample of a thread: its id, its name and its switches so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub tid: u32,
    pub name: String,
    pub switches: u64,
}

/// One thread over the window.
#[derive(Debug, Clone)]
struct Thread {
    name: String,
    tid: u32,
    first: u64,
    last: u64,
    ended: bool,
}

impl Thread {
    fn woke(&self) -> u64 {
        self.last.saturating_sub(self.first) + u64::from(self.ended)
    }
}

/// The threads of one process over an idle window.
#[derive(Debug, Default)]
pub struct Window {
    alive: BTreeMap<u32, Thread>,
    gone: Vec<Thread>,
}

/// What woke over a window: the total, and each thread that woke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Woken {
    pub total: u64,
    /// `(name, tid, wake-ups, ended)` of each thread that woke, most first.
    pub threads: Vec<(String, u32, u64, bool)>,
}

impl Window {
    /// The window's start: what each thread has done so far is not counted.
    pub fn start(first: &[Seen]) -> Self {
        let alive = first
            .iter()
            .map(|s| {
                let thread = Thread {
                    name: s.name.clone(),
                    tid: s.tid,
                    first: s.switches,
                    last: s.switches,
                    ended: false,
                };
                (s.tid, thread)
            })
            .collect();
        Self { alive, gone: Vec::new() }
    }

    /// Takes in a later sample.
    pub fn see(&mut self, sample: &[Seen]) {
        let now: BTreeMap<u32, &Seen> = sample.iter().map(|s| (s.tid, s)).collect();
        let ended: Vec<u32> = self.alive.keys().filter(|t| !now.contains_key(t)).copied().collect();
        for tid in ended {
            if let Some(mut thread) = self.alive.remove(&tid) {
                thread.ended = true;
                self.gone.push(thread);
            }
        }
        for (tid, s) in now {
            match self.alive.get_mut(&tid) {
                // The same thread: its counter only grows.
                Some(t) if s.switches >= t.last && s.name == t.name => t.last = s.switches,
                other => {
                    // A thread id used again by a new thread: the old one ended.
                    if let Some(old) = other {
                        let mut old = old.clone();
                        old.ended = true;
                        self.gone.push(old);
                    }
                    let born = Thread {
                        name: s.name.clone(),
                        tid,
                        first: 0,
                        last: s.switches,
                        ended: false,
                    };
                    self.alive.insert(tid, born);
                }
            }
        }
    }

    /// Everything that woke since the start.
    pub fn woken(&self) -> Woken {
        let mut threads: Vec<(String, u32, u64, bool)> = self
            .alive
            .values()
            .chain(&self.gone)
            .filter(|t| t.woke() > 0)
            .map(|t| (t.name.clone(), t.tid, t.woke(), t.ended))
            .collect();
        threads.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
        let total = threads.iter().map(|t| t.2).sum();
        Woken { total, threads }
    }
}

impl Woken {
    /// Which threads woke: `name [tid] count`, an ended one marked so.
    pub fn who(&self) -> String {
        let words: Vec<String> = self
            .threads
            .iter()
            .map(|(name, tid, n, ended)| {
                format!("{name} [{tid}] {n}{}", if *ended { " (ended)" } else { "" })
            })
            .collect();
        words.join(", ")
    }
}

/// Each thread of `pid` now; `None` once the process is gone.
pub fn sample(pid: u32) -> Option<Vec<Seen>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut seen = Vec::new();
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else { continue };
        // A thread may end between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else { continue };
        let mut name = String::new();
        let mut switches = 0;
        for line in status.lines() {
            if let Some(n) = line.strip_prefix("Name:") {
                name = n.trim().to_owned();
            } else if line.starts_with("voluntary_ctxt_switches:")
                || line.starts_with("nonvoluntary_ctxt_switches:")
            {
                switches +=
                    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            }
        }
        seen.push(Seen { tid, name, switches });
    }
    Some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(tid: u32, name: &str, switches: u64) -> Seen {
        Seen { tid, name: name.to_owned(), switches }
    }

    #[test]
    fn counts_each_case_and_never_wraps() {
        let start = [s(1, "main", 100), s(2, "worker", 50), s(3, "blocking", 7)];
        // (later samples, total, threads that woke)
        let cases: &[(&[&[Seen]], u64, &str)] = &[
            (&[&[s(1, "main", 100), s(2, "worker", 50), s(3, "blocking", 7)]], 0, ""),
            (&[&[s(1, "main", 102), s(2, "worker", 50), s(3, "blocking", 7)]], 2, "main [1] 2"),
            // Ended after doing 3: 3 plus its end, though its counter is gone.
            (
                &[
                    &[s(1, "main", 100), s(2, "worker", 50), s(3, "blocking", 10)],
                    &[s(1, "main", 100), s(2, "worker", 50)],
                ],
                4,
                "blocking [3] 4 (ended)",
            ),
            // Born inside the window: all of its own.
            (
                &[&[s(1, "main", 101), s(2, "worker", 50), s(3, "blocking", 7), s(9, "new", 2)]],
                3,
                "new [9] 2, main [1] 1",
            ),
            // A smaller counter is a new thread with an old id, not a negative figure.
            (
                &[&[s(1, "main", 100), s(2, "worker", 50), s(3, "blocking", 1)]],
                2,
                "blocking [3] 1, blocking [3] 1 (ended)",
            ),
        ];
        for (samples, total, who) in cases {
            let mut window = Window::start(&start);
            for sample in *samples {
                window.see(sample);
            }
            let woken = window.woken();
            assert_eq!(woken.total, *total, "{samples:?}");
            assert_eq!(woken.who(), *who, "{samples:?}");
        }
    }
}
