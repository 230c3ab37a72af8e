//! The client at a terminal: the last few exchanges, then the conversation
//! as it is journaled, while each typed line goes to the agent.
//!
//! Invariants: one thread prints (this one); typed lines come from a reader
//! thread and journal changes from the watcher, both through one channel;
//! `/stop` sends an interrupt only while a turn is in progress and no other
//! interrupt of this client is unanswered; leaving never stops the agent.

use std::io::{BufRead, Write};

use super::image::{self, Image};
use super::turns::{classify, Activity, Typed, COMMANDS};
use super::{Client, TalkError, TalkOptions, Wake};

pub(super) fn run<R: BufRead + Send + 'static>(
    opts: &TalkOptions,
    input: R,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, TalkError> {
    let (mut client, entries) = Client::attach(&opts.home, opts.history, true, out, err)?;
    for entry in entries {
        client.print(&entry)?;
    }
    client.note_if_not_running(true)?;
    client.say("[type a line to send it; /help lists the commands, /quit leaves]")?;
    let tx = client.tx.clone();
    std::thread::spawn(move || {
        for line in input.lines() {
            let wake = match line {
                Ok(line) => Wake::Line(line),
                Err(e) => Wake::InputFailed(e),
            };
            let failed = matches!(wake, Wake::InputFailed(_));
            if tx.send(wake).is_err() || failed {
                return;
            }
        }
        let _ = tx.send(Wake::End);
    });
    let mut images = Vec::new();
    while let Ok(wake) = client.rx.recv() {
        match wake {
            Wake::Journal => client.catch_up()?,
            Wake::Line(line) => {
                if !typed(&mut client, &line, &mut images)? {
                    break;
                }
            }
            Wake::End => break,
            Wake::InputFailed(e) => return Err(TalkError::Input(e)),
            Wake::Term(_) => {}
        }
    }
    client.say("[left; the agent goes on]")?;
    Ok(0)
}

/// Acts on one typed line; false when the owner leaves.
fn typed(client: &mut Client<'_>, line: &str, images: &mut Vec<Image>) -> Result<bool, TalkError> {
    match classify(line) {
        Typed::Empty => {}
        Typed::Quit => return Ok(false),
        Typed::Help => {
            let width = COMMANDS.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
            for (name, what) in COMMANDS {
                client.print(&format!("  {name:width$}  {what}"))?;
            }
            client.print("  Any other line is sent to the agent as its owner's.")?;
        }
        Typed::Stop => stop(client)?,
        Typed::History => history(client)?,
        Typed::Accept(commit) => {
            match crate::accept::accept(&client.home, commit.as_deref(), crate::accept::Via::Talk) {
                Ok(commit) => client.say(&crate::accept::said(&commit))?,
                Err(e) => client.say(&e.to_string())?,
            }
        }
        Typed::Offers => match crate::offer::manage::list_text(&client.home) {
            Ok(text) => text.lines().try_for_each(|l| client.say(l))?,
            Err(e) => client.say(&e.to_string())?,
        },
        Typed::Approve(commit) => match crate::offer::manage::approve(&client.home, &commit) {
            Ok(c) => client.say(&crate::offer::manage::approved_text(&client.home, &c))?,
            Err(e) => client.say(&e.to_string())?,
        },
        Typed::NotYet(command) => {
            client.say(&format!("{command} is not in this version of the plain client yet"))?;
        }
        Typed::Unknown(text) => client.say(&format!(
            "{text} is not a command and was not sent; /help lists the commands, and a line \
             that begins with // is sent with one slash"
        ))?,
        Typed::Image(path) => {
            let path = image::pasted_path(&path).unwrap_or_else(|| path.into());
            match image::load(&path) {
                Ok(_) if images.len() >= image::MAX_PER_LINE => {
                    client.say(&format!("[{}]", image::ImageError::TooMany))?;
                }
                Ok(im) => {
                    let chip = im.chip(images.len() + 1, true);
                    images.push(im);
                    client.say(&format!("[attached {chip}; it goes with your next line]"))?;
                }
                Err(e) => client.say(&format!("[{e}]"))?,
            }
        }
        Typed::Send(text) => {
            if let Some(e) = images.iter().find_map(|im| image::store(&client.home, im).err()) {
                return client.say(&format!("[{e}]")).map(|()| true);
            }
            let file = client.send_line(&image::line_text(&text, images))?;
            images.clear();
            client.own.insert(file);
            if !client.running() {
                client.say(
                    "[teneral is not running: your line waits and is answered when the next \
                     generation is up]",
                )?;
            }
        }
    }
    Ok(true)
}

/// `/history`: the last 40 exchanges of the journal printed again, read
/// as on attaching (from the end, within a bounded number of bytes).
fn history(client: &mut Client<'_>) -> Result<(), TalkError> {
    let mut recent = super::turns::Recent::new(40, super::MAX_ENTRIES * 10);
    let width = client.width;
    let budget = super::LOOK_BACK_BUDGET * 4;
    let render = |e: &crate::journal::Event| super::render::render(e, width);
    match super::follow::look_back(&client.journal, &mut recent, budget, render) {
        Ok(_) => {
            client.say("[the earlier conversation]")?;
            for line in recent.into_entries() {
                client.print(&line)?;
            }
            client.say("[end of the earlier conversation]")
        }
        Err(e) => client.say(&format!("[{} cannot be read: {e}]", client.journal.display())),
    }
}

/// `/stop`: interrupts the turn in progress, or says why there is none.
fn stop(client: &mut Client<'_>) -> Result<(), TalkError> {
    client.catch_up()?;
    if !client.running() {
        return client.say("teneral is not running: there is no turn to stop");
    }
    if client.activity == Activity::Resting {
        return client.say("the agent is at rest: there is no turn to stop, nothing was sent");
    }
    if client.interrupting {
        return client.say("an interrupt is already on its way");
    }
    client.send_interrupt()?;
    client.say("[interrupt sent]")
}
