//! An organ's `check`: its first word, a file of the organ, run in the
//! organ's root with the environment the caller gives and a time limit.
//!
//! Invariants: the program is a regular file inside the organ's tree (the
//! pin's word is a relative path without `..`, and the unpacker proved every
//! link of the tree stays inside); the check starts through
//! [`crate::spawn::spawn`] in a process group of its own, and that whole
//! group is killed when the check ends or passes its limit.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use crate::spawn::{self, Exit, Output, Spec};

/// How much of a check's output is kept for the message.
const TAIL_BYTES: usize = 4000;

/// How a check ended, when it did not pass.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("its first word {0:?} is not a file of the organ")]
    NotAFile(String),
    #[error("it cannot be started: {0}")]
    Spawn(std::io::Error),
    #[error("it ended with {exit}; its output ends with:\n{tail}")]
    Failed { exit: Exit, tail: String },
    #[error("it ran past {} s and was killed; its output ends with:\n{tail}", limit.as_secs())]
    TimedOut { limit: Duration, tail: String },
}

/// Runs `words` in `root` with `env`, at most `limit`, in the cage's `organ`
/// profile when `cage` holds its options (the temp dir of `env` writable).
pub async fn run_check(
    root: &Path,
    words: &[String],
    env: &[(String, OsString)],
    limit: Duration,
    cage: Option<&crate::confine::Options>,
) -> Result<(), CheckError> {
    let Some((first, args)) = words.split_first() else {
        return Err(CheckError::NotAFile(String::new()));
    };
    let program = root.join(first);
    if !program.metadata().is_ok_and(|m| m.is_file()) {
        return Err(CheckError::NotAFile(first.clone()));
    }
    let mut argv: Vec<OsString> = vec![program.into_os_string()];
    argv.extend(args.iter().map(OsString::from));
    if let Some(options) = cage {
        let writable: Vec<std::path::PathBuf> =
            env.iter().filter(|(k, _)| k == "TMPDIR").map(|(_, v)| v.into()).collect();
        let profile = crate::confine::Profile::Organ { root: root.to_owned(), writable };
        argv = crate::confine::wrap_with(&profile, options, argv).map_err(CheckError::Spawn)?;
    }
    let Some((program, args)) = argv.split_first() else {
        return Err(CheckError::NotAFile(String::new()));
    };
    let mut spec = Spec::new(program, root);
    spec.args = args.to_vec();
    spec.env = env.to_vec();
    spec.stdout = Output::Pipe;
    spec.stderr = Output::Pipe;
    let mut child = spawn::spawn(spec).map_err(CheckError::Spawn)?;
    let out = tokio::spawn(tail(child.stdout.take()));
    let err = tokio::spawn(tail(child.stderr.take()));
    let ended = tokio::time::timeout(limit, child.wait()).await;
    // Whatever the check left running in its group goes with it.
    child.signal(Signal::KILL);
    let exit = match ended {
        Ok(exit) => Some(exit),
        Err(_) => {
            child.wait().await;
            None
        }
    };
    let mut text = String::new();
    for task in [out, err] {
        // A process that left the group may hold a pipe open: wait briefly.
        if let Ok(Ok(part)) = tokio::time::timeout(Duration::from_secs(2), task).await {
            text.push_str(&part);
        }
    }
    let tail = last_chars(&text, TAIL_BYTES);
    match exit {
        Some(exit) if exit.success() => Ok(()),
        Some(exit) => Err(CheckError::Failed { exit, tail }),
        None => Err(CheckError::TimedOut { limit, tail }),
    }
}

/// Reads `pipe` to its end, keeping the last [`TAIL_BYTES`] bytes as text.
async fn tail(pipe: Option<pipe::Receiver>) -> String {
    let mut kept: Vec<u8> = Vec::new();
    if let Some(mut pipe) = pipe {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 2 * TAIL_BYTES {
                kept.drain(..kept.len() - TAIL_BYTES);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

fn last_chars(text: &str, n: usize) -> String {
    let start = text.len().saturating_sub(n);
    let start = (start..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    text[start..].trim_end().to_owned()
}
