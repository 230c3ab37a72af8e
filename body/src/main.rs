//! `teneral-body`: the seed body's entry point and main loop.
//!
//! Start: read the environment (exit 2 when it is not what the contract
//! promises), connect to the kernel's event socket, read the journal back,
//! start the sensors, report `generation.ready`. Then, for ever: wait for
//! something to wake the agent (an owner line, an envelope, the clock),
//! journal it, and run a turn. A new individual, whose journal holds no
//! message yet, starts with the letter in `BIRTH.md`. A body that finds
//! something unanswered in the journal (it stopped mid-turn, or the kernel
//! wrote to the agent while it was down) answers that first.
//!
//! A turn in which the `mutate` tool asked for a new generation is the
//! last: once it has ended, the body exits with status 75 and the kernel
//! checks the commit.
//!
//! SIGTERM (or SIGINT) stops the body: whatever runs is killed, the event
//! being written is let finish, and the body exits with status 0.

use std::collections::BTreeSet;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;

use serde_json::json;
use teneral_body::cancel::Cancel;
use teneral_body::clock::Clock;
use teneral_body::config::Config;
use teneral_body::events::Events;
use teneral_body::sensors::{self, Wake};
use teneral_body::turn::Body;
use teneral_body::{mutate, prompt, sys};

fn main() {
    let code = match run() {
        Ok(()) => 0,
        Err((code, message)) => {
            eprintln!("teneral-body: {message}");
            code
        }
    };
    std::process::exit(code);
}

fn run() -> Result<(), (i32, String)> {
    sys::one_malloc_arena();
    let config = Config::from_env().map_err(|e| (2, e))?;
    sys::block_stop_signals().map_err(|e| (1, format!("cannot block stop signals: {e}")))?;
    let events = Events::connect(&config.events).map_err(|e| {
        (1, format!("cannot connect to the event socket {}: {e}", config.events.display()))
    })?;
    let events = Arc::new(events);
    let cancel = Arc::new(Cancel::new());
    {
        let (events, cancel) = (Arc::clone(&events), Arc::clone(&cancel));
        thread::spawn(move || {
            sys::wait_stop_signal();
            let _held = events.hold(); // the event in flight is answered; no other starts
            cancel.stop_all(); // kill a running command, cut a request
            std::process::exit(0);
        });
    }
    let home = config.home.clone();
    let clock_every = config.heartbeat;
    let mut body = Body::new(config, Arc::clone(&events), Arc::clone(&cancel))
        .map_err(|e| (1, format!("cannot read the journal: {e}")))?;

    let (tx, rx) = mpsc::channel();
    sensors::start(&home, cancel, tx).map_err(|e| (1, format!("cannot start the sensors: {e}")))?;
    body.journal(json!({"type": "generation.ready"}))
        .map_err(|why| (1, format!("the kernel refused generation.ready: {why}")))?;

    let mut clock = Clock::new(clock_every);
    let mut unborn = !body.conversation.has_message;
    let mut resume = body.conversation.unanswered;
    loop {
        let mark = body.conversation.mark();
        let mut woke = false;
        if unborn {
            unborn = false;
            woke = body.birth();
        } else if resume {
            resume = false;
            woke = true; // a turn left unfinished, or the kernel wrote: answer it
        }
        let mut wakes = BTreeSet::new();
        if !woke {
            let first = match clock.until_next() {
                Some(wait) => rx.recv_timeout(wait),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match first {
                Ok(wake) => drop(wakes.insert(wake)),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err((1, "the sensors stopped".into()))
                }
            }
        }
        wakes.extend(rx.try_iter()); // lines first, oldest first; then envelopes
        for wake in wakes {
            woke |= match wake {
                Wake::Line(name) => body.take_line(&name),
                Wake::Inbox(name) => body.take_envelope(&name),
            };
        }
        if clock.due() && !woke && prompt::soul_written(&home) {
            woke = body.clock(clock.text());
        }
        if woke {
            body.run_turn(mark);
            sys::trim_heap(); // at rest until the next wake: keep no freed pages
        }
        if let Some(candidate) = body.mutation() {
            events
                .log("info", &format!("mutation to {candidate} requested; exiting for the check"));
            let _held = events.hold(); // nothing is left half sent
            std::process::exit(mutate::EXIT);
        }
    }
}
