//! Asking the owner, one answer a line: at a terminal or from a pipe
//! (`--plain`). A key is read with the terminal's echo off (and Ctrl-C
//! read as giving up, not as a signal that would leave the echo off).
//! While a sign-in waits, [`Asker::gave_up`] watches for Esc or Ctrl-C (a
//! line from a pipe) with the terminal quiet ([`Quiet`]).
//!
//! Invariants: the echo is turned back on however the read ends (a guard
//! restores the terminal's modes); the end of input is an error that names
//! the answer that was missing; [`pick`] is pure.
use std::io::{BufRead, Write};
use std::os::fd::AsFd;

/// The input ended before an answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the input ended before {what} was given")]
    Ended { what: String },
    #[error("you gave up (Ctrl-C) at {what}")]
    GaveUp { what: String },
    #[error("cannot read the answer to {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Questions and answers over `input` and `out`.
pub struct Asker<R, W> {
    pub input: R,
    pub out: W,
    /// Stdin is a terminal: a key is read unseen.
    pub terminal: bool,
}

impl<R: BufRead, W: Write> Asker<R, W> {
    /// Prints a line to the owner (a failed write is not worth stopping for).
    pub fn say(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
    }

    /// One answer, trimmed.
    pub fn line(&mut self, what: &str, prompt: &str) -> Result<String, AskError> {
        self.prompt(prompt);
        self.read(what)
    }

    /// At a terminal the answer is typed after the question; from a pipe
    /// each question is a line of its own.
    fn prompt(&mut self, prompt: &str) {
        let end = if self.terminal { " " } else { "\n" };
        let _ = write!(self.out, "{prompt}{end}");
        let _ = self.out.flush();
    }

    fn read(&mut self, what: &str) -> Result<String, AskError> {
        let mut answer = String::new();
        let n = self
            .input
            .read_line(&mut answer)
            .map_err(|source| AskError::Io { what: what.to_owned(), source })?;
        if n == 0 {
            return Err(AskError::Ended { what: what.to_owned() });
        }
        Ok(answer.trim().to_owned())
    }

    /// An answer typed unseen when stdin is a terminal.
    pub fn secret(&mut self, what: &str, prompt: &str) -> Result<String, AskError> {
        self.prompt(prompt);
        if !self.terminal {
            return self.read(what);
        }
        let guard = EchoOff::new();
        let answer = self.read(what);
        drop(guard);
        // With the signals off, Ctrl-C arrives as a character.
        let answer = answer.and_then(|a| {
            if a.contains('\u{3}') {
                Err(AskError::GaveUp { what: what.to_owned() })
            } else {
                Ok(a)
            }
        });
        self.say(if answer.as_ref().is_ok_and(|a| !a.is_empty()) {
            "(typed, not shown)"
        } else {
            ""
        });
        answer
    }

    /// One of `options` by its number or name; with `other`, any other
    /// non-empty answer is taken as it is. Asks again after a wrong answer.
    pub fn choose(
        &mut self,
        what: &str,
        options: &[String],
        other: bool,
        prompt: &str,
    ) -> Result<String, AskError> {
        for (i, option) in options.iter().enumerate() {
            self.say(&format!("  {}) {option}", i + 1));
        }
        loop {
            let answer = self.line(what, prompt)?;
            match pick(&answer, options, other) {
                Some(chosen) => return Ok(chosen),
                None if options.is_empty() => self.say("Type a name."),
                None => self.say(&format!(
                    "Type a number from 1 to {}{}.",
                    options.len(),
                    if other { ", or a name" } else { " or one of the names" }
                )),
            }
        }
    }

    /// Yes or no; anything but y or yes is no.
    pub fn yes(&mut self, what: &str, prompt: &str) -> Result<bool, AskError> {
        let answer = self.line(what, prompt)?;
        Ok(matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes"))
    }
}

impl<R: BufRead, W: Write> Asker<R, W> {
    /// Whether the owner gave up: Esc or Ctrl-C at a terminal, any line or the
    /// end of input from a pipe. Never blocks.
    pub fn gave_up(&mut self) -> bool {
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
        let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
        if !matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
            return false;
        }
        if self.terminal {
            // Every key typed so far; Esc or Ctrl-C among them gives up.
            let Ok(typed) = self.input.fill_buf() else { return true };
            let quit = typed.is_empty() || typed.iter().any(|b| matches!(b, 0x1b | 0x03));
            let n = typed.len();
            self.input.consume(n);
            quit
        } else {
            let mut line = String::new();
            let _ = self.input.read_line(&mut line);
            true
        }
    }
}

/// The option an answer names: its number (from 1), its exact name, or
/// with `other` the answer itself.
pub fn pick(answer: &str, options: &[String], other: bool) -> Option<String> {
    if answer.is_empty() {
        return None;
    }
    if let Ok(n) = answer.parse::<usize>() {
        if let Some(option) = n.checked_sub(1).and_then(|i| options.get(i)) {
            return Some(option.clone());
        }
    }
    if let Some(option) = options.iter().find(|o| o.as_str() == answer) {
        return Some(option.clone());
    }
    other.then(|| answer.to_owned())
}

/// The terminal's echo, off while this lives. Its signal keys are off too,
/// so Ctrl-C cannot end the process with the echo left off.
struct EchoOff {
    saved: Option<rustix::termios::Termios>,
}

impl EchoOff {
    fn new() -> EchoOff {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok();
        if let Some(saved) = &saved {
            let mut quiet = saved.clone();
            quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
            quiet.local_modes.remove(rustix::termios::LocalModes::ISIG);
            let _ =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet);
        }
        EchoOff { saved }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let stdin = std::io::stdin();
            let _ =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, saved);
        }
    }
}

/// The terminal without line editing, echo or signals while the sign-in
/// waits, so Esc arrives at once; restored when dropped.
pub(super) struct Quiet {
    saved: Option<rustix::termios::Termios>,
}

impl Quiet {
    pub(super) fn new() -> Quiet {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok();
        if let Some(saved) = &saved {
            let mut raw = saved.clone();
            raw.local_modes.remove(
                rustix::termios::LocalModes::ECHO
                    | rustix::termios::LocalModes::ICANON
                    | rustix::termios::LocalModes::ISIG,
            );
            let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &raw);
        }
        Quiet { saved }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                saved,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks() {
        let options: Vec<String> = ["openai", "compatible", "standin"].map(String::from).to_vec();
        let table: &[(&str, bool, Option<&str>)] = &[
            ("1", false, Some("openai")),
            ("3", false, Some("standin")),
            ("compatible", false, Some("compatible")),
            ("0", false, None),
            ("4", false, None),
            ("", true, None),
            ("gpt", false, None),
            ("gpt", true, Some("gpt")),
            ("9", true, Some("9")),
        ];
        for (answer, other, expected) in table {
            assert_eq!(pick(answer, &options, *other).as_deref(), *expected, "{answer:?}");
        }
    }

    #[test]
    fn a_pipe_asks_again_and_names_what_ended() {
        let options = vec!["a".to_owned(), "b".to_owned()];
        let mut asker = Asker { input: &b"x\n2\n"[..], out: Vec::new(), terminal: false };
        assert_eq!(
            asker.choose("the letter", &options, false, "Letter:").ok().as_deref(),
            Some("b")
        );
        let shown = String::from_utf8_lossy(&asker.out).into_owned();
        assert!(shown.contains("1) a") && shown.contains("Type a number from 1 to 2"), "{shown}");
        let ended = asker.line("the key", "Key:");
        assert!(matches!(ended, Err(AskError::Ended { what }) if what == "the key"));
    }
}
