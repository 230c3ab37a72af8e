//! How an owner's interrupt reaches the work in progress.
//!
//! A turn marks itself active while it runs. Whatever it is blocked on
//! registers a hook here: the model request its socket (shut down to cancel
//! the request), `bash` its process group (killed), the wait for a tool a
//! message to the waiting turn. An interrupt while a turn is active marks it
//! cancelled and runs every hook once; an interrupt at rest does nothing and
//! is not kept. Waits between retries sleep on a condition variable that an
//! interrupt wakes.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Hook = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    active: bool,
    cancelled: bool,
    next_id: u64,
    hooks: Vec<(u64, Hook)>,
}

#[derive(Default)]
pub struct Cancel {
    state: Mutex<State>,
    woken: Condvar,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A turn starts: interrupts count from now on.
    pub fn begin(&self) {
        let mut state = self.lock();
        state.active = true;
        state.cancelled = false;
    }

    /// The turn is over: later interrupts are dropped.
    pub fn end(&self) {
        let mut state = self.lock();
        state.active = false;
        state.cancelled = false;
    }

    /// The owner interrupts. Returns false when no turn was running (the
    /// interrupt is dropped) or it was already interrupted.
    pub fn interrupt(&self) -> bool {
        let hooks = {
            let mut state = self.lock();
            if !state.active || state.cancelled {
                return false;
            }
            state.cancelled = true;
            std::mem::take(&mut state.hooks)
        };
        self.woken.notify_all();
        for (_, hook) in hooks {
            hook();
        }
        true
    }

    /// The body stops: run every hook (kill what runs), active or not.
    pub fn stop_all(&self) {
        let hooks = std::mem::take(&mut self.lock().hooks);
        for (_, hook) in hooks {
            hook();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// Registers `hook` to run on an interrupt. When the turn is already
    /// cancelled it runs now and `None` comes back.
    pub fn on_interrupt(&self, hook: Hook) -> Option<u64> {
        let mut state = self.lock();
        if state.cancelled {
            drop(state);
            hook();
            return None;
        }
        state.next_id += 1;
        let id = state.next_id;
        state.hooks.push((id, hook));
        Some(id)
    }

    /// Removes a hook that is no longer needed (the work finished).
    pub fn forget(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.lock().hooks.retain(|(hook_id, _)| *hook_id != id);
        }
    }

    /// Sleeps for `time` unless interrupted first; true when it slept it all.
    pub fn sleep(&self, time: Duration) -> bool {
        let until = Instant::now() + time;
        let mut state = self.lock();
        while !state.cancelled {
            let now = Instant::now();
            if now >= until {
                return true;
            }
            state = match self.woken.wait_timeout(state, until - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        false
    }
}
