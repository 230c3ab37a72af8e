//! The terminal side of setup's pages: the full screen (the alternate
//! screen, raw mode, bracketed paste) held by a guard, the keys read from
//! it, and each page drawn with ratatui, as the full `talk` client draws.
//!
//! Invariants: the terminal is given back as it was (raw mode off, the
//! alternate screen left, the cursor shown, paste off) when the guard is
//! dropped, whatever ended setup; the key is never drawn, only its length;
//! the sign-in's address is printed whole, as one hyperlink (OSC 8), and
//! the terminal wraps it, so that copying it gives one line.
use std::io::{self, Stdout, Write};
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, queue, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Terminal;

use super::pages::{Key, Page, PROVIDERS};

/// Where a test request stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Progress {
    #[default]
    Waiting,
    Running,
    Passed(String),
    Failed(String),
}

/// What the pages show besides what is typed on them.
#[derive(Debug, Default)]
pub struct Facts {
    pub provider: String,
    pub env_path: String,
    pub address: String,
    pub model: String,
    /// The sign-in's address and callback port.
    pub url: Option<(String, u16)>,
    pub tests: [Progress; 2],
    /// Something slow under way (the model list, the tokens).
    pub busy: Option<String>,
    /// The settings to be written, the key hidden.
    pub replace: Vec<String>,
    /// What was written where.
    pub said: Vec<String>,
    /// Why nothing was written.
    pub failure: Option<String>,
    /// The locale is not UTF-8: ASCII marks only.
    pub ascii: bool,
}

/// The marks drawn, and what an ASCII locale gets instead.
const MARKS: [(&str, &str); 7] = [
    ("▸", ">"),
    ("▏", "_"),
    ("…", "..."),
    ("·", "-"),
    ("↑↓", "Up/Down"),
    ("↓", "Down"),
    ("✗", "x"),
];

/// Pure: `lines` with ASCII marks.
pub fn ascii(lines: Vec<Line<'static>>) -> Vec<Line<'static>> {
    let swap = |text: &str| MARKS.iter().fold(text.to_owned(), |t, (u, a)| t.replace(u, a));
    lines
        .into_iter()
        .map(|line| {
            let spans: Vec<Span<'static>> =
                line.spans.into_iter().map(|s| Span::styled(swap(&s.content), s.style)).collect();
            Line::from(spans)
        })
        .collect()
}

/// A key, or the terminal's new size.
pub enum Input {
    Key(Key),
    Resized,
}

/// The full screen, given back when dropped.
pub struct Screen {
    term: Terminal<CrosstermBackend<Stdout>>,
    /// The address was printed past ratatui: the next page is drawn whole.
    url_shown: bool,
    _restore: Restore,
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = execute!(
            io::stdout(),
            event::DisableBracketedPaste,
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
    }
}

impl Screen {
    /// Takes the terminal: raw mode, the alternate screen, paste as one.
    pub fn enter() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let restore = Restore;
        execute!(
            io::stdout(),
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste,
            cursor::Hide
        )?;
        let term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        Ok(Screen { term, url_shown: false, _restore: restore })
    }

    /// Draws `page`; the sign-in's address is printed over the rows kept
    /// free for it.
    pub fn draw(&mut self, page: &Page, facts: &Facts) -> io::Result<()> {
        let width = usize::from(self.term.size()?.width.max(1));
        let url = facts.url.as_ref().filter(|_| *page == Page::SignIn).map(|(u, _)| u.as_str());
        let url_rows = url.map_or(0, |u| u.chars().count().div_ceil(width));
        let lines = lines(page, facts, url_rows);
        let lines = if facts.ascii { ascii(lines) } else { lines };
        if self.url_shown && url.is_none() {
            self.term.clear()?;
        }
        self.url_shown = url.is_some();
        self.term.draw(|f| {
            let area = f.area();
            let wrap = if url.is_some() { None } else { Some(Wrap { trim: false }) };
            let text = Paragraph::new(lines);
            f.render_widget(if let Some(w) = wrap { text.wrap(w) } else { text }, area);
        })?;
        if let Some(url) = url {
            let out = self.term.backend_mut();
            queue!(out, cursor::MoveTo(0, URL_ROW))?;
            // OSC 8: the whole address is one link the terminal can open.
            write!(out, "\x1b]8;;{url}\x1b\\{url}\x1b]8;;\x1b\\")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Forgets what is on the screen, so that the next draw is whole.
    pub fn clear(&mut self) -> io::Result<()> {
        self.term.clear()
    }
}

/// The row the sign-in's address starts on (see [`lines`]).
const URL_ROW: u16 = 4;

/// The next key or resize: waits up to `wait` (`None`: for ever); `None`
/// when nothing came.
pub fn read(wait: Option<Duration>) -> io::Result<Option<Input>> {
    if let Some(wait) = wait {
        if !event::poll(wait)? {
            return Ok(None);
        }
    }
    Ok(match event::read()? {
        Event::Key(k) if k.kind != KeyEventKind::Release => {
            let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
            let key = match k.code {
                KeyCode::Char('c' | 'd') if ctrl => Some(Key::CtrlC),
                KeyCode::Char('u') if ctrl => Some(Key::Clear),
                KeyCode::Char(c) if !ctrl => Some(Key::Char(c)),
                KeyCode::Up => Some(Key::Up),
                KeyCode::Down => Some(Key::Down),
                KeyCode::Enter => Some(Key::Enter),
                KeyCode::Esc => Some(Key::Esc),
                KeyCode::Backspace => Some(Key::Backspace),
                _ => None,
            };
            key.map(Input::Key)
        }
        Event::Paste(text) => Some(Input::Key(Key::Paste(text))),
        Event::Resize(..) => Some(Input::Resized),
        _ => None,
    })
}

fn bold(text: impl Into<String>) -> Line<'static> {
    Line::from(Span::styled(text.into(), Style::default().add_modifier(Modifier::BOLD)))
}

fn plain(text: impl Into<String>) -> Line<'static> {
    Line::from(text.into())
}

/// Pure: the lines of `page`; `url_rows` rows are left free for the
/// sign-in's address.
pub fn lines(page: &Page, facts: &Facts, url_rows: usize) -> Vec<Line<'static>> {
    let mut out = vec![bold(format!("teneral setup · {}", title(page, facts))), plain("")];
    let keys = match page {
        Page::Provider { selected } => {
            out.push(plain("Which model provider?"));
            out.push(plain(""));
            for (i, (name, about)) in PROVIDERS.iter().enumerate() {
                let row = format!(
                    "{} {}  {name:<11} {about}",
                    if i == *selected { "▸" } else { " " },
                    i + 1
                );
                out.push(if i == *selected {
                    Line::from(Span::styled(row, Style::default().add_modifier(Modifier::REVERSED)))
                } else {
                    plain(row)
                });
            }
            "↑↓ or a number chooses, Enter goes on, Esc leaves (nothing is written)"
        }
        Page::Address { text, problem } => {
            if facts.provider == "compatible" {
                out.push(plain("The endpoint's base address; it speaks OpenAI's chat completions, e.g. https://host/v1"));
            } else {
                out.push(plain("The API's address (as it is, for OpenAI's own)"));
            }
            out.push(plain(""));
            out.push(plain(format!("Address: {text}▏")));
            problem_line(&mut out, problem.as_deref());
            "Enter goes on, Ctrl-U clears, Esc goes back, Ctrl-C leaves (nothing is written)"
        }
        Page::Key { text, problem } => {
            out.push(plain(format!(
                "The API key for {}; it is not shown as you type or paste it.",
                facts.address
            )));
            out.push(plain(""));
            let n = text.chars().count();
            out.push(plain(format!(
                "API key: {n} character{} typed",
                if n == 1 { "" } else { "s" }
            )));
            problem_line(&mut out, problem.as_deref());
            "Enter goes on, Backspace takes back a character, Esc goes back"
        }
        Page::Model { options, selected, typed, problem } => {
            if let Some(busy) = &facts.busy {
                out.push(plain(busy.clone()));
                return out;
            }
            if options.is_empty() {
                out.push(plain("The model's name (it must support tool calls):"));
            } else {
                out.push(plain(format!(
                    "{} offers these models; choose one that supports tool calls:",
                    facts.address
                )));
                out.push(plain(""));
                let start = selected.saturating_sub(9);
                for (i, option) in options.iter().enumerate().skip(start).take(12) {
                    let row = format!(
                        "{} {:>3}  {option}",
                        if i == *selected { "▸" } else { " " },
                        i + 1
                    );
                    let on = i == *selected && typed.is_empty();
                    out.push(if on {
                        Line::from(Span::styled(
                            row,
                            Style::default().add_modifier(Modifier::REVERSED),
                        ))
                    } else {
                        plain(row)
                    });
                }
                if options.len() > start + 12 {
                    out.push(plain(format!("      … {} more (↓)", options.len() - start - 12)));
                }
            }
            out.push(plain(""));
            out.push(plain(format!("Or type a number or a name: {typed}▏")));
            problem_line(&mut out, problem.as_deref());
            "↑↓ chooses, Enter goes on, Esc goes back"
        }
        Page::SignIn => {
            let port = facts.url.as_ref().map_or(0, |(_, p)| *p);
            out.push(plain(
                "Open this address in your browser, sign in to ChatGPT and approve the app:",
            ));
            out.push(plain(""));
            // Rows left free: the address is printed over them, whole.
            out.extend((0..url_rows).map(|_| plain("")));
            out.push(plain(""));
            out.push(plain(match &facts.busy {
                Some(busy) => busy.clone(),
                None => format!("Waiting for your browser to come back to 127.0.0.1:{port} …"),
            }));
            "Esc gives up (nothing is written)"
        }
        Page::Tests => {
            tests(&mut out, facts);
            "the two test requests run; Esc or Ctrl-C gives up (nothing is written)"
        }
        Page::Replace => {
            out.push(plain(format!(
                "Both tests passed. {} exists; setup replaces its provider settings with",
                facts.env_path
            )));
            out.extend(facts.replace.iter().map(|s| plain(format!("  {s}"))));
            out.push(plain("and keeps every other line as it is."));
            out.push(plain(""));
            out.push(plain("Replace them? y or Enter writes; n or Esc leaves .env as it was."));
            "y writes, n leaves"
        }
        Page::Ended => {
            if facts.provider != "standin" && facts.tests != [Progress::Waiting, Progress::Waiting]
            {
                tests(&mut out, facts);
                out.push(plain(""));
            }
            match &facts.failure {
                Some(failure) => out.push(bold(format!("Nothing was written: {failure}"))),
                None => {
                    for said in &facts.said {
                        out.extend(said.lines().map(|l| plain(l.to_owned())));
                    }
                }
            }
            "Enter or Esc leaves"
        }
    };
    out.push(plain(""));
    out.push(Line::from(Span::styled(keys, Style::default().add_modifier(Modifier::DIM))));
    out
}

fn title(page: &Page, facts: &Facts) -> String {
    let p = &facts.provider;
    match page {
        Page::Provider { .. } => "the provider".to_owned(),
        Page::Address { .. } => format!("{p}: the address"),
        Page::Key { .. } => format!("{p}: the key"),
        Page::Model { .. } => format!("{p}: the model"),
        Page::SignIn => "chatgpt: sign in".to_owned(),
        Page::Tests => format!("{p}: two test requests"),
        Page::Replace => "replace .env's provider settings?".to_owned(),
        Page::Ended if facts.failure.is_some() => "nothing was written".to_owned(),
        Page::Ended => "written".to_owned(),
    }
}

fn problem_line(out: &mut Vec<Line<'static>>, problem: Option<&str>) {
    if let Some(problem) = problem {
        out.push(plain(""));
        out.push(bold(format!("✗ {problem}")));
    }
}

fn tests(out: &mut Vec<Line<'static>>, facts: &Facts) {
    out.push(plain(format!("Testing {} at {}", facts.model, facts.address)));
    out.push(plain(""));
    let names = ["Test 1 of 2, an answer in words", "Test 2 of 2, a tool call"];
    for (name, progress) in names.iter().zip(&facts.tests) {
        let state = match progress {
            Progress::Waiting => "waiting".to_owned(),
            Progress::Running => "running …".to_owned(),
            Progress::Passed(said) => format!("passed: {said}"),
            Progress::Failed(why) => format!("failed: {why}"),
        };
        out.push(plain(format!("  {name}: {state}")));
    }
}

#[cfg(test)]
mod tests;
