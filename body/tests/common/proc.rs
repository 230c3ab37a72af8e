//! What the body's threads are doing, as `/proc` shows it: the events the
//! tests wait on instead of sleeping. A body "at rest" has every thread
//! asleep in a system call and its main thread waiting on its sensors'
//! channel (a futex); a clock shows as a deadline on that wait, a request to
//! the model as the main thread reading a TCP socket.
//!
//! System call numbers and argument positions are x86_64's; on another
//! machine every wait here fails and says so.

use std::fs;

use super::{wait_until, Rig, WAIT};

/// One thread of a process at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    pub tid: u32,
    /// `R`, `S`, `D`, ... from `/proc/<pid>/task/<tid>/stat`.
    pub state: char,
    /// How many times the thread went to sleep.
    pub sleeps: u64,
    /// The system call it is blocked in, with its arguments; `None` when
    /// it is running (or the kernel would not say).
    pub call: Option<(u64, [u64; 6])>,
}

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const READ: u64 = 0;
    pub const POLL: u64 = 7;
    pub const SELECT: u64 = 23;
    pub const NANOSLEEP: u64 = 35;
    pub const RECVFROM: u64 = 45;
    pub const RT_SIGTIMEDWAIT: u64 = 128;
    pub const FUTEX: u64 = 202;
    pub const EPOLL_WAIT: u64 = 232;
    pub const CLOCK_NANOSLEEP: u64 = 230;
    pub const OPENAT: u64 = 257;
    pub const PSELECT6: u64 = 270;
    pub const PPOLL: u64 = 271;
    pub const EPOLL_PWAIT: u64 = 281;
}

#[cfg(not(target_arch = "x86_64"))]
mod nr {
    // Numbers no call has: every wait on them times out and says why.
    pub const READ: u64 = u64::MAX;
    pub const POLL: u64 = u64::MAX;
    pub const SELECT: u64 = u64::MAX;
    pub const NANOSLEEP: u64 = u64::MAX;
    pub const RECVFROM: u64 = u64::MAX;
    pub const RT_SIGTIMEDWAIT: u64 = u64::MAX;
    pub const FUTEX: u64 = u64::MAX;
    pub const EPOLL_WAIT: u64 = u64::MAX;
    pub const CLOCK_NANOSLEEP: u64 = u64::MAX;
    pub const OPENAT: u64 = u64::MAX;
    pub const PSELECT6: u64 = u64::MAX;
    pub const PPOLL: u64 = u64::MAX;
    pub const EPOLL_PWAIT: u64 = u64::MAX;
}

impl Thread {
    /// Asleep in a system call.
    pub fn blocked(&self) -> bool {
        self.state == 'S' && self.call.is_some()
    }

    /// Asleep on a futex (a channel, a lock, a condition variable).
    pub fn on_futex(&self) -> bool {
        self.blocked() && matches!(self.call, Some((nr::FUTEX, _)))
    }

    /// Asleep opening a file (a FIFO nobody writes to, say).
    pub fn opening(&self) -> bool {
        self.blocked() && matches!(self.call, Some((nr::OPENAT, _)))
    }

    /// Asleep reading the file descriptor it is reading, if it is.
    pub fn reading(&self) -> Option<u64> {
        match self.call {
            Some((nr::READ | nr::RECVFROM, args)) if self.blocked() => Some(args[0]),
            _ => None,
        }
    }

    /// True when the call it sleeps in ends by itself at some time (a
    /// timer is armed); false when only an event can wake it.
    pub fn has_deadline(&self) -> bool {
        let Some((call, a)) = self.call else { return true };
        match call {
            nr::FUTEX => a[3] != 0,
            nr::EPOLL_WAIT | nr::EPOLL_PWAIT => a[3] as i32 >= 0,
            nr::POLL => a[2] as i32 >= 0,
            nr::PPOLL | nr::RT_SIGTIMEDWAIT => a[2] != 0,
            nr::SELECT | nr::PSELECT6 => a[4] != 0,
            nr::NANOSLEEP | nr::CLOCK_NANOSLEEP => true,
            _ => false,
        }
    }
}

/// The threads of `pid`, main thread first; empty when it is gone or a
/// zombie.
pub fn threads(pid: u32) -> Vec<Thread> {
    let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    tids.sort_by_key(|&tid| (tid != pid, tid));
    tids.into_iter().filter_map(|tid| thread(pid, tid)).collect()
}

fn thread(pid: u32, tid: u32) -> Option<Thread> {
    let base = format!("/proc/{pid}/task/{tid}");
    let stat = fs::read_to_string(format!("{base}/stat")).ok()?;
    let state = stat.rsplit(')').next()?.trim_start().chars().next()?;
    if matches!(state, 'Z' | 'X') {
        return None;
    }
    let status = fs::read_to_string(format!("{base}/status")).ok()?;
    let sleeps = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|n| n.trim().parse().ok())?;
    let call =
        fs::read_to_string(format!("{base}/syscall")).ok().and_then(|text| parse_call(&text));
    Some(Thread { tid, state, sleeps, call })
}

/// `/proc/<pid>/task/<tid>/syscall`: `nr a0 .. a5 sp pc` in hex (but `nr`
/// in decimal), or `running`, or `-1 sp pc` outside a call.
fn parse_call(text: &str) -> Option<(u64, [u64; 6])> {
    let mut fields = text.split_whitespace();
    let call: u64 = fields.next()?.parse().ok()?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((call, args))
}

/// True when `fd` of `pid` is a TCP socket (the model's, for the body).
pub fn is_tcp(pid: u32, fd: u64) -> bool {
    let Ok(link) = fs::read_link(format!("/proc/{pid}/fd/{fd}")) else { return false };
    let link = link.to_string_lossy().into_owned();
    let Some(inode) = link.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) else {
        return false;
    };
    ["tcp", "tcp6"].iter().any(|table| {
        fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|row| row.split_whitespace().nth(9) == Some(inode))
    })
}

impl Rig {
    /// Waits until the body is at rest: every thread asleep in a system
    /// call, the main thread on its channel, and nothing changed between two
    /// looks 20 ms apart (so it is not between two steps). Returns the
    /// threads then, main first; empty when the body has ended instead.
    pub fn wait_rest(&self) -> Vec<Thread> {
        let pid = self.body_pid();
        let mut last: Option<Vec<Thread>> = None;
        wait_until(WAIT, "the body to come to rest", || {
            let now = threads(pid);
            if now.is_empty() {
                return Some(now);
            }
            let resting = now[0].on_futex() && now.iter().all(Thread::blocked);
            let same = last.as_ref() == Some(&now);
            last = Some(now.clone());
            (resting && same).then_some(now)
        })
    }

    /// Waits until the body's main thread has gone to sleep `n` more times:
    /// for a body at rest whose clock is set, `n` wake-ups by the clock.
    pub fn wait_main_sleeps(&self, n: u64) {
        let pid = self.body_pid();
        let sleeps = || threads(pid).first().map_or(0, |main| main.sleeps);
        let from = sleeps();
        wait_until(WAIT, &format!("the body's main thread to sleep {n} more times"), || {
            (sleeps() >= from + n).then_some(())
        });
    }

    /// True while the body's main thread reads a TCP socket: its request to
    /// the model is sent and waits for the answer.
    pub fn asking_model(&self) -> bool {
        let pid = self.body_pid();
        let main = threads(pid).into_iter().next();
        main.and_then(|main| main.reading()).is_some_and(|fd| is_tcp(pid, fd))
    }

    /// Waits until the body waits on the model (for an answer held long
    /// enough that it cannot come first).
    pub fn wait_asking_model(&self) {
        wait_until(WAIT, "the body to wait on the model", || self.asking_model().then_some(()));
    }

    /// Waits until a thread of the body sleeps opening a file.
    pub fn wait_opening(&self) {
        let pid = self.body_pid();
        wait_until(WAIT, "a thread of the body to block opening a file", || {
            threads(pid).iter().any(Thread::opening).then_some(())
        });
    }
}
