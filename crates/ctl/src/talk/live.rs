//! The live region, the only part of the screen that is redrawn: the words
//! of the reply being written (its last [`MAX_WRITING`] rows, as plain
//! text; the reply is laid out as markdown above once it is whole), pending
//! tool calls, a notice, what the agent does now, the input box (a thin
//! frame that grows to eight rows) and the footer, or the command list in
//! the footer's place.
//!
//! Invariants: its height is [`Live::height`] for the given state, and the
//! drawing fills exactly that; nothing here touches the terminal (ratatui
//! draws the buffer); the cursor is drawn as a reversed cell, the
//! terminal's own stays hidden.

use std::time::Instant;

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::commands::{self, Command};
use super::editor::Editor;
use super::image::Image;
use super::render::cut;
use super::theme::Role;
use super::view::{duration, Doing, View};

/// Rows of text the box grows to.
pub const MAX_BOX_ROWS: usize = 8;
/// Rows of the command list at most.
pub const MAX_LIST: usize = 6;
/// Pending tool calls shown at most.
const MAX_PENDING: usize = 3;
/// Rows of the reply being written shown at most.
pub const MAX_WRITING: usize = 10;

const TIPS: &[&str] = &[
    "/ lists the commands",
    "Esc interrupts a turn",
    "Alt+Enter for a new line",
    "Tab shows what tools return",
    "/quit or Ctrl-D leaves; the agent goes on",
];

/// What the live region shows besides the view.
#[derive(Debug)]
pub struct Live {
    pub editor: Editor,
    /// The chosen row of the command list.
    pub chosen: usize,
    /// Esc closed the list for this text; it stays closed until it changes.
    pub closed_for: Option<String>,
    pub notice: Option<(String, Role)>,
    /// Since when the agent does what it does.
    pub since: Instant,
    pub running: bool,
    pub started: Instant,
    /// Images that go with the next line, shown as chips above the box.
    pub images: Vec<Image>,
    /// The reply being written, as the body streams it.
    pub writing: super::follow::LiveReply,
}

impl Live {
    pub fn new(running: bool) -> Self {
        let now = Instant::now();
        Self {
            editor: Editor::default(),
            chosen: 0,
            closed_for: None,
            notice: None,
            since: now,
            running,
            started: now,
            images: Vec::new(),
            writing: super::follow::LiveReply::default(),
        }
    }

    /// The commands listed under the box now (none when the list is closed).
    pub fn listed(&self) -> Vec<&'static Command> {
        let text = self.editor.text();
        if self.editor.recalled || self.closed_for.as_deref() == Some(text) {
            return Vec::new();
        }
        match commands::command_word(text) {
            Some((name, "")) if !text.contains(' ') => commands::matching(name),
            _ => Vec::new(),
        }
    }

    fn box_rows(&self) -> usize {
        self.editor.text().split('\n').count().clamp(1, MAX_BOX_ROWS)
    }

    /// The last rows of the reply being written, wrapped to `width`.
    fn writing_rows(&self, width: usize) -> Vec<String> {
        let text = super::render::sanitize(&self.writing.text).replace('\t', "    ");
        if text.trim().is_empty() {
            return Vec::new();
        }
        let width = width.saturating_sub(2).max(8);
        let mut rows = Vec::new();
        for line in text.split('\n') {
            let chars: Vec<char> = line.chars().collect();
            if chars.is_empty() {
                rows.push(String::new());
            }
            for piece in chars.chunks(width) {
                rows.push(piece.iter().collect());
            }
        }
        let first = rows.len().saturating_sub(MAX_WRITING);
        rows.split_off(first)
    }

    /// Rows the region needs for `view`.
    pub fn height(&self, view: &View) -> u16 {
        let pending = view.pending.len().min(MAX_PENDING) + self.writing_rows(view.width).len();
        let notice = usize::from(self.notice.is_some()) + usize::from(!self.images.is_empty());
        let bottom = match self.listed().len() {
            0 => 1,
            n => n.min(MAX_LIST),
        };
        u16::try_from(pending + notice + 1 + self.box_rows() + 2 + bottom).unwrap_or(u16::MAX)
    }

    /// The status line: what the agent does, for how long, and whether Esc
    /// would stop it.
    fn status(&self, view: &View, listing: bool) -> Line<'static> {
        let t = &view.theme;
        let what = match (&view.doing, self.running) {
            (_, false) => "not running".to_owned(),
            (Doing::Resting, _) if view.question => "waiting for you".to_owned(),
            (Doing::Resting, _) => "resting".to_owned(),
            (Doing::Waking, _) => "waking".to_owned(),
            (Doing::Thinking, _) => "thinking".to_owned(),
            (Doing::Running(tool), _) => format!("running {tool}"),
            (Doing::Mutating(None), _) => "mutating".to_owned(),
            (Doing::Mutating(Some(step)), _) => format!("mutating: gate {step}"),
            (Doing::Retrying { retry, at: Some(at) }, _) => {
                let left = duration(at - crate::when::now_ms());
                format!("the model failed; retry {retry} in {left}")
            }
            (Doing::Retrying { retry, at: None }, _) => format!("the model failed; retry {retry}"),
            (Doing::Starting, _) => "starting".to_owned(),
        };
        let mut spans = vec![Span::styled(t.marks.status, t.style(Role::Accent)), Span::raw(what)];
        if self.running && view.doing != Doing::Resting {
            let secs = self.since.elapsed().as_millis();
            spans.push(Span::styled(
                format!(" ({})", duration(i64::try_from(secs).unwrap_or(i64::MAX))),
                t.style(Role::Dim),
            ));
            if view.doing.interruptible() && !listing {
                spans.push(Span::styled("  esc to interrupt", t.style(Role::Dim)));
            }
        }
        Line::from(spans)
    }

    /// The box's rows, the typed name coloured, the cursor a reversed cell.
    fn box_lines(&self, view: &View, width: usize) -> Vec<Line<'static>> {
        let t = &view.theme;
        let (rows, row, col) = self.editor.rows();
        let first = rows.len().saturating_sub(MAX_BOX_ROWS).min(row);
        let name_role = match commands::parse(self.editor.text()) {
            commands::Parsed::Run(..) => Some(Role::Owner),
            commands::Parsed::Partial(_) => Some(Role::Dim),
            commands::Parsed::Unknown { .. } | commands::Parsed::BadArgs(_) => Some(Role::Warn),
            _ => None,
        };
        let mut lines = Vec::new();
        for (i, text) in rows.iter().enumerate().skip(first).take(MAX_BOX_ROWS) {
            let mark = if i == 0 { t.marks.owner } else { "  " };
            let mut spans = vec![Span::styled(mark, t.style(Role::Accent))];
            let chars: Vec<char> = text.chars().collect();
            let name_end = match name_role {
                Some(_) if i == 0 => text.find(' ').unwrap_or(text.len()),
                _ => 0,
            };
            let name_chars = text[..name_end].chars().count();
            let style_at = |k: usize| match name_role {
                Some(role) if k < name_chars => t.style(role),
                _ => ratatui::style::Style::default(),
            };
            let shown = width.saturating_sub(3);
            let start = if i == row { col.saturating_sub(shown) } else { 0 };
            for (k, c) in chars.iter().enumerate().skip(start).take(shown) {
                let mut style = style_at(k);
                if i == row && k == col {
                    style = style.add_modifier(Modifier::REVERSED);
                }
                spans.push(Span::styled(c.to_string(), style));
            }
            if i == row && col >= chars.len() {
                spans.push(Span::styled(
                    " ",
                    ratatui::style::Style::default().add_modifier(Modifier::REVERSED),
                ));
            }
            lines.push(Line::from(spans));
        }
        lines
    }

    fn footer(&self, view: &View, width: usize, model: &str) -> Line<'static> {
        let t = &view.theme;
        let at = match (&view.doing, self.running) {
            (_, false) => "not running",
            (Doing::Resting, _) if view.question => "waiting for you",
            (Doing::Resting, _) => "resting",
            _ => "at work",
        };
        let left = format!("  {model} · {at}");
        let tip = TIPS[(self.started.elapsed().as_secs() / 20) as usize % TIPS.len()];
        let room = width.saturating_sub(left.chars().count() + 2);
        let tip = if room >= tip.chars().count() { format!("{tip:>room$}") } else { String::new() };
        Line::from(vec![
            Span::styled(left, t.style(Role::Dim)),
            Span::styled(format!("{tip}  "), t.style(Role::Dim)),
        ])
    }

    fn list_lines(
        &self,
        view: &View,
        listed: &[&'static Command],
        rows: usize,
    ) -> Vec<Line<'static>> {
        let t = &view.theme;
        let chosen = self.chosen.min(listed.len().saturating_sub(1));
        commands::window(listed.len(), chosen, rows)
            .map(|i| {
                let c = listed[i];
                let (mark, role) =
                    if i == chosen { (t.marks.chosen, Role::Owner) } else { (" ", Role::Dim) };
                Line::from(vec![
                    Span::styled(format!(" {mark} "), t.style(role)),
                    Span::styled(format!("{:<20}", c.usage()), t.style(role)),
                    Span::styled(c.what, t.style(Role::Dim)),
                ])
            })
            .collect()
    }

    /// Draws the region into `frame`'s whole area.
    pub fn draw(&self, frame: &mut Frame<'_>, view: &View, model: &str) {
        let area = frame.area();
        let width = usize::from(area.width);
        let mut y = area.y;
        let mut put =
            |frame: &mut Frame<'_>, lines: Vec<Line<'static>>, block: Option<Block<'static>>| {
                let extra = if block.is_some() { 2 } else { 0 };
                let h = u16::try_from(lines.len() + extra)
                    .unwrap_or(0)
                    .min(area.bottom().saturating_sub(y));
                let rect = Rect { x: area.x, y, width: area.width, height: h };
                let mut p = Paragraph::new(lines);
                if let Some(b) = block {
                    p = p.block(b);
                }
                frame.render_widget(p, rect);
                y += h;
            };
        let t = &view.theme;
        let writing: Vec<Line<'static>> = self
            .writing_rows(width)
            .into_iter()
            .map(|row| Line::from(vec![Span::raw("  "), Span::raw(row)]))
            .collect();
        put(frame, writing, None);
        let pending: Vec<Line<'static>> = view
            .pending
            .iter()
            .rev()
            .take(MAX_PENDING)
            .rev()
            .map(|p| {
                let text = cut(&p.line, width.saturating_sub(4).max(4));
                Line::from(vec![
                    Span::styled(t.marks.tool, t.style(Role::Dim)),
                    Span::styled(text, t.style(Role::Dim)),
                ])
            })
            .collect();
        put(frame, pending, None);
        if let Some((text, role)) = &self.notice {
            let line = Line::from(Span::styled(
                format!("  {}", cut(text, width.saturating_sub(3).max(4))),
                t.style(*role),
            ));
            put(frame, vec![line], None);
        }
        let listed = self.listed();
        put(frame, vec![self.status(view, !listed.is_empty())], None);
        if !self.images.is_empty() {
            let utf8 = !t.marks.ok.is_ascii();
            let chips: Vec<String> =
                self.images.iter().enumerate().map(|(i, im)| im.chip(i + 1, utf8)).collect();
            let text = cut(&chips.join(" "), width.saturating_sub(3).max(4));
            put(frame, vec![Line::styled(format!("  {text}"), t.style(Role::Accent))], None);
        }
        let frame_style = t.style(Role::Dim);
        let block =
            Block::default().borders(Borders::TOP | Borders::BOTTOM).border_style(frame_style);
        let block = if t.marks.ok.is_ascii() { block.border_set(ascii_border()) } else { block };
        put(frame, self.box_lines(view, width), Some(block));
        if listed.is_empty() {
            put(frame, vec![self.footer(view, width, model)], None);
        } else {
            let rows = listed.len().min(MAX_LIST);
            put(frame, self.list_lines(view, &listed, rows), None);
        }
    }
}

/// The box's frame in ASCII, for a locale that is not UTF-8.
fn ascii_border() -> ratatui::symbols::border::Set {
    ratatui::symbols::border::Set {
        top_left: "-",
        top_right: "-",
        bottom_left: "-",
        bottom_right: "-",
        vertical_left: "|",
        vertical_right: "|",
        horizontal_top: "-",
        horizontal_bottom: "-",
    }
}
