//! ratatui's crossterm backend, except that it answers "where is the
//! cursor" from what the client knows instead of asking the terminal.
//!
//! Why: asking the terminal means reading its answer from the input, while
//! the client's reader thread is blocked reading the same input for keys;
//! the two would wait on each other. The client asks the terminal once,
//! before that thread starts, and from then on knows where its live region
//! is (ratatui asks only when an inline viewport is made or resized).

use std::io::{self, Write};

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

/// The crossterm backend with a cursor position the client sets.
pub struct Tracked<W: Write> {
    inner: CrosstermBackend<W>,
    /// Where the cursor is, as far as the client knows.
    pub at: Position,
}

impl<W: Write> Tracked<W> {
    pub fn new(out: W, at: Position) -> Self {
        Self { inner: CrosstermBackend::new(out), at }
    }
}

impl<W: Write> Backend for Tracked<W> {
    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        Ok(self.at)
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        let position = position.into();
        self.at = position;
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}
