//! A reply's markdown laid out as terminal rows, with pulldown-cmark:
//! headings, emphasis, lists, quotes, code blocks cut at the edge rather
//! than wrapped, links with their address dimmed.
//!
//! Invariants: the text is sanitized before it is parsed, so nothing of it
//! reaches the terminal as a control; every row starts with the client's two
//! columns (the mark on the first row, blanks after) and is at most `width`
//! columns wide, measured with unicode-width; prose wraps at blanks, code
//! is cut and marked.

use pulldown_cmark::{Event as Md, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::render::sanitize;
use super::theme::{Role, Theme};

/// One container a row is inside of, outermost first.
enum Container {
    Quote,
    /// A list item: its marker on its first row, blanks after.
    Item {
        marker: String,
        used: bool,
    },
}

struct Layout<'t> {
    theme: &'t Theme,
    width: usize,
    rows: Vec<Line<'static>>,
    row: Vec<Span<'static>>,
    col: usize,
    /// The mark of the very first row (`● `), then two blanks.
    mark: Option<String>,
    containers: Vec<Container>,
    styles: Vec<Style>,
    lists: Vec<Option<u64>>,
    links: Vec<String>,
    code: bool,
    /// A blank row goes before the next block.
    gap: bool,
}

impl Layout<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    /// Starts a row with the client's columns and the containers' prefixes.
    fn open_row(&mut self) {
        let first = self.mark.take().unwrap_or_else(|| "  ".to_owned());
        self.col = first.width();
        self.row.push(Span::styled(first, self.theme.style(Role::Accent)));
        for container in &mut self.containers {
            let (text, role) = match container {
                Container::Quote => (self.theme.marks.bar.to_owned(), Role::Quote),
                Container::Item { marker, used } => {
                    let text = if *used { " ".repeat(marker.width()) } else { marker.clone() };
                    *used = true;
                    (text, Role::Accent)
                }
            };
            self.col += text.width();
            self.row.push(Span::styled(text, self.theme.style(role)));
        }
    }

    fn close_row(&mut self) {
        let n = self.row.len();
        if let Some(last) = self.row.last_mut().filter(|s| n > 1 && s.content.ends_with(' ')) {
            last.content = last.content.trim_end().to_owned().into();
        }
        if !self.row.is_empty() {
            self.rows.push(Line::from(std::mem::take(&mut self.row)));
        }
        self.col = 0;
    }

    /// Before a block: ends the row in progress and leaves a blank row
    /// after an earlier block.
    fn block(&mut self) {
        self.close_row();
        if self.gap && !self.rows.is_empty() {
            self.rows.push(Line::from(""));
        }
        self.gap = false;
    }

    /// Prose: words wrap at blanks; a word wider than a row is broken.
    fn words(&mut self, text: &str, style: Style) {
        for piece in text.split_inclusive(' ') {
            if self.row.is_empty() {
                self.open_row();
            }
            let w = piece.trim_end().width();
            if self.col + w > self.width && self.col > self.indent() {
                self.close_row();
                self.open_row();
            }
            self.push_cut(piece, style, true);
        }
    }

    /// The columns the prefixes take on a continuation row.
    fn indent(&self) -> usize {
        2 + self
            .containers
            .iter()
            .map(|c| match c {
                Container::Quote => self.theme.marks.bar.width(),
                Container::Item { marker, .. } => marker.width(),
            })
            .sum::<usize>()
    }

    /// Pushes what fits of `text`; the rest goes to further rows when
    /// `wrap`, else is cut with a mark.
    fn push_cut(&mut self, text: &str, style: Style, wrap: bool) {
        let mut fit = String::new();
        for c in text.chars() {
            let w = c.width().unwrap_or(0);
            if self.col + w > self.width {
                if !wrap {
                    self.mark_cut(&mut fit);
                    break;
                }
                self.row.push(Span::styled(std::mem::take(&mut fit), style));
                self.close_row();
                self.open_row();
            }
            fit.push(c);
            self.col += w;
        }
        if !fit.is_empty() {
            self.row.push(Span::styled(fit, style));
        }
    }

    /// Replaces the end of a row that is cut with the cut mark.
    fn mark_cut(&mut self, fit: &mut String) {
        let cut = self.theme.marks.cut;
        while self.col + cut.width() > self.width {
            match fit.pop() {
                Some(c) => self.col -= c.width().unwrap_or(0),
                None => break,
            }
        }
        fit.push_str(cut);
        self.col += cut.width();
    }

    fn code_block(&mut self, text: &str) {
        let style = self.theme.style(Role::Code);
        for line in text.trim_end_matches('\n').split('\n') {
            self.open_row();
            self.push_cut(&line.replace('\t', "    "), style, false);
            self.close_row();
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let t = self.theme;
        match tag {
            Tag::Paragraph => self.block(),
            Tag::Heading { level, .. } => {
                self.block();
                let style = t.style(Role::Heading);
                let style = if level == HeadingLevel::H1 {
                    style.add_modifier(Modifier::UNDERLINED)
                } else {
                    style
                };
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.block();
                self.containers.push(Container::Quote);
                self.styles.push(t.style(Role::Quote));
            }
            Tag::CodeBlock(_) => {
                self.block();
                self.code = true;
            }
            Tag::List(first) => {
                self.block();
                self.lists.push(first);
            }
            Tag::Item => {
                self.close_row();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => t.marks.bullet.to_owned(),
                };
                self.containers.push(Container::Item { marker, used: false });
            }
            Tag::Emphasis => self.styles.push(self.style().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.styles.push(self.style().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => {
                self.styles.push(self.style().add_modifier(Modifier::CROSSED_OUT));
            }
            Tag::Link { dest_url, .. } => {
                self.links.push(sanitize(&dest_url));
                self.styles.push(self.style().add_modifier(Modifier::UNDERLINED));
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.close_row();
                self.gap = true;
            }
            TagEnd::Heading(_) | TagEnd::BlockQuote(_) => {
                self.styles.pop();
                if matches!(tag, TagEnd::BlockQuote(_)) {
                    self.close_row();
                    self.containers.pop();
                }
                self.close_row();
                self.gap = true;
            }
            TagEnd::CodeBlock => {
                self.code = false;
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.close_row();
                self.gap = true;
            }
            TagEnd::Item => {
                self.close_row();
                self.containers.pop();
                self.gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(url) = self.links.pop() {
                    self.words(&format!(" ({url})"), self.theme.style(Role::Dim));
                }
            }
            _ => {}
        }
    }
}

/// Lays out `text` (markdown) in rows of at most `width` columns; the
/// first row starts with `mark`, the others two blanks in.
pub fn layout(text: &str, width: usize, mark: &str, theme: &Theme) -> Vec<Line<'static>> {
    let clean = sanitize(text);
    let mut l = Layout {
        theme,
        width: width.max(12),
        rows: Vec::new(),
        row: Vec::new(),
        col: 0,
        mark: Some(mark.to_owned()),
        containers: Vec::new(),
        styles: vec![theme.style(Role::Reply)],
        lists: Vec::new(),
        links: Vec::new(),
        code: false,
        gap: false,
    };
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    for event in Parser::new_ext(&clean, options) {
        match event {
            Md::Start(tag) => l.start(tag),
            Md::End(tag) => l.end(tag),
            Md::Text(text) if l.code => l.code_block(&text),
            Md::Text(text) | Md::Html(text) | Md::InlineHtml(text) => {
                let style = l.style();
                l.words(&text.replace('\n', " "), style);
            }
            Md::Code(code) => l.words(&code, theme.style(Role::Code)),
            Md::SoftBreak => l.words(" ", l.style()),
            Md::HardBreak => l.close_row(),
            Md::Rule => {
                l.block();
                l.open_row();
                let rest = l.width.saturating_sub(l.col) / theme.marks.rule.width().max(1);
                l.row.push(Span::styled(theme.marks.rule.repeat(rest), theme.style(Role::Dim)));
                l.close_row();
                l.gap = true;
            }
            Md::TaskListMarker(done) => l.words(if done { "[x] " } else { "[ ] " }, l.style()),
            _ => {}
        }
    }
    l.close_row();
    if l.rows.is_empty() {
        l.open_row();
        l.close_row();
    }
    l.rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect()).collect()
    }

    #[test]
    fn layout_table() {
        let theme = Theme::new(false, true);
        let table: &[(&str, usize, &[&str])] = &[
            ("Hello there.", 40, &["● Hello there."]),
            ("one\n\ntwo", 40, &["● one", "", "  two"]),
            ("# Title\nbody", 40, &["● Title", "", "  body"]),
            ("a *b* **c**", 40, &["● a b c"]),
            ("- x\n- y", 40, &["● • x", "  • y"]),
            ("1. x\n2. y", 40, &["● 1. x", "  2. y"]),
            ("> quoted", 40, &["● │ quoted"]),
            ("[site](http://e.x)", 40, &["● site (http://e.x)"]),
            ("```\nlet a = 1234567890;\n```", 14, &["● let a = 123…"]),
            ("aaa bbb ccc ddd", 11, &["● aaa bbb", "  ccc ddd"]),
            ("- long item text here", 14, &["● • long item", "    text here"]),
            ("", 40, &["● "]),
            ("\u{1b}]52;c;ZXZpbA==\u{7}safe \u{1b}[2Jtext", 40, &["● safe text"]),
        ];
        for (text, width, want) in table {
            let rows = layout(text, *width, "● ", &theme);
            assert_eq!(plain(&rows), *want, "{text:?}");
            for row in &rows {
                assert!(row.width() <= *width, "{text:?}: {row:?}");
            }
        }
    }

    #[test]
    fn styles_carry_emphasis_and_dim_links() {
        let theme = Theme::new(true, true);
        let rows = layout("*it* [a](http://u)", 40, "● ", &theme);
        let spans = &rows[0].spans;
        let it = spans.iter().find(|s| s.content == "it").expect("the emphasized word");
        assert!(it.style.add_modifier.contains(Modifier::ITALIC));
        let url = spans.iter().find(|s| s.content.contains("http://u")).expect("the address");
        assert!(url.style.add_modifier.contains(Modifier::DIM));
    }
}
