//! The input box's text: line editing and the history of what was sent.
//!
//! Invariants: the cursor is always on a character boundary of the text;
//! "the line" is the row of a text of several lines the cursor is on; Up
//! and Down move between rows, and only at the first or last row go
//! through the history. Pure: no terminal here.

/// The text being typed, its cursor and what was sent before.
#[derive(Debug, Default)]
pub struct Editor {
    text: String,
    /// A byte offset into `text`.
    cursor: usize,
    history: Vec<String>,
    /// Where Up/Down are in the history; `None` while typing anew.
    at: Option<usize>,
    /// What was typed before going into the history.
    draft: String,
    /// The text came from the history (no command list is offered then).
    pub recalled: bool,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Editor {
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the text, with the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
        self.recalled = false;
    }

    pub fn insert(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(self.cursor, &s);
        self.cursor += s.len();
        self.recalled = false;
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..].find('\n').map_or(self.text.len(), |i| self.cursor + i)
    }

    fn prev(&self, at: usize) -> usize {
        self.text[..at].char_indices().next_back().map_or(0, |(i, _)| i)
    }

    fn next(&self, at: usize) -> usize {
        self.text[at..].chars().next().map_or(at, |c| at + c.len_utf8())
    }

    pub fn left(&mut self) {
        self.cursor = self.prev(self.cursor);
    }

    pub fn right(&mut self) {
        self.cursor = self.next(self.cursor);
    }

    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    /// Where the word before the cursor starts.
    fn word_before(&self) -> usize {
        let head = &self.text[..self.cursor];
        let trimmed = head.trim_end_matches(|c: char| !is_word(c));
        trimmed.trim_end_matches(is_word).len()
    }

    pub fn word_left(&mut self) {
        self.cursor = self.word_before();
    }

    pub fn word_right(&mut self) {
        let tail = &self.text[self.cursor..];
        let skip = tail.len() - tail.trim_start_matches(|c: char| !is_word(c)).len();
        let rest = &tail[skip..];
        let word = rest.len() - rest.trim_start_matches(is_word).len();
        self.cursor += skip + word;
    }

    fn delete(&mut self, from: usize, to: usize) {
        self.text.replace_range(from..to, "");
        self.cursor = from;
        self.recalled = false;
    }

    pub fn backspace(&mut self) {
        let from = self.prev(self.cursor);
        self.delete(from, self.cursor);
    }

    pub fn delete_forward(&mut self) {
        let to = self.next(self.cursor);
        self.delete(self.cursor, to);
    }

    /// Ctrl-U: to the start of the line.
    pub fn kill_start(&mut self) {
        self.delete(self.line_start(), self.cursor);
    }

    /// Ctrl-K: to the end of the line.
    pub fn kill_end(&mut self) {
        let end = self.line_end();
        self.delete(self.cursor, end);
    }

    /// Ctrl-W: the word before the cursor.
    pub fn kill_word(&mut self) {
        self.delete(self.word_before(), self.cursor);
    }

    /// Up: the row above, or at the first row what was sent before.
    pub fn up(&mut self) {
        let start = self.line_start();
        if start > 0 {
            let col = self.text[start..self.cursor].chars().count();
            let above = self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
            self.cursor = self.column(above, col);
            return;
        }
        let at = match self.at {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.recall(Some(at));
    }

    /// Down: the row below, or at the last row what was sent after.
    pub fn down(&mut self) {
        let end = self.line_end();
        if end < self.text.len() {
            let col = self.text[self.line_start()..self.cursor].chars().count();
            self.cursor = self.column(end + 1, col);
            return;
        }
        match self.at {
            None => {}
            Some(i) if i + 1 < self.history.len() => self.recall(Some(i + 1)),
            Some(_) => self.recall(None),
        }
    }

    fn recall(&mut self, at: Option<usize>) {
        self.at = at;
        let text = match at {
            Some(i) => self.history[i].clone(),
            None => std::mem::take(&mut self.draft),
        };
        self.set(&text);
        self.recalled = at.is_some();
    }

    /// The offset `col` characters into the row starting at `start`, or
    /// that row's end.
    fn column(&self, start: usize, col: usize) -> usize {
        let row = &self.text[start..];
        let row = &row[..row.find('\n').unwrap_or(row.len())];
        row.char_indices().nth(col).map_or(start + row.len(), |(i, _)| start + i)
    }

    /// Takes the text to send; it goes into the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.at = None;
        self.recalled = false;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// The rows of the text, and the row and column (in characters) of
    /// the cursor.
    pub fn rows(&self) -> (Vec<&str>, usize, usize) {
        let rows: Vec<&str> = self.text.split('\n').collect();
        let head = &self.text[..self.cursor];
        let row = head.matches('\n').count();
        let col = head[self.line_start()..].chars().count();
        (rows, row, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str, cursor: usize) -> Editor {
        let mut e = Editor::default();
        e.set(text);
        e.cursor = cursor;
        e
    }

    #[test]
    fn editing_table() {
        type Op = fn(&mut Editor);
        let table: &[(&str, usize, Op, &str, usize)] = &[
            ("abc", 3, Editor::backspace, "ab", 2),
            ("abc", 0, Editor::backspace, "abc", 0),
            ("abc", 1, Editor::delete_forward, "ac", 1),
            ("héllo", 3, Editor::left, "héllo", 1),
            ("héllo", 1, Editor::right, "héllo", 3),
            ("one two", 4, Editor::kill_start, "two", 0),
            ("one two", 3, Editor::kill_end, "one", 3),
            ("one two  ", 9, Editor::kill_word, "one ", 4),
            ("a\nbc", 4, Editor::home, "a\nbc", 2),
            ("ab\ncd", 0, Editor::end, "ab\ncd", 2),
            ("ab\ncd", 5, Editor::kill_start, "ab\n", 3),
            ("one two", 7, Editor::word_left, "one two", 4),
            ("one two", 0, Editor::word_right, "one two", 3),
            ("abc\nd", 5, Editor::up, "abc\nd", 1),
            ("abc\nd", 2, Editor::down, "abc\nd", 5),
        ];
        for (text, cursor, op, want, want_cursor) in table {
            let mut e = typed(text, *cursor);
            op(&mut e);
            assert_eq!((e.text(), e.cursor()), (*want, *want_cursor), "{text:?} at {cursor}");
        }
    }

    #[test]
    fn history_goes_back_and_returns_to_the_draft() {
        let mut e = Editor::default();
        for line in ["first", "second"] {
            e.set(line);
            assert_eq!(e.take(), line);
        }
        e.insert("draft");
        e.up();
        assert_eq!(e.text(), "second");
        assert!(e.recalled);
        e.up();
        assert_eq!(e.text(), "first");
        e.up();
        assert_eq!(e.text(), "first", "stays at the oldest");
        e.down();
        e.down();
        assert_eq!(e.text(), "draft");
        assert!(!e.recalled);
    }

    #[test]
    fn rows_and_cursor() {
        let e = typed("ab\ncdé", 7);
        assert_eq!(e.rows(), (vec!["ab", "cdé"], 1, 3));
    }
}
