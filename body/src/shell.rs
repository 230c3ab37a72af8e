//! The `bash` tool: one command, in the individual's directory, in a process
//! group of its own.
//!
//! The command may run two minutes. At the limit, or when the owner
//! interrupts, the whole group is killed at once, so nothing it started is
//! left running. Output (stdout and stderr, interleaved as written) is kept
//! bounded: the first and last parts, with the cut stated between them. When
//! the shell ends but something it put in the background still holds the
//! output open, the body waits a second more and then answers with what it
//! has, leaving that process be.

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::sys;

/// How long one command may run.
pub const LIMIT: Duration = Duration::from_secs(120);
/// Bytes kept from the start and from the end of the output.
pub const HEAD: usize = 10_000;
pub const TAIL: usize = 20_000;

#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = HEAD - self.head.len();
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(TAIL);
        self.tail.drain(..excess);
    }

    fn text(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            text.push_str(&format!(
                "\n[... {} bytes of output cut here; {} in all ...]\n",
                self.total - kept,
                self.total
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

enum Event {
    Exited(std::io::Result<ExitStatus>),
    Drained,
}

/// Runs `command` with bash in `dir`; returns the output and whether it
/// failed.
pub fn run(dir: &Path, command: &str, cancel: &Cancel, limit: Duration) -> (String, bool) {
    let (reader, writer) = match sys::pipe() {
        Ok(pipe) => pipe,
        Err(e) => return (format!("could not make a pipe: {e}"), true),
    };
    // The Command holds the pipe's writing end; it goes when the
    // statement ends, so the output ends when the command's processes end.
    let spawned = writer.try_clone().and_then(|stdout| {
        Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(writer)
            .process_group(0)
            .spawn()
    });
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return (format!("could not start bash: {e}"), true),
    };
    let group = child.id();
    let hook = cancel.on_interrupt(Box::new(move || sys::kill_group(group)));

    let capture = Arc::new(Mutex::new(Capture::default()));
    let (tx, rx) = mpsc::channel();
    let (sink, done) = (Arc::clone(&capture), tx.clone());
    thread::spawn(move || {
        let mut reader = reader;
        let mut buffer = [0u8; 8192];
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(&buffer[..n]);
        }
        let _ = done.send(Event::Drained);
    });
    thread::spawn(move || {
        let _ = tx.send(Event::Exited(child.wait()));
    });

    let mut deadline = Instant::now() + limit;
    let mut status = None;
    let mut timed_out = false;
    let mut drained = false;
    while status.is_none() {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited(result)) => status = Some(result),
            Ok(Event::Drained) => drained = true,
            Err(_) if !timed_out => {
                timed_out = true;
                sys::kill_group(group);
                deadline = Instant::now() + Duration::from_secs(2);
            }
            Err(_) => break, // killed, and still not reaped: give up on it
        }
    }
    if !drained {
        let _ = rx.recv_timeout(Duration::from_secs(1));
    }
    cancel.forget(hook);

    let mut text = capture.lock().unwrap_or_else(|p| p.into_inner()).text();
    let failed = !matches!(&status, Some(Ok(s)) if s.success());
    let note = match status {
        _ if timed_out => format!(
            "[stopped after {} seconds: the command and everything it started were killed]",
            limit.as_secs()
        ),
        Some(Ok(s)) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(0), _) => String::new(),
            (Some(code), _) => format!("[exit status {code}]"),
            (None, Some(signal)) => format!("[killed by signal {signal}]"),
            (None, None) => "[ended]".to_owned(),
        },
        Some(Err(e)) => format!("[could not wait for bash: {e}]"),
        None => "[it did not end after being killed]".to_owned(),
    };
    if !note.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    if text.is_empty() {
        text = "(no output)".to_owned();
    }
    (text, failed)
}
