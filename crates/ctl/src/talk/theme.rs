//! The full client's colours, marks and glyphs, in one place.
//!
//! Invariants: every style and mark the full client shows comes from a
//! [`Theme`]; with `NO_COLOR` set (to anything but the empty string) no style
//! carries a colour (emphasis such as bold and dim stays); when the locale is
//! not UTF-8 every mark is ASCII. Colours are the 16 basic ones, which the
//! terminal maps to its own palette and so read on dark and light
//! backgrounds alike.

use ratatui::style::{Color, Modifier, Style};

/// What a piece of the screen is, for its style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The owner's own lines and the name of a command typed whole.
    Owner,
    /// A reply's text.
    Reply,
    Heading,
    /// Inline code and code blocks.
    Code,
    /// What is said quietly: tool calls, the clock, addresses of links.
    Dim,
    /// A block quote's bar and text.
    Quote,
    /// Good news: a tool call that worked, a mutation accepted.
    Good,
    /// Bad news: a failed tool call, a rejected mutation, a refused line.
    Bad,
    /// Something to mind: a rollback, a command Enter would refuse.
    Warn,
    /// The client's own marks and the panel's frame.
    Accent,
}

/// The marks the client puts in the first two columns, and its glyphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    pub owner: &'static str,
    pub reply: &'static str,
    pub reasoning: &'static str,
    pub tool: &'static str,
    pub status: &'static str,
    pub ok: &'static str,
    pub failed: &'static str,
    pub chosen: &'static str,
    pub bar: &'static str,
    pub bullet: &'static str,
    pub rule: &'static str,
    pub cut: &'static str,
    pub warn: &'static str,
}

const UNICODE: Marks = Marks {
    owner: "› ",
    reply: "● ",
    reasoning: "○ ",
    tool: "▪ ",
    status: "◆ ",
    ok: "✓",
    failed: "✗ failed",
    chosen: "▸",
    bar: "│ ",
    bullet: "• ",
    rule: "─",
    cut: "…",
    warn: "! ",
};

const ASCII: Marks = Marks {
    owner: "> ",
    reply: "* ",
    reasoning: "o ",
    tool: "- ",
    status: "# ",
    ok: "ok",
    failed: "x failed",
    chosen: ">",
    bar: "| ",
    bullet: "- ",
    rule: "-",
    cut: "~",
    warn: "! ",
};

/// Colours (or none) and marks, decided once when the client starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
    pub marks: Marks,
}

impl Theme {
    /// The theme for these settings.
    pub fn new(color: bool, utf8: bool) -> Self {
        Self { color, marks: if utf8 { UNICODE } else { ASCII } }
    }

    /// The theme this process's environment asks for.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        Self::new(!no_color(var("NO_COLOR").as_deref()), utf8_locale(&var))
    }

    /// The style of `role`.
    pub fn style(&self, role: Role) -> Style {
        let (color, modifier) = match role {
            Role::Owner => (Some(Color::Cyan), Modifier::BOLD),
            Role::Reply => (None, Modifier::empty()),
            Role::Heading => (Some(Color::Magenta), Modifier::BOLD),
            Role::Code => (Some(Color::Yellow), Modifier::empty()),
            Role::Dim => (None, Modifier::DIM),
            Role::Quote => (Some(Color::Green), Modifier::empty()),
            Role::Good => (Some(Color::Green), Modifier::empty()),
            Role::Bad => (Some(Color::Red), Modifier::BOLD),
            Role::Warn => (Some(Color::Yellow), Modifier::BOLD),
            Role::Accent => (Some(Color::Blue), Modifier::BOLD),
        };
        let style = Style::default().add_modifier(modifier);
        match color {
            Some(c) if self.color => style.fg(c),
            _ => style,
        }
    }
}

/// Whether `NO_COLOR` (its value, when set) asks for no colour: any value
/// but the empty string does (no-color.org).
pub fn no_color(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

/// Whether the locale the variables give is UTF-8: the first of `LC_ALL`,
/// `LC_CTYPE`, `LANG` that is set and not empty decides.
pub fn utf8_locale(var: &dyn Fn(&str) -> Option<String>) -> bool {
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()))
        .unwrap_or_default()
        .to_ascii_lowercase();
    locale.contains("utf-8") || locale.contains("utf8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_table() {
        assert!(!no_color(None));
        assert!(!no_color(Some("")));
        assert!(no_color(Some("1")));
        assert!(no_color(Some("0")), "any value counts, even 0");
    }

    #[test]
    fn locale_table() {
        let table: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("LANG", "en_US.UTF-8")], true),
            (&[("LANG", "C.utf8")], true),
            (&[("LANG", "C")], false),
            (&[("LANG", "en_US.UTF-8"), ("LC_ALL", "C")], false),
            (&[("LANG", "C"), ("LC_CTYPE", "de_DE.UTF-8")], true),
            (&[("LC_ALL", ""), ("LANG", "en_GB.UTF-8")], true),
        ];
        for (vars, want) in table {
            let get =
                |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
            assert_eq!(utf8_locale(&get), *want, "{vars:?}");
        }
    }

    #[test]
    fn no_colour_keeps_emphasis_and_ascii_marks_are_ascii() {
        let plain = Theme::new(false, false);
        for role in [Role::Owner, Role::Bad, Role::Heading, Role::Code, Role::Good] {
            assert_eq!(plain.style(role).fg, None, "{role:?}");
        }
        assert!(plain.style(Role::Bad).add_modifier.contains(Modifier::BOLD));
        let m = plain.marks;
        for mark in [m.owner, m.reply, m.reasoning, m.tool, m.status, m.ok, m.failed, m.chosen] {
            assert!(mark.is_ascii(), "{mark:?}");
        }
        assert_eq!(Theme::new(true, true).style(Role::Bad).fg, Some(Color::Red));
    }
}
