//! The ends of the manager's jobs (`JobRemoved`), heard once for the
//! connection's life and handed to the start that waits for each: a start
//! costs no subscription of its own (a match rule added to the bus and
//! removed again, and the manager's name looked up, each a round trip).
//!
//! A start says which unit it is about to ask for ([`Jobs::watch`]) before
//! it asks, so the end of its job is kept even when it comes before the
//! start has the job's path; ends of units nobody watches are not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::StreamExt;
use tokio::sync::oneshot;

use super::{JobRemovedStream, SystemdError};

/// The watches of one connection, shared by its clones and by the task that
/// reads its `JobRemoved` signals.
#[derive(Clone)]
pub(super) struct Jobs {
    state: Arc<Mutex<State>>,
    /// Dropped with the last clone of the connection's [`super::Systemd`]:
    /// the reading task then ends, and the stream's match rule with it.
    _alive: Arc<oneshot::Sender<()>>,
}

#[derive(Default)]
struct State {
    next: u64,
    watches: HashMap<u64, Watch>,
    /// The stream ended (the bus connection is gone).
    closed: bool,
}

struct Watch {
    unit: String,
    /// Ends of the unit's jobs heard so far: job path and result.
    ended: Vec<(String, String)>,
    /// The job the start waits for, once it knows it, and where to say
    /// its result.
    waiting: Option<(String, oneshot::Sender<String>)>,
}

impl State {
    /// A job of `unit` ended with `result`: to the watch waiting for it,
    /// else kept by every watch of the unit.
    fn ended(&mut self, unit: &str, job: &str, result: &str) {
        for watch in self.watches.values_mut().filter(|w| w.unit == unit) {
            if watch.waiting.as_ref().is_some_and(|(j, _)| j == job) {
                if let Some((_, tx)) = watch.waiting.take() {
                    let _ = tx.send(result.to_owned());
                }
            } else {
                watch.ended.push((job.to_owned(), result.to_owned()));
            }
        }
    }
}

impl Jobs {
    /// Starts reading `stream`, the connection's one `JobRemoved`
    /// subscription, in a task of its own until the stream or the last
    /// clone of this ends.
    pub(super) fn listen(stream: JobRemovedStream) -> Jobs {
        let mut stream = Stream(Some(stream));
        let (tx, mut gone) = oneshot::channel();
        let jobs = Jobs { state: Arc::default(), _alive: Arc::new(tx) };
        let state = Arc::downgrade(&jobs.state);
        tokio::spawn(async move {
            loop {
                let Some(signals) = stream.0.as_mut() else { return };
                let signal = tokio::select! {
                    signal = signals.next() => signal,
                    _ = &mut gone => return,
                };
                let Some(state) = state.upgrade() else { return };
                let mut state = lock(&state);
                let Some(signal) = signal else {
                    state.closed = true;
                    for watch in state.watches.values_mut() {
                        watch.waiting = None;
                    }
                    return;
                };
                let Ok(args) = signal.args() else { continue };
                state.ended(args.unit(), args.job().as_str(), args.result());
            }
        });
        jobs
    }

    /// Watches the jobs of `unit` from now until the returned watch is
    /// dropped. Call before asking the manager for the job.
    pub(super) fn watch(&self, unit: &str) -> JobWatch {
        let mut state = lock(&self.state);
        let id = state.next;
        state.next += 1;
        state.watches.insert(id, Watch { unit: unit.to_owned(), ended: Vec::new(), waiting: None });
        JobWatch { jobs: self.clone(), id }
    }
}

/// The subscription. Dropped, it has its match rule removed from the bus
/// in a task of the runtime; when the runtime itself is going (its tasks
/// dropped as it shuts down), no task can be started, and the match rule
/// goes with the connection instead.
struct Stream(Option<JobRemovedStream>);

impl Drop for Stream {
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            std::mem::forget(self.0.take());
        }
    }
}

/// The watch of one unit's jobs; see [`Jobs::watch`].
pub(super) struct JobWatch {
    jobs: Jobs,
    id: u64,
}

impl JobWatch {
    /// Waits for job `job` of the unit to end; its result (`done`,
    /// `failed`, ...).
    pub(super) async fn ended(&self, job: &str) -> Result<String, SystemdError> {
        let rx = {
            let mut state = lock(&self.jobs.state);
            let closed = state.closed;
            let Some(watch) = state.watches.get_mut(&self.id) else {
                return Err(gone());
            };
            if let Some(at) = watch.ended.iter().position(|(j, _)| j == job) {
                return Ok(watch.ended.swap_remove(at).1);
            }
            if closed {
                return Err(gone());
            }
            let (tx, rx) = oneshot::channel();
            watch.waiting = Some((job.to_owned(), tx));
            rx
        };
        rx.await.map_err(|_| gone())
    }
}

impl Drop for JobWatch {
    fn drop(&mut self) {
        lock(&self.jobs.state).watches.remove(&self.id);
    }
}

fn gone() -> SystemdError {
    SystemdError::NoManager("the bus connection ended".into())
}

/// The state, also after a panic of another holder (nothing in it is left
/// half-changed).
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(state: &mut State, unit: &str) -> u64 {
        let id = state.next;
        state.next += 1;
        state.watches.insert(id, Watch { unit: unit.to_owned(), ended: Vec::new(), waiting: None });
        id
    }

    fn kept(state: &State, id: u64) -> Vec<(String, String)> {
        state.watches.get(&id).map(|w| w.ended.clone()).unwrap_or_default()
    }

    #[test]
    fn an_end_goes_to_the_watch_of_its_unit_whether_it_comes_before_or_after_the_wait() {
        let mut state = State::default();
        let a = watch(&mut state, "a.scope");
        let b = watch(&mut state, "b.scope");
        // Before a's start knows its job: kept for it.
        state.ended("a.scope", "/job/1", "done");
        // A unit nobody watches: kept by none.
        state.ended("c.service", "/job/2", "done");
        // b waits for its job first, then the job's end comes.
        let (tx, mut rx) = oneshot::channel();
        if let Some(w) = state.watches.get_mut(&b) {
            w.waiting = Some(("/job/3".into(), tx));
        }
        // Another job of b's unit (a stop of the run before) is not it.
        state.ended("b.scope", "/job/0", "done");
        assert!(rx.try_recv().is_err());
        state.ended("b.scope", "/job/3", "failed");
        assert_eq!(rx.try_recv().ok().as_deref(), Some("failed"));
        assert_eq!(kept(&state, a), [("/job/1".to_owned(), "done".to_owned())]);
        assert_eq!(kept(&state, b), [("/job/0".to_owned(), "done".to_owned())]);
    }
}
