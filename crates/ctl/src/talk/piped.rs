//! The client reading its lines from a pipe, for scripts: one line at a
//! time, each sent and then waited for until the turn that answers it ends.
//!
//! Invariants: a line is sent only after the turn answering the one before
//! it ended; `/stop` is never sent as text, and becomes an interrupt only
//! when a turn is in progress; `/image <path>` is never sent as text: it
//! attaches the image to the next line sent, and an image refused (not an
//! image, too big, a fifth) ends the client with status 1 before anything
//! more is sent; the wait for a line ends with status 1 once nothing was
//! journaled for `--wait`, and the message says what to check.

use std::io::{self, BufRead, Write};
use std::time::{Duration, Instant};

use super::image::{self, Image};
use super::turns::{Activity, Outcome, Waiting};
use super::{Client, TalkError, TalkOptions};
use crate::owner::OWNER_DIR;

/// A piped line that interrupts instead of being sent.
const STOP: &str = "/stop";
/// A piped line that attaches an image to the next line sent.
const IMAGE: &str = "/image ";

pub(super) fn run(
    opts: &TalkOptions,
    mut input: impl BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, TalkError> {
    let Some(first) = read_line(&mut input)? else {
        // No lines at all: show where the conversation stands, and leave.
        let (mut client, entries) = Client::attach(&opts.home, opts.history, false, out, err)?;
        for entry in entries {
            client.print(&entry)?;
        }
        client.note_if_not_running(false)?;
        return Ok(0);
    };
    let (mut client, _) = Client::attach(&opts.home, 0, true, out, err)?;
    client.note_if_not_running(true)?;
    let mut status = 0;
    let mut line = Some(first);
    let mut images = Vec::new();
    while let Some(text) = line {
        if let Some(path) = text.strip_prefix(IMAGE) {
            let path = image::pasted_path(path).unwrap_or_else(|| path.trim().into());
            match image::load(&path) {
                Ok(_) if images.len() >= image::MAX_PER_LINE => {
                    client.say(&format!("teneralctl talk: {}", image::ImageError::TooMany))?;
                    return Ok(1);
                }
                Ok(im) => images.push(im),
                Err(e) => {
                    client.say(&format!("teneralctl talk: {e}"))?;
                    return Ok(1);
                }
            }
            line = read_line(&mut input)?;
            continue;
        }
        match one_line(&mut client, &text, opts.wait, &mut images)? {
            Step::Skipped | Step::Over(Outcome::Ended | Outcome::Interrupted) => {}
            Step::Over(Outcome::Gone) => {
                client.say(
                    "teneralctl talk: the agent stopped before its turn ended; no reply will \
                     come to that line (journalctl --user -u teneral says why)",
                )?;
                status = 1;
            }
            Step::Expired => return Ok(1),
        }
        line = read_line(&mut input)?;
    }
    Ok(status)
}

/// How the wait for one piped line ended.
enum Step {
    /// Nothing was sent: an empty line, or `/stop` with no turn to stop.
    Skipped,
    /// The turn that followed is over.
    Over(Outcome),
    /// Nothing was journaled for the wait limit.
    Expired,
}

/// Sends one line (or interrupts, for `/stop`) and waits for the turn that
/// follows to end.
fn one_line(
    client: &mut Client<'_>,
    text: &str,
    wait: Duration,
    images: &mut Vec<Image>,
) -> Result<Step, TalkError> {
    if text.trim().is_empty() && images.is_empty() {
        return Ok(Step::Skipped);
    }
    let mut waiting = if text.trim() == STOP {
        client.catch_up()?;
        if !client.running() {
            client.say(
                "teneralctl talk: /stop: teneral is not running, so there is no turn to stop; \
                 nothing was sent",
            )?;
            return Ok(Step::Skipped);
        }
        if client.activity == Activity::Resting {
            client.say(
                "teneralctl talk: /stop: the agent is at rest, there is no turn to stop; \
                 nothing was sent",
            )?;
            return Ok(Step::Skipped);
        }
        client.send_interrupt()?;
        Waiting::Rest
    } else {
        for im in images.iter() {
            image::store(&client.home, im)?;
        }
        let file = client.send_line(&image::line_text(text, images))?;
        images.clear();
        Waiting::Line { file, taken: false }
    };
    let mut deadline = Instant::now() + wait;
    loop {
        let Some(event) = client.next_event(deadline)? else {
            let message = expired(wait, &waiting);
            client.say(&message)?;
            return Ok(Step::Expired);
        };
        deadline = Instant::now() + wait;
        client.show(&event)?;
        if let Some(outcome) = waiting.on_event(&event) {
            return Ok(Step::Over(outcome));
        }
    }
}

/// The next line of input without its line ending; `None` at the end.
fn read_line(input: &mut impl BufRead) -> Result<Option<String>, TalkError> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) => Ok(None),
        Ok(_) => {
            let end = line.trim_end_matches(['\n', '\r']).len();
            line.truncate(end);
            Ok(Some(line))
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(TalkError::Input(io::Error::new(
            io::ErrorKind::InvalidData,
            "a line is not UTF-8 text; send text",
        ))),
        Err(e) => Err(TalkError::Input(e)),
    }
}

/// What the client says when nothing was journaled for `wait`.
pub(super) fn expired(wait: Duration, waiting: &Waiting) -> String {
    let secs = wait.as_secs();
    let head = format!("teneralctl talk: nothing was journaled for {secs} s");
    let longer = "--wait SECS waits longer";
    match waiting {
        Waiting::Line { file, taken: false } => format!(
            "{head} and the agent has not taken your line in; it waits in {OWNER_DIR}/{file}. \
             Check that teneral runs (systemctl --user status teneral, journalctl --user -u \
             teneral); {longer}"
        ),
        Waiting::Line { taken: true, .. } => format!(
            "{head} while the agent was answering your line. See what it is doing with \
             journalctl --user -u teneral or teneralctl talk; {longer}"
        ),
        Waiting::Rest => format!(
            "{head} after the interrupt. A body from before interrupts does not hear them; \
             journalctl --user -u teneral shows what it does, and systemctl --user stop \
             teneral stops it for certain; {longer}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_their_endings_only() {
        let mut input = io::Cursor::new(b"one\r\n  two  \n\nlast".to_vec());
        let mut lines = Vec::new();
        while let Ok(Some(line)) = read_line(&mut input) {
            lines.push(line);
        }
        assert_eq!(lines, ["one", "  two  ", "", "last"]);
    }

    #[test]
    fn expiry_says_what_to_check() {
        let wait = Duration::from_secs(60);
        let not_taken = expired(wait, &Waiting::Line { file: "x.txt".into(), taken: false });
        assert!(not_taken.contains("60 s"), "{not_taken}");
        assert!(not_taken.contains(".teneral/owner/x.txt"), "{not_taken}");
        assert!(not_taken.contains("systemctl --user status teneral"), "{not_taken}");
        let taken = expired(wait, &Waiting::Line { file: "x.txt".into(), taken: true });
        assert!(taken.contains("while the agent was answering"), "{taken}");
        assert!(expired(wait, &Waiting::Rest).contains("after the interrupt"));
    }
}
