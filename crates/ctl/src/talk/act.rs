//! What Enter and the commands do in the full client: send a line, run a
//! command, complete a partial name, refuse an unknown one with the nearest
//! named; and Esc's interrupt.
//!
//! Invariants: nothing is sent for a line that is not plain text or `//`
//! text; an interrupt goes only through the owner channel, once per turn.

use std::time::Instant;

use ratatui::text::Line;

use super::commands::{self, Args, Parsed};
use super::full::{print, Screen, Then};
use super::image;
use super::live::Live;
use super::theme::Role;
use super::view::{Doing, View};
use super::{Client, TalkError};

pub(super) fn say(live: &mut Live, text: impl Into<String>, role: Role) {
    live.notice = Some((text.into(), role));
}

/// Enter: runs a command, completes a partial name, refuses an unknown
/// one, or sends the text.
pub(super) fn enter(
    client: &mut Client<'_>,
    view: &mut View,
    live: &mut Live,
    screen: &mut Screen,
    interrupt_at: &mut Option<Instant>,
    listed: &[&'static commands::Command],
) -> Result<Then, TalkError> {
    let text = live.editor.text().to_owned();
    let parsed = match commands::parse(&text) {
        Parsed::Partial(_) if !listed.is_empty() => {
            let c = listed[live.chosen.min(listed.len() - 1)];
            if c.args != Args::None {
                live.editor.set(&c.completed());
                return Ok(Then::Stay);
            }
            Parsed::Run(c, String::new())
        }
        Parsed::Partial(name) => {
            Parsed::Unknown { name: format!("/{name}"), nearest: commands::nearest(&name) }
        }
        p => p,
    };
    match parsed {
        Parsed::Empty if live.images.is_empty() => {}
        Parsed::Empty => send(client, view, live, "")?,
        Parsed::Text(line) => send(client, view, live, &line)?,
        Parsed::Unknown { name, nearest } => say(
            live,
            format!("{name} is not a command and was not sent; the nearest is {}", nearest.usage()),
            Role::Bad,
        ),
        Parsed::BadArgs(c) => {
            say(live, format!("{} is how it is used; nothing was sent", c.usage()), Role::Bad);
        }
        Parsed::Partial(_) => {}
        Parsed::Run(c, args) => {
            live.editor.take();
            live.notice = None;
            match c.name {
                "quit" => return Ok(Then::Leave),
                "stop" => stop(client, view, live, interrupt_at)?,
                "help" => {
                    let dim = view.theme.style(Role::Dim);
                    let rows =
                        commands::help().into_iter().map(|r| Line::styled(format!("  {r}"), dim));
                    print(screen, rows.collect())?;
                }
                "tools" => toggle_tools(view, live),
                "image" => {
                    let path = image::pasted_path(&args)
                        .unwrap_or_else(|| std::path::PathBuf::from(args.trim()));
                    attach(live, image::load(&path));
                }
                "plain" => say(
                    live,
                    "teneralctl talk --plain, or any pipe: the same conversation as plain text",
                    Role::Dim,
                ),
                "generations" => generations(client, view, screen)?,
                "evals" => evals(client, view, screen)?,
                "history" => history(client, view, screen)?,
                "accept" => {
                    let commit = Some(args.trim()).filter(|a| !a.is_empty());
                    match crate::accept::accept(&client.home, commit, crate::accept::Via::Talk) {
                        Ok(commit) => say(live, crate::accept::said(&commit), Role::Good),
                        Err(e) => say(live, e.to_string(), Role::Bad),
                    }
                }
                "offers" => match crate::offer::manage::list_text(&client.home) {
                    Ok(text) => say(live, text.trim_end().to_owned(), Role::Dim),
                    Err(e) => say(live, e.to_string(), Role::Bad),
                },
                "approve" => match crate::offer::manage::approve(&client.home, &args) {
                    Ok(c) => {
                        say(live, crate::offer::manage::approved_text(&client.home, &c), Role::Good)
                    }
                    Err(e) => say(live, e.to_string(), Role::Bad),
                },
                other => say(
                    live,
                    format!("/{other} is not in this version of the client yet"),
                    Role::Warn,
                ),
            }
        }
    }
    Ok(Then::Stay)
}

/// Sends `text` with the images attached (stored first); a line that
/// cannot store its images is not sent.
fn send(
    client: &mut Client<'_>,
    view: &View,
    live: &mut Live,
    text: &str,
) -> Result<(), TalkError> {
    for im in &live.images {
        if let Err(e) = image::store(&client.home, im) {
            say(live, e.to_string(), Role::Bad);
            return Ok(());
        }
    }
    let file = client.send_line(&image::line_text(text, &live.images))?;
    client.own.insert(file);
    live.images.clear();
    live.editor.take();
    live.notice = None;
    if !client.running() {
        let note = "teneral is not running: your line waits and is answered when the next \
                    generation is up";
        say(live, note, Role::Warn);
    } else if matches!(view.doing, Doing::Starting | Doing::Mutating(_)) {
        let note = "no body runs now: your line is answered when the next generation is up";
        say(live, note, Role::Dim);
    }
    Ok(())
}

/// Attaches a loaded image to the next line, or says why not.
pub(super) fn attach(live: &mut Live, loaded: Result<image::Image, image::ImageError>) {
    let refused = match loaded {
        Ok(_) if live.images.len() >= image::MAX_PER_LINE => image::ImageError::TooMany,
        Ok(im) => {
            let n = live.images.len() + 1;
            let chip = im.chip(n, true);
            live.images.push(im);
            return say(live, format!("attached {chip}; Enter sends it with your line"), Role::Dim);
        }
        Err(e) => e,
    };
    say(live, refused.to_string(), Role::Bad);
}

/// Esc and `/stop`: interrupts the turn in progress, or says why not.
pub(super) fn stop(
    client: &mut Client<'_>,
    view: &View,
    live: &mut Live,
    interrupt_at: &mut Option<Instant>,
) -> Result<(), TalkError> {
    if !client.running() {
        say(live, "teneral is not running: there is no turn to stop", Role::Warn);
    } else if !view.doing.interruptible() {
        say(live, "there is no turn to stop now; nothing was sent", Role::Warn);
    } else if interrupt_at.is_some() {
    } else {
        client.send_interrupt()?;
        *interrupt_at = Some(Instant::now());
        say(live, "interrupt sent", Role::Dim);
    }
    Ok(())
}

/// Exchanges `/history` prints.
const HISTORY: usize = 40;

/// `/history`: the last [`HISTORY`] exchanges of the journal printed again,
/// read as on attaching (from the end, within a bounded number of bytes).
fn history(client: &Client<'_>, view: &View, screen: &mut Screen) -> Result<(), TalkError> {
    let mut recent = super::turns::Recent::new(HISTORY, super::MAX_ENTRIES * 10);
    let budget = super::LOOK_BACK_BUDGET * 4;
    let found = super::follow::look_back(&client.journal, &mut recent, budget, |e| Some(e.clone()));
    let dim = view.theme.style(Role::Dim);
    let mut rows = Vec::new();
    match found {
        Ok(_) => {
            let events = recent.into_entries();
            rows.push(Line::styled(
                format!("  earlier conversation: {} events", events.len()),
                dim,
            ));
            // A view of its own: printing history changes nothing live.
            let mut past = View::new(view.theme, view.width);
            for e in &events {
                rows.extend(past.event(e));
            }
            rows.push(Line::styled("  end of the earlier conversation", dim));
        }
        Err(e) => rows.push(Line::styled(
            format!("  {} cannot be read ({e})", client.journal.display()),
            view.theme.style(Role::Bad),
        )),
    }
    print(screen, rows)
}

/// `/generations`: what each generation did (`teneralctl generations`), in a
/// few words each, in rows that fit the terminal.
fn generations(client: &Client<'_>, view: &View, screen: &mut Screen) -> Result<(), TalkError> {
    let dim = view.theme.style(Role::Dim);
    let width = view.width.saturating_sub(2);
    let rows: Vec<Line<'static>> = match crate::generations_card::figures(&client.home, None, None)
    {
        Ok(all) => crate::generations_card::compact(&all, width)
            .into_iter()
            .map(|l| Line::styled(format!("  {l}"), dim))
            .collect(),
        Err(e) => vec![Line::styled(format!("  {e}"), view.theme.style(Role::Bad))],
    };
    print(screen, rows)
}

/// `/evals`: the owner's evaluations on each generation (`teneralctl
/// evals`), one line each.
fn evals(client: &Client<'_>, view: &View, screen: &mut Screen) -> Result<(), TalkError> {
    let dim = view.theme.style(Role::Dim);
    let rows: Vec<Line<'static>> = match crate::evals::compact_of(&client.home) {
        Ok(lines) => lines.into_iter().map(|l| Line::styled(format!("  {l}"), dim)).collect(),
        Err(e) => vec![Line::styled(format!("  {e}"), view.theme.style(Role::Bad))],
    };
    print(screen, rows)
}

/// Tab and `/tools`: tool output shown from now on, or hidden again.
pub(super) fn toggle_tools(view: &mut View, live: &mut Live) {
    view.tools = !view.tools;
    let what =
        if view.tools { "tool output is shown from now on" } else { "tool output is hidden" };
    say(live, what, Role::Dim);
}
