//! Every setting `.env` holds, defined once: its name, its default, what it
//! means in the owner's words, and whether it is the owner's or a knob for
//! the kernel's own tests.
//!
//! Everything else is made from or checked against these two tables: the
//! names [`crate::dotenv`] accepts (and the nearest one it offers for a
//! misspelling), the defaults the kernel's settings take when a line is left
//! out, `.env.example` ([`example`], written by
//! `cargo run --locked -p teneral-core --example env-example`), and the
//! README's settings table (a test holds it to exactly [`OWNER`]).
//!
//! Invariants: a name is in one table only; a knob for tests starts with
//! `TENERAL_TEST_` and never appears in `.env.example` or the README.
//!
//! Variables the tests and benchmarks set in a process's environment
//! (`TENERAL_TEST_NO_CAGE`, `TENERAL_BENCH_*` and the like) are not settings:
//! they are in neither table, and `.env` refuses them as unknown names.

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    /// The value a left-out line means, as it would be written; empty when
    /// leaving it out means something [`Setting::meaning`] says.
    pub default: &'static str,
    /// One line, in the owner's words.
    pub meaning: &'static str,
    /// How `.env.example` shows it.
    pub example: Example,
}

/// How `.env.example` shows a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Example {
    /// As a line in force, `NAME=value`.
    Set(&'static str),
    /// As a commented-out line, `# NAME=value`.
    Commented(&'static str),
    /// Not at all: a knob for tests.
    Never,
}

const fn owner(
    name: &'static str,
    default: &'static str,
    meaning: &'static str,
    example: Example,
) -> Setting {
    Setting { name, default, meaning, example }
}

const fn test(name: &'static str, default: &'static str, meaning: &'static str) -> Setting {
    Setting { name, default, meaning, example: Example::Never }
}

use Example::{Commented, Set};

/// The owner's settings, in the order `.env.example` and the README list them.
pub const OWNER: &[Setting] = &[
    owner(
        "TENERAL_PROVIDER",
        "compatible",
        "Which model provider: standin (built in, no network, no key), compatible (any OpenAI-compatible endpoint), openai, or chatgpt (a ChatGPT plan; run teneralctl setup to sign in).",
        Set("standin"),
    ),
    owner(
        "TENERAL_BASE_URL",
        "",
        "The endpoint's base address; needed for compatible (openai's is https://api.openai.com/v1).",
        Commented("https://host/v1"),
    ),
    owner(
        "TENERAL_API_KEY",
        "",
        "The endpoint's key; needed for compatible and openai, never written for chatgpt.",
        Commented("your-key"),
    ),
    owner(
        "TENERAL_ENV_FILE",
        "",
        "A further file of settings, read by the same rules (absolute, or relative to this directory): keep the key there, e.g. where a Kubernetes Secret is mounted; a setting may be in one of the two files only.",
        Commented("/etc/teneral/settings.env"),
    ),
    owner(
        "TENERAL_MODEL",
        "",
        "The model's name, one that supports tool calls; needed except for standin.",
        Commented("your-model"),
    ),
    owner(
        "TENERAL_REASONING_EFFORT",
        "",
        "How hard the model reasons: none, minimal, low, medium, high or xhigh; left out, the model's own default.",
        Commented("medium"),
    ),
    owner(
        "TENERAL_HEARTBEAT_MINUTES",
        "30",
        "Minutes between clock stimuli; 0 turns the clock off.",
        Set("30"),
    ),
    owner(
        "TENERAL_CONTEXT_CHARS",
        "250000",
        "Characters of context sent per request, at least 1000; lower it when the agent says the conversation no longer fits the model.",
        Set("250000"),
    ),
    owner(
        "TENERAL_CHECK_MINUTES",
        "10",
        "Minutes one check of a mutation may run (the whole kernel's type check, tests and build get three times as many); 0 for no limit.",
        Set("10"),
    ),
    owner(
        "TENERAL_SMOKE_SECONDS",
        "30",
        "Seconds the smoke run has to become ready and reply; 0 for no limit.",
        Set("30"),
    ),
    owner(
        "TENERAL_EVALS",
        "off",
        "What the gate does with the evaluations in evals/ (docs/evals.md): off, report (runs them after the smoke run and journals the results), or gate (also refuses a candidate that fails one the running generation passes).",
        Commented("gate"),
    ),
    owner(
        "TENERAL_RUNNER",
        "auto",
        "How bodies and checks run: auto (a systemd unit when systemctl --user works, else a child of the kernel), systemd (always a unit), or direct (always a child, without memory and task limits).",
        Set("auto"),
    ),
    owner(
        "TENERAL_MEMORY_MAX",
        "4G",
        "The memory a body or a check may use, with K, M, G or T after the number, or infinity (systemd's MemoryMax).",
        Set("4G"),
    ),
    owner(
        "TENERAL_TASKS_MAX",
        "2048",
        "How many processes and threads a body or a check may have at once, or infinity (systemd's TasksMax).",
        Set("2048"),
    ),
    owner(
        "TENERAL_STANDIN_PROTOCOL",
        "chat",
        "For standin: the API the stand-in model speaks, chat or responses.",
        Commented("chat"),
    ),
    owner(
        "TENERAL_STANDIN_SCRIPT",
        "",
        "For standin: a script of the stand-in model's answers (JSON Lines), relative to this directory; left out, it repeats what it is told.",
        Commented("standin.jsonl"),
    ),
    owner(
        "TENERAL_STANDIN_LOG",
        "",
        "For standin: a file every request the stand-in gets is appended to, one JSON line each.",
        Commented("standin-requests.jsonl"),
    ),
    owner(
        "TENERAL_WARM_GATE",
        "on",
        "on: once a generation's body has started, the gate's checks of the running tree run in the background at the lowest priority (the body's first), so a body change finds its dependencies compiled; a mutation stops them rather than waiting; off: nothing is checked before a mutation.",
        Commented("on"),
    ),
    owner(
        "TENERAL_CAGE_ZYGOTE",
        "on",
        "on: one zygote forks the cage's launches with their namespaces made ahead of need, so a cage starts faster; off: the cage's helper runs for each launch (docs/cage.md).",
        Commented("on"),
    ),
    owner(
        "TENERAL_LOG_FORMAT",
        "auto",
        "How the kernel writes its log where systemd's journal does not take it: auto (one JSON object per line on stdout when stdout is a pipe and stderr no terminal or file, as in a container's log; else lines of text on stderr), json (JSON lines on stdout), or text (on stderr).",
        Commented("json"),
    ),
    owner(
        "TENERAL_UNSAFE_UNCONFINED",
        "0",
        "UNSAFE: 1 runs every body and check without the cage, with your files and keys in its reach; only for a Linux that lacks what the cage needs.",
        Commented("1"),
    ),
    owner(
        "TENERAL_EGRESS",
        "public",
        "What a generation reaches through the kernel's egress proxy: public (any public host), off (nothing), or host names separated by commas, each with its subdomains.",
        Commented("crates.io,github.com"),
    ),
    owner(
        "TENERAL_UPSTREAM",
        "",
        "Which ref is the species: <remote>/<branch>, else a local branch; left out, origin/main when there is a remote origin, else the current branch.",
        Commented("origin/main"),
    ),
    owner(
        "TENERAL_SPECIES",
        "ask",
        "May a mutation take a species commit that brings a new kernel: ask (you accept each with teneralctl accept), auto, or off.",
        Commented("ask"),
    ),
    owner(
        "TENERAL_PUBLISH",
        "ask",
        "May a checked offer go out as a pull request: ask (you approve each with teneralctl offer approve), auto, or off.",
        Commented("ask"),
    ),
    owner(
        "TENERAL_FORGE_API",
        "",
        "The forge's REST API for offers when the species is not on github.com (there it is https://api.github.com).",
        Commented("https://forge.example/api/v3"),
    ),
];

/// Knobs for the kernel's own tests; an owner's `.env` leaves them out.
pub const TEST: &[Setting] = &[
    test(
        "TENERAL_TEST_READY_SECONDS",
        "60",
        "Seconds a started body has to report that it is ready.",
    ),
    test("TENERAL_TEST_REPLY_SECONDS", "600", "Seconds a body has to give its first reply."),
    test(
        "TENERAL_TEST_STOP_GRACE_SECONDS",
        "5",
        "Seconds between SIGTERM and SIGKILL when a body is stopped.",
    ),
    test("TENERAL_TEST_BACKOFF_MS", "1000", "Milliseconds in the unit the crash backoff counts."),
    test(
        "TENERAL_TEST_LONG_RUN_SECONDS",
        "3600",
        "Seconds after which a generation no longer counts as crashing early.",
    ),
    test(
        "TENERAL_TEST_CHECK_SECONDS",
        "",
        "A limit in seconds for one check of a mutation, in place of TENERAL_CHECK_MINUTES.",
    ),
    test(
        "TENERAL_TEST_PRETEND_MISSING",
        "",
        "Confinement features (landlock, seccomp, namespaces) the kernel treats as missing.",
    ),
    test(
        "TENERAL_TEST_EGRESS_RESOLVE",
        "",
        "name=address:port pairs the egress proxy sends to a local address as if it were public.",
    ),
];

/// Every setting, the owner's first.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    OWNER.iter().chain(TEST)
}

/// The setting called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Setting> {
    all().find(|s| s.name == name)
}

/// What a left-out `name` means as written; empty when it has no written
/// default or is not a setting.
pub fn default(name: &str) -> &'static str {
    find(name).map_or("", |s| s.default)
}

/// The lines `.env.example` starts with.
const EXAMPLE_HEAD: &str = "\
# teneral's settings. Copy this file to .env in the individual's directory
# and change what you need (scripts/install does the copy for a new one).
#
# One setting per line, NAME=value. Write the value exactly as it is meant:
# no quotes around it, no spaces around =, and no comment after it (a comment
# goes on a line of its own, starting with #). A TENERAL_ name teneral does
# not know is refused, so a misspelt setting cannot go unnoticed. Only this
# file counts: variables in the environment are not read. A line left out
# takes the default its comment names. The README's settings table says more
# of each.
#
# This file is made from the table in crates/core/src/setting.rs:
#   cargo run --locked -p teneral-core --example env-example > .env.example
";

/// The text of `.env.example`: every owner's setting with its meaning, its
/// default and an example line, in [`OWNER`]'s order.
pub fn example() -> String {
    let mut text = String::from(EXAMPLE_HEAD);
    for setting in OWNER {
        text.push('\n');
        for line in wrap(setting.meaning, 76) {
            text.push_str(&format!("# {line}\n"));
        }
        if !setting.default.is_empty() {
            text.push_str(&format!("# Left out: {}.\n", setting.default));
        }
        match setting.example {
            Example::Set(value) => text.push_str(&format!("{}={value}\n", setting.name)),
            Example::Commented(value) => text.push_str(&format!("# {}={value}\n", setting.name)),
            Example::Never => {}
        }
    }
    text
}

/// `text` in lines of at most `width` characters, broken between words (a
/// longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// The rows of the table under `## Settings` in the README's text, in
/// order: the name in the first column, and the rest of the row.
pub fn readme_rows(readme: &str) -> Vec<(&str, &str)> {
    let section = readme.split("\n## Settings\n").nth(1).unwrap_or("");
    let section = section.split("\n## ").next().unwrap_or("");
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn each_name_is_defined_once_and_test_knobs_say_so() {
        let mut seen = BTreeSet::new();
        for setting in all() {
            assert!(seen.insert(setting.name), "{} is defined twice", setting.name);
            assert!(setting.name.starts_with("TENERAL_"), "{}", setting.name);
            assert!(!setting.meaning.contains('\n'), "{}: one line", setting.name);
        }
        for setting in OWNER {
            assert!(!setting.name.starts_with("TENERAL_TEST_"), "{} is a test knob", setting.name);
            assert_ne!(setting.example, Example::Never, "{} is the owner's", setting.name);
        }
        for setting in TEST {
            assert!(setting.name.starts_with("TENERAL_TEST_"), "{}", setting.name);
            assert_eq!(setting.example, Example::Never, "{}", setting.name);
        }
    }

    #[test]
    fn the_example_file_is_made_from_the_table() {
        let file = include_str!("../../../.env.example");
        assert!(
            file == example(),
            ".env.example differs from the table of settings; write it again with \
             `cargo run --locked -p teneral-core --example env-example > .env.example`"
        );
        for setting in TEST {
            assert!(!file.contains(setting.name), "{} is in .env.example", setting.name);
        }
    }

    #[test]
    fn the_readme_table_lists_exactly_the_owners_settings() {
        let rows = readme_rows(include_str!("../../../README.md"));
        for (name, meaning) in &rows {
            let default = default(name);
            if default.is_empty() {
                continue;
            }
            assert!(
                meaning.contains(&format!("`{default}`"))
                    || meaning.contains(&format!("default {default}")),
                "the README's row of {name} does not name its default {default:?}"
            );
        }
        let listed: Vec<&str> = rows.iter().map(|(name, _)| *name).collect();
        let owners: Vec<&str> = OWNER.iter().map(|s| s.name).collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), listed.len(), "a setting is listed twice: {listed:?}");
        let listed: BTreeSet<&str> = listed.into_iter().collect();
        let owners: BTreeSet<&str> = owners.into_iter().collect();
        assert_eq!(
            listed, owners,
            "the README's settings table must list exactly the owner's settings of crates/core/src/setting.rs"
        );
    }

    #[test]
    fn a_knob_of_the_environment_is_no_setting() {
        for name in ["TENERAL_TEST_NO_CAGE", "TENERAL_BENCH_SYSCALLS"] {
            assert_eq!(find(name), None, "{name}");
            let refused = crate::dotenv::read(&format!("{name}=1\n"), ".env").err();
            assert!(
                matches!(refused, Some(crate::dotenv::SettingsError::Unknown { line: 1, .. })),
                "{name}: {refused:?}"
            );
        }
    }

    #[test]
    fn meanings_wrap_between_words() {
        assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap("averylongword x", 4), ["averylongword", "x"]);
        assert_eq!(wrap("", 4), Vec::<String>::new());
    }

    #[test]
    fn the_readme_table_is_found_and_read() {
        let readme = "# x\n## Settings\n\n| variable | meaning |\n|---|---|\n| `A` | a |\n| `B` | b |\n\n## Next\n| `C` | c |\n";
        assert_eq!(readme_rows(readme), [("A", " | a |"), ("B", " | b |")]);
        assert_eq!(readme_rows("no table"), Vec::<(&str, &str)>::new());
    }
}
