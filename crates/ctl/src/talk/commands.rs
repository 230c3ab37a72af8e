//! The full client's commands: one table that the list under the input box,
//! completion, `/help` and the refusal of unknown names all read.
//!
//! Invariants: a command is a slash, a word of lower-case letters and,
//! after a blank, whatever follows; any other line (a path, a capital, a
//! digit, several lines, `//...`) is text for the agent. A name that is no
//! command is never sent: it is refused naming the nearest command. The
//! decisions here are pure.

/// What may follow a command's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    None,
    /// Something has to follow (shown as `<what>`).
    Required(&'static str),
    /// Something may follow (shown as `[what]`).
    Optional(&'static str),
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub name: &'static str,
    pub args: Args,
    pub what: &'static str,
}

/// The commands, in the order the list and `/help` show them.
pub const COMMANDS: &[Command] = &[
    Command { name: "stop", args: Args::None, what: "interrupt what the agent is doing now" },
    Command {
        name: "accept",
        args: Args::Optional("commit"),
        what: "accept the species commit the agent asked about, or the one named",
    },
    Command {
        name: "image",
        args: Args::Required("path"),
        what: "attach a PNG, JPEG, GIF or WebP to your next line",
    },
    Command { name: "tools", args: Args::None, what: "show what tool calls return; again to stop" },
    Command {
        name: "history",
        args: Args::None,
        what: "print the earlier conversation read on attaching",
    },
    Command {
        name: "generations",
        args: Args::None,
        what: "what each generation did: turns, latency, failures, crashes, mutations",
    },
    Command {
        name: "evals",
        args: Args::None,
        what: "the owner's evaluations on each generation: passed, tokens, time, verdict",
    },
    Command { name: "offers", args: Args::None, what: "what waits for your approval to go out" },
    Command { name: "approve", args: Args::Required("commit"), what: "approve one offered commit" },
    Command { name: "plain", args: Args::None, what: "how to get the plain text client" },
    Command { name: "help", args: Args::None, what: "the keys and commands" },
    Command { name: "quit", args: Args::None, what: "leave; the agent goes on" },
];

/// The keys, for `/help`, as the reference's table gives them.
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "send what you typed to the agent as its owner"),
    ("Alt+Enter, Ctrl-J", "a new line; the box grows to eight rows"),
    ("Left, Right, Home, End, Ctrl-A, Ctrl-E", "move in the line; with Ctrl or Alt by words"),
    (
        "Backspace, Delete, Ctrl-U, Ctrl-K, Ctrl-W",
        "delete a character, to the start, to the end, the word before",
    ),
    ("Up, Down", "the line above or below; at the ends, what you sent before"),
    ("/", "list the commands, fewer with each letter; Tab completes, Up/Down choose"),
    ("Esc", "interrupt what the agent is doing (closes the command list when open)"),
    ("Tab", "show what tool calls return (completes a command when listed)"),
    ("//...", "send a line that begins with a slash, with one slash"),
    ("Ctrl-V", "attach the clipboard's image; pasting or dropping an image's path attaches it"),
    ("Ctrl-L", "draw the live region again"),
    ("Ctrl-D on an empty line, Ctrl-C", "leave; the agent goes on"),
];

impl Command {
    /// The name with what may follow it: `/accept [commit]`.
    pub fn usage(&self) -> String {
        match self.args {
            Args::None => format!("/{}", self.name),
            Args::Required(a) => format!("/{} <{a}>", self.name),
            Args::Optional(a) => format!("/{} [{a}]", self.name),
        }
    }

    /// What Tab makes of the line: the name, and a blank when something
    /// may follow.
    pub fn completed(&self) -> String {
        match self.args {
            Args::None => format!("/{}", self.name),
            _ => format!("/{} ", self.name),
        }
    }
}

/// The command named exactly `name`.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// What a line in the box is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Empty,
    /// Text for the agent, as it is to be sent.
    Text(String),
    /// A command typed whole, with what follows its name (trimmed).
    Run(&'static Command, String),
    /// The start of one or more names (`/h`): the list decides.
    Partial(String),
    /// No command has this name; the nearest one.
    Unknown {
        name: String,
        nearest: &'static Command,
    },
    /// A command that takes nothing was given something, or one that
    /// needs something was given nothing.
    BadArgs(&'static Command),
}

/// The word after the slash, when the line has the form of a command.
pub fn command_word(line: &str) -> Option<(&str, &str)> {
    if line.contains('\n') || line.starts_with("//") {
        return None;
    }
    let word = line.strip_prefix('/')?;
    let (name, args) = word.split_once(' ').unwrap_or((word, ""));
    if !name.chars().all(|c| c.is_ascii_lowercase()) || (name.is_empty() && !args.is_empty()) {
        return None;
    }
    Some((name, args))
}

/// Reads a line as Enter sees it.
pub fn parse(line: &str) -> Parsed {
    if line.trim().is_empty() {
        return Parsed::Empty;
    }
    if let Some(rest) = line.strip_prefix("//") {
        return Parsed::Text(format!("/{rest}"));
    }
    let Some((name, args)) = command_word(line) else {
        return Parsed::Text(line.to_owned());
    };
    let args = args.trim();
    if let Some(command) = find(name) {
        return match (command.args, args.is_empty()) {
            (Args::None, false) | (Args::Required(_), true) => Parsed::BadArgs(command),
            _ => Parsed::Run(command, args.to_owned()),
        };
    }
    if args.is_empty() && !matching(name).is_empty() {
        return Parsed::Partial(name.to_owned());
    }
    Parsed::Unknown { name: format!("/{name}"), nearest: nearest(name) }
}

/// The commands whose names start with `prefix`, in table order.
pub fn matching(prefix: &str) -> Vec<&'static Command> {
    COMMANDS.iter().filter(|c| c.name.starts_with(prefix)).collect()
}

/// The command whose name is nearest `name` (edit distance; the first in
/// the table on a tie).
pub fn nearest(name: &str) -> &'static Command {
    let mut best = &COMMANDS[0];
    let mut best_d = usize::MAX;
    for c in COMMANDS {
        let d = distance(name, c.name);
        if d < best_d {
            best = c;
            best_d = d;
        }
    }
    best
}

/// Levenshtein distance between two short words.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The list's rows around `chosen`: at most `max`, as indices into `items`.
pub fn window(items: usize, chosen: usize, max: usize) -> std::ops::Range<usize> {
    if items <= max {
        return 0..items;
    }
    let start = chosen.saturating_sub(max / 2).min(items - max);
    start..start + max
}

/// `/help`: the keys, then the commands, as rows of text.
pub fn help() -> Vec<String> {
    let mut rows = Vec::new();
    let w = KEYS.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, what) in KEYS {
        rows.push(format!("{key:w$}  {what}"));
    }
    rows.push(String::new());
    let w = COMMANDS.iter().map(|c| c.usage().len()).max().unwrap_or(0);
    for c in COMMANDS {
        rows.push(format!("{:w$}  {}", c.usage(), c.what));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str) -> &'static Command {
        find(name).unwrap_or_else(|| panic!("no command {name}"))
    }

    #[test]
    fn parse_table() {
        let table = [
            ("", Parsed::Empty),
            ("hello", Parsed::Text("hello".into())),
            ("/help", Parsed::Run(cmd("help"), String::new())),
            ("/accept", Parsed::Run(cmd("accept"), String::new())),
            ("/accept abc1234", Parsed::Run(cmd("accept"), "abc1234".into())),
            ("/approve", Parsed::BadArgs(cmd("approve"))),
            ("/stop now", Parsed::BadArgs(cmd("stop"))),
            ("/h", Parsed::Partial("h".into())),
            ("/", Parsed::Partial(String::new())),
            ("/hlep", Parsed::Unknown { name: "/hlep".into(), nearest: cmd("help") }),
            ("/qiut", Parsed::Unknown { name: "/qiut".into(), nearest: cmd("quit") }),
            ("/h x", Parsed::Unknown { name: "/h".into(), nearest: cmd("help") }),
            ("//help me", Parsed::Text("/help me".into())),
            ("/home/you/notes.txt", Parsed::Text("/home/you/notes.txt".into())),
            ("/ spaced", Parsed::Text("/ spaced".into())),
            ("/Help", Parsed::Text("/Help".into())),
            ("/h2", Parsed::Text("/h2".into())),
            ("/stop\nmore", Parsed::Text("/stop\nmore".into())),
            ("say /stop", Parsed::Text("say /stop".into())),
        ];
        for (line, want) in table {
            assert_eq!(parse(line), want, "{line:?}");
        }
    }

    #[test]
    fn matching_and_completion() {
        let names = |p: &str| matching(p).iter().map(|c| c.name).collect::<Vec<_>>();
        assert_eq!(names("h"), ["history", "help"]);
        assert_eq!(names("ap"), ["approve"]);
        assert_eq!(names("x"), Vec::<&str>::new());
        assert_eq!(names("").len(), COMMANDS.len());
        assert_eq!(cmd("help").completed(), "/help");
        assert_eq!(cmd("approve").completed(), "/approve ");
        assert_eq!(cmd("accept").usage(), "/accept [commit]");
        assert_eq!(cmd("approve").usage(), "/approve <commit>");
    }

    #[test]
    fn the_window_follows_the_choice() {
        assert_eq!(window(3, 2, 6), 0..3);
        assert_eq!(window(10, 0, 6), 0..6);
        assert_eq!(window(10, 5, 6), 2..8);
        assert_eq!(window(10, 9, 6), 4..10);
    }

    #[test]
    fn help_lists_every_command() {
        let help = help().join("\n");
        for c in COMMANDS {
            assert!(help.contains(&c.usage()), "{}", c.name);
        }
    }
}
