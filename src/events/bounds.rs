//! What one generation may make the kernel hold: a few connections, a
//! bounded line on each, a bounded sum of unfinished lines across them.
//!
//! Invariants: every byte of a line the kernel holds before its newline is
//! counted against the channel's [`Budget`] (by the capacity of the chunks it
//! is kept in, so the count is what is allocated); a line that would pass
//! [`Bounds::line`] or the budget ends its connection with a refusal, it is
//! never waited for, so connections cannot starve each other into a
//! deadlock; a line left unfinished for [`Bounds::stalled`] ends its
//! connection too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The bounds of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Connections open at once; one more is refused and closed.
    pub connections: usize,
    /// Longest line, newline not counted.
    pub line: usize,
    /// Bytes of unfinished lines held across all connections.
    pub buffered: usize,
    /// How long a line may stay unfinished with no byte coming.
    pub stalled: Duration,
    /// How long an answer may wait for the body to read earlier ones.
    pub unread: Duration,
    /// How long a connection made before the kernel knows the body's
    /// process waits to be judged; past it, it is refused as not started.
    pub unnamed: Duration,
}

impl Bounds {
    /// The bounds every channel has (docs/contract.md, section 3): a line
    /// of the largest event a body may send
    /// ([`teneral_core::journal::rules::EVENT_BYTES`]), and unfinished lines of
    /// four of them across all connections.
    pub const CHANNEL: Bounds = Bounds {
        connections: 8,
        line: teneral_core::journal::rules::EVENT_BYTES,
        buffered: 4 * teneral_core::journal::rules::EVENT_BYTES,
        stalled: Duration::from_secs(30),
        unread: Duration::from_secs(10),
        unnamed: Duration::from_secs(10),
    };
}

/// Bytes read from a socket at a time, and the size a line is kept in.
const CHUNK: usize = 64 * 1024;

/// The bytes a channel may still hold, shared by its connections.
#[derive(Debug, Clone)]
pub struct Budget(Arc<AtomicUsize>);

impl Budget {
    pub fn new(bytes: usize) -> Self {
        Budget(Arc::new(AtomicUsize::new(bytes)))
    }

    /// Bytes not held now.
    #[cfg(test)]
    pub fn free(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    fn take(&self, bytes: usize) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |free| free.checked_sub(bytes))
            .is_ok()
    }
}

/// Bytes taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Budget,
    bytes: usize,
}

impl Held {
    fn none(budget: &Budget) -> Self {
        Held { budget: budget.clone(), bytes: 0 }
    }

    fn grow(&mut self, bytes: usize) -> bool {
        let ok = self.budget.take(bytes);
        if ok {
            self.bytes += bytes;
        }
        ok
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.0.fetch_add(self.bytes, Ordering::SeqCst);
    }
}

/// The open connections of a channel, at most a number.
#[derive(Debug, Clone)]
pub struct Seats {
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// One open connection's place, freed when dropped.
#[derive(Debug)]
pub struct Seat(Arc<AtomicUsize>);

impl Seats {
    pub fn new(max: usize) -> Self {
        Seats { taken: Arc::new(AtomicUsize::new(0)), max }
    }

    pub fn take(&self) -> Option<Seat> {
        let max = self.max;
        let ok = self
            .taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .is_ok();
        ok.then(|| Seat(Arc::clone(&self.taken)))
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A whole line (without its newline), holding its bytes in the budget
/// until dropped.
#[derive(Debug)]
pub struct Line {
    pub bytes: Vec<u8>,
    _held: Held,
}

/// What came next on a connection.
#[derive(Debug)]
pub enum Next {
    Line(Line),
    /// The peer closed (in the middle of a line or not), or reading failed.
    Closed,
    /// The connection must end; the text says why, for the peer and the log.
    Refused(String),
}

/// Reads lines from one connection within the channel's bounds.
pub struct Lines<R> {
    read: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The unfinished line, in chunks of at most [`CHUNK`] bytes of capacity.
    chunks: Vec<Vec<u8>>,
    len: usize,
    held: Held,
    budget: Budget,
    limits: Bounds,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub fn new(read: R, budget: &Budget, limits: Bounds) -> Self {
        Lines {
            read,
            buf: vec![0u8; CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            chunks: Vec::new(),
            len: 0,
            held: Held::none(budget),
            budget: budget.clone(),
            limits,
        }
    }

    /// The next line, or why there is none.
    pub async fn next(&mut self) -> Next {
        loop {
            if self.start < self.end {
                let window = &self.buf[self.start..self.end];
                let newline = window.iter().position(|b| *b == b'\n');
                let part = newline.unwrap_or(window.len());
                if let Err(why) = self.keep(part) {
                    return Next::Refused(why);
                }
                self.start += part;
                if newline.is_some() {
                    self.start += 1;
                    return Next::Line(self.finish());
                }
            }
            let read = self.read.read(&mut self.buf);
            let got = if self.len > 0 {
                match tokio::time::timeout(self.limits.stalled, read).await {
                    Ok(got) => got,
                    Err(_) => {
                        return Next::Refused(format!(
                            "a line was left unfinished for {} s; send each event as one \
                             whole line; this connection is closed",
                            self.limits.stalled.as_secs()
                        ))
                    }
                }
            } else {
                read.await
            };
            match got {
                Ok(0) | Err(_) => return Next::Closed,
                Ok(n) => (self.start, self.end) = (0, n),
            }
        }
    }

    /// Adds the next `n` bytes of the read buffer to the unfinished line.
    fn keep(&mut self, n: usize) -> Result<(), String> {
        if self.len + n > self.limits.line {
            return Err(format!(
                "an event is at most {} bytes; this connection is closed",
                self.limits.line
            ));
        }
        let mut from = self.start;
        let to = self.start + n;
        while from < to {
            let room = self.chunks.last().map(|c| c.capacity() - c.len()).unwrap_or(0);
            if room == 0 {
                let size = (self.limits.line - self.len).clamp(1, CHUNK);
                if !self.held.grow(size) {
                    return Err(format!(
                        "the kernel holds {} bytes of unfinished lines from this generation's \
                         connections, its most; finish a line before starting another; this \
                         connection is closed",
                        self.limits.buffered
                    ));
                }
                self.chunks.push(Vec::with_capacity(size));
                continue;
            }
            let step = room.min(to - from);
            if let Some(chunk) = self.chunks.last_mut() {
                chunk.extend_from_slice(&self.buf[from..from + step]);
            }
            from += step;
            self.len += step;
        }
        Ok(())
    }

    fn finish(&mut self) -> Line {
        let mut chunks = std::mem::take(&mut self.chunks);
        let bytes = if chunks.len() == 1 {
            chunks.pop().unwrap_or_default()
        } else {
            let mut all = Vec::with_capacity(self.len);
            for chunk in chunks {
                all.extend_from_slice(&chunk);
            }
            all
        };
        self.len = 0;
        let held = std::mem::replace(&mut self.held, Held::none(&self.budget));
        Line { bytes, _held: held }
    }
}

/// Lets a flood of refusals into the log at a bounded rate: at most
/// `per_minute` lines a minute, then one line saying how many were left out.
#[derive(Debug)]
pub struct Hush {
    per_minute: u32,
    since: Option<Instant>,
    said: u32,
    left_out: u32,
}

impl Hush {
    pub fn new(per_minute: u32) -> Self {
        Hush { per_minute, since: None, said: 0, left_out: 0 }
    }

    /// Whether to log a refusal at `now`; `Some(n)` says yes, after noting
    /// that `n` earlier ones were left out.
    pub fn speak(&mut self, now: Instant) -> Option<u32> {
        let fresh = self.since.is_none_or(|s| now.duration_since(s) >= Duration::from_secs(60));
        let mut left_out = 0;
        if fresh {
            self.since = Some(now);
            self.said = 0;
            left_out = std::mem::take(&mut self.left_out);
        }
        if self.said < self.per_minute {
            self.said += 1;
            Some(left_out)
        } else {
            self.left_out += 1;
            None
        }
    }
}

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
