//! The event socket: the body's only way into the journal (contract, section 3).
//!
//! One connection for the body's whole life. Each event is one JSON line; the
//! kernel answers each with one line, in order: `{"ok":true,"seq":N}` when it
//! is journaled, `{"ok":true}` when it was only logged, `{"ok":false,
//! "error":..}` when refused. A send holds the connection until its answer is
//! read, so two threads never interleave their lines, and holding it (see
//! [`Events::hold`]) is how a stopping body waits for the write in flight.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::{json, Value};

/// Why an event did not reach the journal.
#[derive(Debug)]
pub enum SendError {
    /// The kernel read it and said no; nothing was written.
    Refused(String),
    /// The socket is gone: the kernel stopped or broke the connection.
    Broken(io::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Refused(why) => write!(f, "the kernel refused the event: {why}"),
            SendError::Broken(e) => write!(f, "the kernel's event socket is gone: {e}"),
        }
    }
}

pub struct Events {
    conn: Mutex<Conn>,
}

pub struct Conn {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Events {
    pub fn connect(path: &Path) -> io::Result<Events> {
        Events::over(UnixStream::connect(path)?)
    }

    /// Events over a stream already connected to the kernel.
    pub fn over(writer: UnixStream) -> io::Result<Events> {
        let reader = BufReader::new(writer.try_clone()?);
        Ok(Events { conn: Mutex::new(Conn { writer, reader }) })
    }

    /// Sends one event and waits for its answer: `Some(seq)` when journaled,
    /// `None` when accepted without being journaled (a `log`).
    pub fn send(&self, event: &Value) -> Result<Option<u64>, SendError> {
        let mut line = event.to_string();
        line.push('\n');
        let mut conn = self.hold();
        conn.writer.write_all(line.as_bytes()).map_err(SendError::Broken)?;
        let mut answer = String::new();
        let n = conn.reader.read_line(&mut answer).map_err(SendError::Broken)?;
        if n == 0 {
            return Err(SendError::Broken(io::ErrorKind::UnexpectedEof.into()));
        }
        let answer: Value = serde_json::from_str(&answer).map_err(|e| {
            SendError::Broken(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
        })?;
        if answer["ok"] == json!(true) {
            Ok(answer["seq"].as_u64())
        } else {
            let why = answer["error"].as_str().unwrap_or("no reason given");
            Err(SendError::Refused(why.to_owned()))
        }
    }

    /// A line for the kernel's log, never journaled. A failure to log is
    /// not worth stopping for, so it is only written to stderr.
    pub fn log(&self, level: &str, text: &str) {
        let event = json!({"type": "log", "level": level, "text": text});
        if let Err(e) = self.send(&event) {
            eprintln!("teneral-body: {text} ({e})");
        }
    }

    /// The connection, held: no event is sent by anyone until it is dropped.
    pub fn hold(&self) -> MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
