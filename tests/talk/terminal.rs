//! The talk client at a terminal, typed at one chunk at a time: the last
//! exchanges first, then lines from other clients, the owner's own lines
//! and the commands, as the conversation goes on.

use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use teneralctl::talk::{session, TalkOptions};

use super::{await_owner_file, hold_kernel_lock, home, owner_files, Journal, Shared, LIVENESS};

/// Input typed at a terminal, one chunk at a time, for as long as the test wants.
struct Typing(std::sync::mpsc::Receiver<Vec<u8>>, Vec<u8>);

impl std::io::Read for Typing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.1.is_empty() {
            match self.0.recv() {
                Ok(bytes) => self.1 = bytes,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.1.len());
        buf[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}

/// Waits until the client's output holds `text`.
fn await_output(out: &Shared, text: &str) {
    let start = Instant::now();
    while !out.text().contains(text) {
        assert!(start.elapsed() < LIVENESS, "never printed {text:?}: {}", out.text());
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn at_a_terminal_history_then_the_conversation_follows() {
    let dir = home();
    let home = dir.path().to_owned();
    let mut journal = Journal::new(&home);
    for n in 1..=4 {
        journal.exchange(n);
    }
    let _lock = hold_kernel_lock(&home);
    let (keys, typed) = std::sync::mpsc::channel::<Vec<u8>>();
    let out = Shared::default();
    let client = {
        let (home, mut out) = (home.clone(), out.clone());
        thread::spawn(move || {
            let opts = TalkOptions { home, wait: Duration::from_secs(5), history: 2 };
            let input = std::io::BufReader::new(Typing(typed, Vec::new()));
            let mut err = Vec::new();
            let status = session(&opts, input, true, &mut out, &mut err);
            (status.map_err(|e| e.to_string()), String::from_utf8_lossy(&err).into_owned())
        })
    };
    await_output(&out, "  answer 4\n");
    assert!(out.text().contains("› question 3\n"), "{}", out.text());
    assert!(!out.text().contains("question 2"), "{}", out.text());

    // A line typed in another client is shown marked.
    journal.add("owner.line", json!({"file": "other.txt", "text": "from elsewhere"}));
    journal.add("reply", json!({"text": "answered elsewhere"}));
    journal.add("turn.ended", json!({}));
    await_output(&out, "› from elsewhere\n  answered elsewhere\n");

    // A typed line becomes an owner file; the terminal already shows it.
    let send =
        |text: &str| keys.send(text.as_bytes().to_vec()).expect("the client still reads keys");
    send("mine\n");
    let file = await_owner_file(&home, ".txt", &[]);
    journal.answer(&home, &file, "answered mine");
    await_output(&out, "  answered mine\n");
    assert!(!out.text().contains("› mine"), "own line printed twice: {}", out.text());

    // /stop at rest sends nothing; an unknown command is not sent; /quit leaves.
    send("/stop\n/nonsense\n/quit\n");
    let (status, err) = client.join().expect("the client thread did not fail");
    assert_eq!(status, Ok(0), "{err}");
    assert!(err.contains("the agent is at rest"), "{err}");
    assert!(err.contains("/nonsense is not a command"), "{err}");
    assert!(err.contains("the agent goes on"), "{err}");
    assert!(owner_files(&home, "").is_empty(), "only the one line was sent, and taken");
}
