//! The welcome panel, printed once on attaching: who this is and what is
//! true of it. Gathering reads a few small files; laying out is pure.
//!
//! Invariants: only the settings named in [`SHOWN`] are read from `.env`
//! (never a key); every value read from the individual's files is
//! sanitized; the soul's name is taken from a `name: ...` line in a `.md`
//! file under `soul/`, else from a short first-level heading.

use std::io::{BufRead, BufReader};
use std::path::Path;

use ratatui::text::{Line, Span};

use super::render::{cut, sanitize};
use super::theme::{Role, Theme};

/// The settings of `.env` the panel and the footer show.
const SHOWN: &[&str] = &["TENERAL_MODEL", "TENERAL_PROVIDER", "TENERAL_REASONING_EFFORT"];

/// What the panel shows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Facts {
    pub name: Option<String>,
    pub dir: String,
    pub generation: Option<String>,
    pub generations: usize,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub effort: Option<String>,
    pub born: Option<String>,
}

/// The individual's name from the text of a soul file.
pub fn soul_name(text: &str) -> Option<String> {
    for line in text.lines() {
        if let Some(name) = line.trim().strip_prefix("name:") {
            let name = sanitize(name.trim());
            if !name.is_empty() {
                return Some(cut(&name, 40));
            }
        }
    }
    let heading = text.lines().find_map(|l| l.strip_prefix("# "))?.trim();
    (heading.split_whitespace().count() <= 2 && !heading.is_empty())
        .then(|| cut(&sanitize(heading), 40))
}

/// The value of `name` in the text of a `.env` file, unquoted.
pub fn env_value(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.trim().strip_prefix("export ").unwrap_or(l.trim()).split_once('=')?;
        (k.trim() == name).then(|| sanitize(v.trim().trim_matches(['"', '\''])))
    })
}

/// Reads what the panel shows from the individual at `home`.
pub fn gather(home: &Path) -> Facts {
    let mut facts = Facts { dir: home.display().to_string(), ..Facts::default() };
    if let Ok(dir) = std::fs::read_dir(home.join("soul")) {
        let mut files: Vec<_> = dir.flatten().map(|e| e.path()).collect();
        files.sort();
        facts.name = files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .find_map(|t| soul_name(&t));
    }
    if let Ok(env) = std::fs::read_to_string(home.join(".env")) {
        let [model, provider, effort] = [0, 1, 2].map(|i| env_value(&env, SHOWN[i]));
        (facts.model, facts.provider, facts.effort) = (model, provider, effort);
    }
    if let Ok(state) = crate::state::State::load(home) {
        facts.generation = state.generation.map(|c| sanitize(crate::commit::short(&c)));
    }
    let journal = home.join(crate::journal::JOURNAL_PATH);
    if let Ok(file) = std::fs::File::open(journal) {
        let mut first = Vec::new();
        let _ = BufReader::new(file).take_line(&mut first);
        facts.born = crate::journal::parse_line(&first)
            .map(|e| sanitize(e.ts.get(..16).unwrap_or(&e.ts)).replace('T', " "));
    }
    facts
}

trait TakeLine {
    fn take_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize>;
}

impl<R: BufRead> TakeLine for R {
    /// Reads the first line, at most 64 KiB of it.
    fn take_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        std::io::Read::take(self, 64 << 10).read_until(b'\n', buf)
    }
}

/// The provider built into the kernel, which needs no model named: it is
/// its own (`TENERAL_PROVIDER=standin`).
const STANDIN: &str = "standin";

impl Facts {
    /// The model the kernel asks, as `.env` names it: `TENERAL_MODEL`, or the
    /// stand-in's own when the provider is the stand-in and none is named.
    pub fn model_used(&self) -> Option<String> {
        let standin = self.provider.as_deref() == Some(STANDIN);
        self.model.clone().or_else(|| standin.then(|| STANDIN.to_owned()))
    }
}

/// The panel's `model` row: the model and its provider.
fn model_row(model: Option<&str>, provider: Option<&str>) -> String {
    match (model, provider) {
        (None, Some(STANDIN)) => format!("{STANDIN} (built in)"),
        (Some(m), Some(p)) => format!("{m} ({p})"),
        (Some(m), None) => m.to_owned(),
        (None, _) => "not set".to_owned(),
    }
}

/// The panel's rows.
pub fn layout(facts: &Facts, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let accent = theme.style(Role::Accent);
    let dim = theme.style(Role::Dim);
    let who = facts.name.clone().unwrap_or_else(|| "an individual with no name yet".to_owned());
    let mut rows = vec![Line::from(vec![
        Span::styled(format!("{}teneral", theme.marks.status), accent),
        Span::styled(format!("  talking with {who}"), theme.style(Role::Owner)),
    ])];
    let model = model_row(facts.model.as_deref(), facts.provider.as_deref());
    let generation = facts.generation.clone().unwrap_or_else(|| "none yet".to_owned());
    let table = [
        ("directory", facts.dir.clone()),
        ("generation", generation),
        ("model", model),
        ("version", env!("CARGO_PKG_VERSION").to_owned()),
        ("born", facts.born.clone().unwrap_or_else(|| "not yet".to_owned())),
    ];
    for (key, value) in table {
        let value = cut(&value, width.saturating_sub(15).max(8));
        rows.push(Line::from(vec![Span::styled(format!("  {key:<11}  "), dim), Span::raw(value)]));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soul_name_table() {
        let table = [
            ("name: Ada\n# Something else", Some("Ada")),
            ("# Ada\nI am ...", Some("Ada")),
            ("# Who I am and why\n", None),
            ("no name here", None),
            ("name: \u{1b}[31mEve\u{1b}[0m", Some("Eve")),
        ];
        for (text, want) in table {
            assert_eq!(soul_name(text).as_deref(), want, "{text:?}");
        }
    }

    #[test]
    fn the_model_row_names_the_built_in_stand_in() {
        let table = [
            (None, Some("standin"), "standin (built in)"),
            (Some("scripted"), Some("standin"), "scripted (standin)"),
            (Some("gpt-x"), Some("openai"), "gpt-x (openai)"),
            (Some("gpt-x"), None, "gpt-x"),
            (None, Some("compatible"), "not set"),
            (None, None, "not set"),
        ];
        for (model, provider, want) in table {
            assert_eq!(model_row(model, provider), want, "{model:?} of {provider:?}");
        }
    }

    /// An individual born with the stand-in (the `.env` the quick start
    /// writes names no model): the panel's model row and the footer's model.
    #[test]
    fn the_panel_of_a_stand_in_individual_names_its_model() {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(dir.path().join(".env"), "TENERAL_PROVIDER=standin\n").expect(".env");
        let facts = gather(dir.path());
        assert_eq!(facts.model_used().as_deref(), Some("standin"));
        let rows = layout(&facts, &Theme::new(false, true), 80);
        let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        assert!(text.contains(&"  model        standin (built in)".to_owned()), "{text:#?}");
    }

    #[test]
    fn env_values_are_read_unquoted() {
        let env =
            "TENERAL_API_KEY=secret\nTENERAL_MODEL=\"gpt-x\"\nexport TENERAL_PROVIDER=openai\n";
        assert_eq!(env_value(env, "TENERAL_MODEL").as_deref(), Some("gpt-x"));
        assert_eq!(env_value(env, "TENERAL_PROVIDER").as_deref(), Some("openai"));
        assert_eq!(env_value(env, "TENERAL_EFFORT"), None);
    }
}
