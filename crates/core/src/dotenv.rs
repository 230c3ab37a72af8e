//! Reading `.env` text into `NAME -> value` entries, before any value is
//! interpreted: the one reader of `.env` for every crate (the kernel's
//! settings, the client's, the offer's), so a file means the same to each.
//!
//! Invariants: a known name appears at most once; a value is taken exactly as
//! written after the first `=` (quotes and trailing comments are refused, not
//! stripped); a name that looks like one of teneral's but is not exactly a
//! known one is refused with the nearest known name; every other name is
//! ignored. The API key's value never appears in a message. The names, and
//! what a left-out one means, are those of the table in [`crate::setting`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::setting;

/// Why the settings cannot be read, each with what to write instead.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "there are no settings at {}: run `teneralctl setup -d {}`, or copy .env.example to .env and fill it in",
        path.display(),
        path.parent().unwrap_or(path).display()
    )]
    Missing { path: PathBuf },
    #[error("cannot read the settings at {}: {source}; make the file readable by this user", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{shown} in {file} line {line}: {problem}; {fix}")]
    Value { file: String, line: usize, shown: String, problem: String, fix: String },
    #[error(
        "{name} in {file} line {line} is not a setting teneral knows; did you mean {nearest}? \
         Write {nearest}=<value> on this line, or delete it"
    )]
    Unknown { file: String, line: usize, name: String, nearest: &'static str },
    #[error(
        "{name} is set twice in {file}, on lines {first} and {line}; delete one of the two lines"
    )]
    Twice { file: String, name: &'static str, first: usize, line: usize },
    #[error("{name} is not set in {file}: {problem}; {fix}")]
    Absent { file: String, name: &'static str, problem: String, fix: String },
}

/// The value of one setting in `home/.env`, read by the same rules as the
/// kernel's; `None` when the file or the setting is absent or empty.
pub fn value_in(home: &Path, name: &str) -> Result<Option<String>, SettingsError> {
    let Some((text, file)) = text_in(home)? else { return Ok(None) };
    let entries = read(&text, &file)?;
    Ok(entries.get(name).map(|e| e.value.to_owned()))
}

/// The text of `home/.env` and the name messages give it; `None` when there
/// is no such file.
pub fn text_in(home: &Path) -> Result<Option<(String, String)>, SettingsError> {
    let path = home.join(".env");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((text, path.display().to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SettingsError::Read { path, source }),
    }
}

/// The one name whose value is a secret.
pub const SECRET_NAME: &str = "TENERAL_API_KEY";

/// One setting as written: its line number and its value (never empty).
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub line: usize,
    pub value: &'a str,
}

/// The known settings of one file. A setting written with an empty value is
/// remembered (so a second line for it is still refused) but reads as unset.
#[derive(Debug)]
pub struct Entries<'a> {
    pub file: String,
    map: HashMap<&'static str, (usize, &'a str)>,
}

impl<'a> Entries<'a> {
    /// The setting, or `None` when it is absent or empty.
    pub fn get(&self, name: &str) -> Option<Entry<'a>> {
        match self.map.get(name) {
            Some(&(line, value)) if !value.is_empty() => Some(Entry { line, value }),
            _ => None,
        }
    }

    /// The setting as written, else its default from the table as if it
    /// were written (on line 0); `None` when both are absent or empty.
    pub fn get_or_default(&self, name: &str) -> Option<Entry<'a>> {
        self.get(name).or_else(|| {
            let value = setting::default(name);
            (!value.is_empty()).then_some(Entry { line: 0, value })
        })
    }

    /// A refusal of `name`'s value on its line.
    pub fn refuse(&self, name: &str, entry: Entry<'_>, problem: &str, fix: &str) -> SettingsError {
        SettingsError::Value {
            file: self.file.clone(),
            line: entry.line,
            shown: shown(name, entry.value),
            problem: problem.to_owned(),
            fix: fix.to_owned(),
        }
    }
}

/// One line of `.env` that is neither blank nor a comment, split at its
/// first `=`, nothing taken off either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// Counted from 1.
    pub line: usize,
    /// Everything before the first `=` (the whole line when there is none).
    pub name: &'a str,
    /// Everything after the first `=`; `None` when there is no `=`.
    pub value: Option<&'a str>,
}

/// The lines of `.env` text that say something, as written. [`read`] holds
/// them to the rules of settings; the offer's search for this install's
/// secrets reads every line through this too.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().enumerate().filter_map(|(index, raw)| {
        let start = raw.trim_start();
        if start.is_empty() || start.starts_with('#') {
            return None;
        }
        let (name, value) = match raw.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (raw, None),
        };
        Some(Line { line: index + 1, name, value })
    })
}

/// Splits `text` into known settings. `file` names the file in messages.
pub fn read<'a>(text: &'a str, file: &str) -> Result<Entries<'a>, SettingsError> {
    let mut entries = Entries { file: file.to_owned(), map: HashMap::new() };
    for Line { line, name, value } in lines(text) {
        let Some(known) = setting::find(name).map(|s| s.name) else {
            check_foreign(name, line, file)?;
            continue;
        };
        let Some(value) = value else {
            return Err(SettingsError::Value {
                file: file.to_owned(),
                line,
                shown: known.to_owned(),
                problem:
                    "no `=` after the name, and teneral does not take values from its environment"
                        .to_owned(),
                fix: format!("write {known}=<value> on this line, or delete it"),
            });
        };
        check_as_written(known, value, line, file)?;
        if let Some(&(first, _)) = entries.map.get(known) {
            return Err(SettingsError::Twice { file: file.to_owned(), name: known, first, line });
        }
        entries.map.insert(known, (line, value));
    }
    Ok(entries)
}

/// Refuses a name that is not a known one but looks like one of teneral's
/// (`export TENERAL_MODEL`, `teneral_model`, `TENERAL_MODLE`).
fn check_foreign(name: &str, line: usize, file: &str) -> Result<(), SettingsError> {
    let upper = name.to_ascii_uppercase();
    let Some(at) = upper.find("TENERAL") else {
        return Ok(());
    };
    let candidate = upper[at..].trim();
    let nearest = nearest(candidate);
    if candidate == nearest {
        return Err(SettingsError::Value {
            file: file.to_owned(),
            line,
            shown: name.trim().to_owned(),
            problem: "not written exactly as the setting's name".to_owned(),
            fix: format!(
                "write {nearest}=<value> in capitals, with nothing before the name and no space before ="
            ),
        });
    }
    Err(SettingsError::Unknown {
        file: file.to_owned(),
        line,
        name: name.trim().to_owned(),
        nearest,
    })
}

/// Refuses a value written with quotes, a trailing comment or spaces around
/// it: the file is read as written, so any of those would become part of the
/// value.
fn check_as_written(name: &str, value: &str, line: usize, file: &str) -> Result<(), SettingsError> {
    let quoted = value.len() >= 2
        && ((value.starts_with('"') && value.ends_with('"'))
            || (value.starts_with('\'') && value.ends_with('\'')));
    let problem = if quoted {
        "the value is in quotes"
    } else if value.contains(" #") || value.contains("\t#") {
        "a comment follows the value"
    } else if value.trim() != value {
        "spaces around the value"
    } else {
        return Ok(());
    };
    Err(SettingsError::Value {
        file: file.to_owned(),
        line,
        shown: shown(name, value),
        problem: problem.to_owned(),
        fix: format!(
            "values are written without quotes or comments: write {name}=value, \
             and put a comment on a line of its own starting with #"
        ),
    })
}

/// `NAME=value` as it may appear in a message: the key is hidden and a long
/// value is cut short.
pub fn shown(name: &str, value: &str) -> String {
    if name == SECRET_NAME {
        return format!("{name}=<redacted>");
    }
    const MAX: usize = 80;
    match value.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{name}={}...", &value[..cut]),
        None => format!("{name}={value}"),
    }
}

/// One of a few words, or the setting's default from the table when the
/// line is left out; anything else is refused on its line with the words to
/// write. Every crate reads a choice through this, so `.env` means the same
/// to each.
pub fn choice<T: Copy>(
    entries: &Entries<'_>,
    name: &'static str,
    options: &[(&str, T)],
) -> Result<T, SettingsError> {
    let words: Vec<&str> = options.iter().map(|(word, _)| *word).collect();
    let fix = format!("write {name}={}, or leave the line out", words.join(" or "));
    let entry = entries.get_or_default(name);
    match entry.and_then(|e| options.iter().find(|(word, _)| *word == e.value)) {
        Some((_, value)) => Ok(*value),
        None => match entry {
            Some(entry) => {
                Err(entries.refuse(name, entry, &format!("not one of {}", words.join(", ")), &fix))
            }
            // Neither written nor defaulted: the table lacks a default.
            None => Err(SettingsError::Absent {
                file: entries.file.clone(),
                name,
                problem: "it has no default".to_owned(),
                fix,
            }),
        },
    }
}

/// The known name closest to `candidate` by edit distance.
pub fn nearest(candidate: &str) -> &'static str {
    setting::all()
        .map(|s| s.name)
        .min_by_key(|known| distance(candidate, known))
        .unwrap_or("TENERAL_PROVIDER")
}

/// Levenshtein distance over bytes (names are ASCII).
fn distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(ca != *cb);
            current[j + 1] = replace.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_say_something_as_written() {
        let text = "# c\n\n  # d=1\nA=1\nexport B = \"2\"\nno equals\r\nC==x=\n";
        let got: Vec<Line<'_>> = lines(text).collect();
        let want = [
            Line { line: 4, name: "A", value: Some("1") },
            Line { line: 5, name: "export B ", value: Some(" \"2\"") },
            Line { line: 6, name: "no equals", value: None },
            Line { line: 7, name: "C", value: Some("=x=") },
        ];
        assert_eq!(got, want);
    }

    /// Every refusal of a line names the file, the line, the key and what
    /// to write instead.
    #[test]
    fn each_refusal_names_file_line_key_and_fix() {
        let file = "/home/i/.env";
        // (text, where it is refused, the key, words of the fix)
        let table = [
            (
                "TENERAL_PUBLISH=\"auto\"\n",
                "line 1",
                "TENERAL_PUBLISH",
                "write TENERAL_PUBLISH=value",
            ),
            (
                "TENERAL_PUBLISH='auto'\n",
                "line 1",
                "TENERAL_PUBLISH",
                "write TENERAL_PUBLISH=value",
            ),
            (
                "#\nTENERAL_PUBLISH=auto # yes\n",
                "line 2",
                "TENERAL_PUBLISH",
                "comment on a line of its own",
            ),
            ("TENERAL_PUBLISH= auto\n", "line 1", "TENERAL_PUBLISH", "write TENERAL_PUBLISH=value"),
            (
                "export TENERAL_PUBLISH=auto\n",
                "line 1",
                "TENERAL_PUBLISH",
                "nothing before the name",
            ),
            (
                "teneral_publish=auto\n",
                "line 1",
                "TENERAL_PUBLISH",
                "write TENERAL_PUBLISH=<value> in capitals",
            ),
            ("TENERAL_PUBLISH\n", "line 1", "TENERAL_PUBLISH", "write TENERAL_PUBLISH=<value>"),
            ("TENERAL_PUBLSH=auto\n", "line 1", "TENERAL_PUBLSH", "Write TENERAL_PUBLISH=<value>"),
            (
                "TENERAL_PUBLISH=auto\nTENERAL_PUBLISH=off\n",
                "lines 1 and 2",
                "TENERAL_PUBLISH",
                "delete one of",
            ),
        ];
        for (text, line, key, fix) in table {
            let message = read(text, file).err().map(|e| e.to_string()).unwrap_or_default();
            for part in [file, line, key, fix] {
                assert!(message.contains(part), "{text:?}: {message:?} lacks {part:?}");
            }
        }
        let entries = read("TENERAL_PUBLISH=yes\n", file).expect("read");
        let message = choice(&entries, "TENERAL_PUBLISH", &[("ask", 0), ("auto", 1), ("off", 2)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            message,
            "TENERAL_PUBLISH=yes in /home/i/.env line 1: not one of ask, auto, off; \
             write TENERAL_PUBLISH=ask or auto or off, or leave the line out"
        );
    }

    #[test]
    fn a_left_out_choice_takes_the_tables_default() {
        let entries = read("", ".env").expect("read");
        let publish = choice(&entries, "TENERAL_PUBLISH", &[("ask", 0), ("auto", 1), ("off", 2)]);
        assert_eq!(publish.ok(), Some(0));
        let none = choice(&entries, "TENERAL_MODEL", &[("m", 0)]).err().map(|e| e.to_string());
        assert!(none.is_some_and(|m| m.contains("TENERAL_MODEL is not set")));
    }
}
