//! The full client at a terminal: the conversation printed above an inline
//! viewport (ratatui's `Viewport::Inline`), so the terminal's scrollback
//! keeps it; only the live region is redrawn.
//!
//! Invariants: never the alternate screen, never the mouse; one thread
//! draws (this one), keys come from a reader thread and journal changes
//! from the watcher through one channel; the terminal is asked where the
//! cursor is once, before the reader starts ([`super::backend`]); leaving
//! clears the live region, prints one line, gives the cursor back and
//! restores the terminal's mode, whatever ended the loop; Esc is the only
//! key that stops the agent, and only through the owner channel.

use std::io::{self, BufWriter, Stdout};
use std::time::{Duration, Instant};

use crossterm::event::{Event as Term, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, event, execute, terminal};
use ratatui::layout::Position;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::act::{attach, enter, stop, toggle_tools};
use super::backend::Tracked;
use super::live::Live;
use super::theme::{Role, Theme};
use super::view::Doing;
use super::view::View;
use super::{panel, Client, TalkError, TalkOptions, Wake};
use crate::journal::{Event, EventKind};

pub(super) type Screen = Terminal<Tracked<BufWriter<Stdout>>>;

/// At most this many rows are printed above the live region at once.
const PRINT_AT_ONCE: usize = 64;

/// What a key asks of the loop.
pub(super) enum Then {
    Stay,
    Leave,
}

/// Runs the full client until the owner leaves.
pub(super) fn run(opts: &TalkOptions) -> Result<i32, TalkError> {
    let started = Instant::now();
    let mut trace = super::trace::Trace::from_env();
    let theme = Theme::from_env();
    let (mut sink_out, mut sink_err) = (io::sink(), io::sink());
    let keep = |e: &Event, _| Some(e.clone());
    let (mut client, history) =
        Client::attach_with(&opts.home, opts.history, true, &mut sink_out, &mut sink_err, keep)?;
    trace.phase("journal", started);
    let out = |e: io::Error| TalkError::Output(e);
    terminal::enable_raw_mode().map_err(out)?;
    let result = session(&mut client, history, theme, started, trace);
    let _ = execute!(io::stdout(), event::DisableBracketedPaste, cursor::Show);
    let _ = terminal::disable_raw_mode();
    result
}

fn session(
    client: &mut Client<'_>,
    history: Vec<Event>,
    theme: Theme,
    started: Instant,
    mut trace: super::trace::Trace,
) -> Result<i32, TalkError> {
    let out = TalkError::Output;
    execute!(io::stdout(), event::EnableBracketedPaste, cursor::Hide).map_err(out)?;
    let (w, _) = terminal::size().map_err(out)?;
    trace.phase("terminal", started);
    let at = cursor::position().map_err(out)?;
    trace.phase("cursor", started);
    let mut view = View::new(theme, usize::from(w));
    let mut live = Live::new(client.running());
    let facts = panel::gather(&client.home);
    trace.phase("panel_read", started);
    let model = match (facts.model_used(), &facts.effort) {
        (Some(m), Some(e)) => format!("{m} ({e})"),
        (Some(m), None) => m,
        _ => "no model set".to_owned(),
    };
    let mut screen = make(Position { x: 0, y: at.1 }, live.height(&view))?;
    trace.phase("viewport", started);
    print(&mut screen, panel::layout(&facts, &theme, usize::from(w)))?;
    trace.phase("panel_printed", started);
    let mut rows = Vec::new();
    for e in &history {
        rows.extend(view.event(e));
    }
    trace.phase("laid_out", started);
    print(&mut screen, rows)?;
    trace.phase("history_printed", started);
    if !live.running {
        live.notice = Some((super::not_running(&client.home, true), Role::Warn));
    }
    let tx = client.tx.clone();
    std::thread::spawn(move || loop {
        let wake = match event::read() {
            Ok(e) => Wake::Term(e),
            Err(e) => Wake::InputFailed(e),
        };
        let failed = matches!(wake, Wake::InputFailed(_));
        if tx.send(wake).is_err() || failed {
            return;
        }
    });
    let mut interrupt_at: Option<Instant> = None;
    let mut key_at: Option<Instant> = None;
    let mut first = Some(started);
    loop {
        let height = live.height(&view).min(terminal::size().map_or(24, |s| s.1).saturating_sub(1));
        if height != screen.get_frame().area().height {
            screen = remake(screen, height)?;
        }
        screen.draw(|f| live.draw(f, &view, &model)).map_err(out)?;
        trace.drawn();
        if let Some(start) = key_at.take() {
            trace.draw(start);
        }
        if let Some(start) = first.take() {
            trace.attach(start);
        }
        let busy = view.doing != Doing::Resting;
        let wake = if busy {
            match client.rx.recv_timeout(Duration::from_secs(1)) {
                Ok(w) => Some(w),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                Err(_) => break,
            }
        } else {
            match client.rx.recv() {
                Ok(w) => Some(w),
                Err(_) => break,
            }
        };
        if let Some(i) = interrupt_at {
            if view.doing == Doing::Resting {
                interrupt_at = None;
            } else if i.elapsed() > Duration::from_secs(5) {
                interrupt_at = None;
                live.notice = Some((
                    "no answer to the interrupt within 5 s: this body may not hear them; \
                     systemctl --user stop teneral stops it for certain"
                        .to_owned(),
                    Role::Warn,
                ));
            }
        }
        if matches!(view.doing, Doing::Mutating(_)) {
            if let Some(status) = teneral_core::status::read(&client.home) {
                print(&mut screen, view.gate_status(&status.status))?;
            }
        }
        match wake {
            None | Some(Wake::Line(_)) => {}
            Some(Wake::Journal) => journal(client, &mut view, &mut live, &mut screen, &mut trace)?,
            Some(Wake::End) | Some(Wake::InputFailed(_)) => break,
            Some(Wake::Term(Term::Resize(w, h))) => {
                view.width = usize::from(w);
                let top = screen.get_frame().area().top().min(h.saturating_sub(1));
                screen.clear().map_err(out)?;
                screen = make(Position { x: 0, y: top }, live.height(&view).min(h))?;
            }
            Some(Wake::Term(Term::Paste(text))) => paste(&mut live, &text),
            Some(Wake::Term(Term::Key(key))) if key.kind != KeyEventKind::Release => {
                key_at = trace.on().then(Instant::now);
                let then =
                    self::key(key, client, &mut view, &mut live, &mut screen, &mut interrupt_at)?;
                if matches!(then, Then::Leave) {
                    break;
                }
            }
            Some(Wake::Term(_)) => {}
        }
    }
    screen.clear().map_err(out)?;
    drop(screen);
    let theme_line = format!("{}left; the agent goes on\r\n", theme.marks.status);
    execute!(io::stdout(), crossterm::style::Print(theme_line)).map_err(out)?;
    Ok(0)
}

/// A screen whose live region of `height` rows starts at `at`. Its output
/// is buffered: ratatui flushes after each frame and each print, so the
/// terminal gets a few writes for each, not one for each line.
fn make(at: Position, height: u16) -> Result<Screen, TalkError> {
    let backend = Tracked::new(BufWriter::with_capacity(64 << 10, io::stdout()), at);
    Terminal::with_options(backend, TerminalOptions { viewport: Viewport::Inline(height.max(1)) })
        .map_err(TalkError::Output)
}

/// The same screen with a live region of another height.
fn remake(mut screen: Screen, height: u16) -> Result<Screen, TalkError> {
    let top = screen.get_frame().area().top();
    screen.clear().map_err(TalkError::Output)?;
    drop(screen);
    make(Position { x: 0, y: top }, height)
}

/// Prints rows above the live region, into the scrollback.
pub(super) fn print(screen: &mut Screen, rows: Vec<Line<'static>>) -> Result<(), TalkError> {
    for chunk in rows.chunks(PRINT_AT_ONCE) {
        let lines = chunk.to_vec();
        let h = u16::try_from(lines.len()).unwrap_or(u16::MAX);
        screen
            .insert_before(h, |buf| Paragraph::new(lines).render(buf.area, buf))
            .map_err(TalkError::Output)?;
    }
    Ok(())
}

/// Prints what was journaled since the last look.
fn journal(
    client: &mut Client<'_>,
    view: &mut View,
    live: &mut Live,
    screen: &mut Screen,
    trace: &mut super::trace::Trace,
) -> Result<(), TalkError> {
    client.fill()?;
    let mut replies = Vec::new();
    let mut rows = Vec::new();
    while let Some(e) = client.pop() {
        if e.known_kind().is_some_and(teneral_core::live::ends_reply) {
            live.writing.over();
        }
        let before = view.doing.clone();
        let theirs = e.is(EventKind::OwnerLine) && !client.own.remove(e.text("file"));
        if e.is(EventKind::Reply) && trace.on() {
            replies.push(e.ts.clone());
        }
        rows.extend(view.event(&e));
        if theirs {
            rows.push(Line::styled("  (typed in another terminal)", view.theme.style(Role::Dim)));
        }
        if view.doing != before {
            live.since = Instant::now();
        }
    }
    live.running = client.running();
    print(screen, rows)?;
    live.writing.read(&client.home);
    trace.writing(&live.writing.text);
    for ts in replies {
        trace.reply(&ts);
    }
    Ok(())
}

/// Acts on one key.
fn key(
    key: KeyEvent,
    client: &mut Client<'_>,
    view: &mut View,
    live: &mut Live,
    screen: &mut Screen,
    interrupt_at: &mut Option<Instant>,
) -> Result<Then, TalkError> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let listed = live.listed();
    let before = live.editor.text().to_owned();
    let e = &mut live.editor;
    match key.code {
        KeyCode::Char('c') if ctrl => return Ok(Then::Leave),
        KeyCode::Char('v') if ctrl => {
            let from = std::path::Path::new("the clipboard");
            let loaded =
                super::clipboard::paste().map(|bytes| super::image::Image::from_bytes(from, bytes));
            match loaded {
                Ok(loaded) => attach(live, loaded),
                Err(why) => live.notice = Some((why, Role::Warn)),
            }
        }
        KeyCode::Backspace if e.is_empty() && !live.images.is_empty() => {
            live.images.pop();
            live.notice = Some(("the last image was taken off".to_owned(), Role::Dim));
        }
        KeyCode::Char('d') if ctrl && e.is_empty() => return Ok(Then::Leave),
        KeyCode::Char('l') if ctrl => screen.clear().map_err(TalkError::Output)?,
        KeyCode::Esc if !listed.is_empty() => live.closed_for = Some(before.clone()),
        KeyCode::Esc => stop(client, view, live, interrupt_at)?,
        KeyCode::Up | KeyCode::Char('p')
            if !listed.is_empty() && (ctrl || key.code == KeyCode::Up) =>
        {
            live.chosen = (live.chosen + listed.len() - 1) % listed.len();
        }
        KeyCode::Down | KeyCode::Char('n')
            if !listed.is_empty() && (ctrl || key.code == KeyCode::Down) =>
        {
            live.chosen = (live.chosen + 1) % listed.len();
        }
        KeyCode::Tab if !listed.is_empty() => {
            let c = listed[live.chosen.min(listed.len() - 1)];
            e.set(&c.completed());
        }
        KeyCode::Tab => toggle_tools(view, live),
        KeyCode::Enter if alt => e.insert("\n"),
        KeyCode::Char('j') if ctrl => e.insert("\n"),
        KeyCode::Enter => return enter(client, view, live, screen, interrupt_at, &listed),
        KeyCode::Left if ctrl || alt => e.word_left(),
        KeyCode::Right if ctrl || alt => e.word_right(),
        KeyCode::Left => e.left(),
        KeyCode::Right => e.right(),
        KeyCode::Home | KeyCode::Char('a') if ctrl || key.code == KeyCode::Home => e.home(),
        KeyCode::End | KeyCode::Char('e') if ctrl || key.code == KeyCode::End => e.end(),
        KeyCode::Up => e.up(),
        KeyCode::Down => e.down(),
        KeyCode::Backspace => e.backspace(),
        KeyCode::Delete => e.delete_forward(),
        KeyCode::Char('u') if ctrl => e.kill_start(),
        KeyCode::Char('k') if ctrl => e.kill_end(),
        KeyCode::Char('w') if ctrl => e.kill_word(),
        KeyCode::Char(c) if !ctrl => e.insert(c.encode_utf8(&mut [0; 4])),
        _ => {}
    }
    if live.editor.text() != before {
        live.chosen = 0;
        live.closed_for = None;
        if live.notice.as_ref().is_some_and(|(_, r)| *r != Role::Dim) {
            live.notice = None;
        }
    }
    Ok(Then::Stay)
}

/// A paste: an image's path (pasted or dropped) attaches the image; any
/// other text goes into the box.
fn paste(live: &mut Live, text: &str) {
    match super::image::pasted_path(text) {
        Some(path) if path.is_file() || path.starts_with("~") => match super::image::load(&path) {
            Err(e @ super::image::ImageError::NotAnImage { .. }) => {
                live.editor.insert(text);
                live.notice = Some((format!("{e}; the path was pasted as text"), Role::Dim));
            }
            loaded => attach(live, loaded),
        },
        _ => live.editor.insert(text),
    }
}
