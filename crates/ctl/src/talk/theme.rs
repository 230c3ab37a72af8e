//! The full client's colours, marks and glyphs, in one place.
//!
//! Invariants: every style and mark the full client shows comes from a
//! [`Theme`]; with `NO_COLOR` set (to anything but the empty string) no style
//! carries a colour (emphasis such as bold and dim stays); when the locale is
//! not UTF-8 every mark is ASCII. Colours are chosen by what the terminal
//! says it can show ([`Depth`]): 24-bit colour when `COLORTERM` says
//! `truecolor` or `24bit`, the 256-colour palette when `TERM` names
//! `256color`, else the 16 basic colours (which the terminal maps to its
//! own palette). The 24-bit and 256 colours are mid-tones, dark enough for
//! a light background and bright enough for a dark one.

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

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Basic16,
    Palette256,
    TrueColor,
}

impl Depth {
    /// What `COLORTERM` and `TERM` say.
    pub fn of(colorterm: Option<&str>, term: Option<&str>) -> Depth {
        let colorterm = colorterm.unwrap_or_default().to_ascii_lowercase();
        if colorterm == "truecolor" || colorterm == "24bit" {
            Depth::TrueColor
        } else if term.is_some_and(|t| t.contains("256color")) {
            Depth::Palette256
        } else {
            Depth::Basic16
        }
    }
}

/// Colours (or none) and marks, decided once when the client starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
    pub depth: Depth,
    pub marks: Marks,
}

impl Theme {
    /// The theme for these settings, in the 16 basic colours.
    pub fn new(color: bool, utf8: bool) -> Self {
        Self { color, depth: Depth::Basic16, marks: if utf8 { UNICODE } else { ASCII } }
    }

    /// The same theme in `depth` colours.
    pub fn with_depth(self, depth: Depth) -> Self {
        Self { depth, ..self }
    }

    /// The theme this process's environment asks for.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let depth = Depth::of(var("COLORTERM").as_deref(), var("TERM").as_deref());
        Self::new(!no_color(var("NO_COLOR").as_deref()), utf8_locale(&var)).with_depth(depth)
    }

    /// `basic` in this theme's depth: the same hue as a mid-tone.
    fn hue(&self, basic: Color) -> Color {
        // (basic, 256-colour index, 24-bit), each readable on light and dark.
        const HUES: [(Color, u8, (u8, u8, u8)); 6] = [
            (Color::Cyan, 31, (0, 135, 175)),
            (Color::Magenta, 133, (175, 95, 175)),
            (Color::Yellow, 136, (175, 135, 0)),
            (Color::Green, 29, (0, 135, 95)),
            (Color::Red, 160, (215, 0, 0)),
            (Color::Blue, 26, (0, 95, 215)),
        ];
        let Some(&(_, index, (r, g, b))) = HUES.iter().find(|(c, _, _)| *c == basic) else {
            return basic;
        };
        match self.depth {
            Depth::Basic16 => basic,
            Depth::Palette256 => Color::Indexed(index),
            Depth::TrueColor => Color::Rgb(r, g, b),
        }
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
            Some(c) if self.color => style.fg(self.hue(c)),
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

    #[test]
    fn colour_depth_table() {
        let table = [
            (Some("truecolor"), Some("xterm-256color"), Depth::TrueColor),
            (Some("24bit"), Some("xterm"), Depth::TrueColor),
            (Some("TrueColor"), None, Depth::TrueColor),
            (Some(""), Some("xterm-256color"), Depth::Palette256),
            (None, Some("tmux-256color"), Depth::Palette256),
            (None, Some("xterm"), Depth::Basic16),
            (Some("yes"), Some("linux"), Depth::Basic16),
            (None, None, Depth::Basic16),
        ];
        for (colorterm, term, want) in table {
            assert_eq!(Depth::of(colorterm, term), want, "{colorterm:?} {term:?}");
        }
        let theme = Theme::new(true, true);
        let fg = |depth| theme.with_depth(depth).style(Role::Owner).fg;
        assert_eq!(fg(Depth::Basic16), Some(Color::Cyan));
        assert_eq!(fg(Depth::Palette256), Some(Color::Indexed(31)));
        assert_eq!(fg(Depth::TrueColor), Some(Color::Rgb(0, 135, 175)));
        let none = Theme::new(false, true).with_depth(Depth::TrueColor);
        assert_eq!(none.style(Role::Owner).fg, None, "NO_COLOR wins over any depth");
    }
}
