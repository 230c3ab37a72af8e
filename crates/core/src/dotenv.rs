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
//!
//! `TENERAL_ENV_FILE` in `.env` names one more file of settings, read by the
//! same rules ([`Files`]): its settings join the first file's, a name set in
//! both is refused, and it cannot name a further file. So a key can live in
//! a file of its own (a Kubernetes Secret's mount) while `.env` stays on the
//! individual's volume, and neither has to pass through an environment. The
//! named file may not lie where a body writes ([`BODY_WRITES`]), as written
//! or once its links are followed: a body could otherwise change the
//! owner's settings, or point them at another file.

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
    #[error(
        "{name} is set in both {file} (line {first}) and {included} (line {line}), which \
         {INCLUDE_NAME} names; delete one of the two lines"
    )]
    TwiceAcross { file: String, included: String, name: &'static str, first: usize, line: usize },
}

/// The setting that names a further file of settings.
pub const INCLUDE_NAME: &str = "TENERAL_ENV_FILE";

/// The directories of an individual a body can write in (docs/cage.md):
/// no file of settings is read from below them.
pub const BODY_WRITES: [&str; 4] = ["soul", "inbox", "memory", ".teneral"];

/// The directory of [`BODY_WRITES`] that `target` lies in, as written
/// (`..` taken away by its words, as a path's reader would) or once its
/// links are followed, for the individual at `home`; `None`: none.
pub fn in_body_writes(home: &Path, target: &Path) -> Option<&'static str> {
    let lexical = normalize(&home.join(target));
    let home_lexical = normalize(home);
    let real = target_real(home, target);
    let home_real = std::fs::canonicalize(home).ok();
    BODY_WRITES.into_iter().find(|dir| {
        lexical.starts_with(home_lexical.join(dir))
            || matches!((&real, &home_real), (Some(r), Some(h)) if r.starts_with(h.join(dir)))
    })
}

/// `target` (relative to `home`) with its links followed, as far as it exists.
fn target_real(home: &Path, target: &Path) -> Option<PathBuf> {
    let path = home.join(target);
    std::fs::canonicalize(&path).ok().or_else(|| {
        std::fs::canonicalize(path.parent()?).ok().zip(path.file_name()).map(|(p, n)| p.join(n))
    })
}

/// `path` with `.` and `..` taken away by its words alone.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The value of one setting in `home/.env`, read by the same rules as the
/// kernel's; `None` when the file or the setting is absent or empty.
pub fn value_in(home: &Path, name: &str) -> Result<Option<String>, SettingsError> {
    let path = home.join(".env");
    let files = match Files::load(&path) {
        Ok(files) => files,
        Err(SettingsError::Missing { path: missing }) if missing == path => return Ok(None),
        Err(e) => return Err(e),
    };
    let entries = files.entries()?;
    Ok(entries.get(name).map(|e| e.value.to_owned()))
}

/// The text of a `.env` and of the file its `TENERAL_ENV_FILE` names, if
/// it names one: what [`Files::entries`] reads.
#[derive(Debug)]
pub struct Files {
    text: String,
    file: String,
    included: Option<(String, String)>,
}

impl Files {
    /// Reads `path` and the file its `TENERAL_ENV_FILE` names (relative to
    /// `path`'s directory when not absolute). A missing `path` is
    /// [`SettingsError::Missing`]; a missing named file is refused on its line.
    pub fn load(path: &Path) -> Result<Files, SettingsError> {
        let text = read_file(path)?;
        let file = path.display().to_string();
        let named = {
            let entries = read(&text, &file)?;
            entries
                .get(INCLUDE_NAME)
                .map(|entry| {
                    let target = path.parent().unwrap_or(Path::new("/")).join(entry.value);
                    (entry, target)
                })
                .map(|(entry, target)| {
                    let home = path.parent().unwrap_or(Path::new("/"));
                    if let Some(dir) = in_body_writes(home, Path::new(entry.value)) {
                        return Err(entries.refuse(
                            INCLUDE_NAME,
                            entry,
                            &format!("it lies in {dir}/, which a body writes"),
                            "keep the file of settings where only the owner writes (outside \
                             the individual's directory, or beside .env), and write its path",
                        ));
                    }
                    Ok((entry, target))
                })
                .map(|named| {
                    named.and_then(|(entry, target)| {
                        match read_file(&target) {
                    Ok(text) => Ok((text, target.display().to_string())),
                    Err(e) => Err(entries.refuse(
                        INCLUDE_NAME,
                        entry,
                        &match e {
                            SettingsError::Missing { .. } => "there is no such file".to_owned(),
                            e => e.to_string(),
                        },
                        "write the path of the file that holds the other settings (absolute, or \
                     relative to this file's directory), or delete the line",
                    )),
                }
                    })
                })
                .transpose()?
        };
        Ok(Files { text, file, included: named })
    }

    /// Every setting of both files. The named file may not name another,
    /// and a setting may be written in one file only.
    pub fn entries(&self) -> Result<Entries<'_>, SettingsError> {
        let mut entries = read(&self.text, &self.file)?;
        let Some((text, file)) = &self.included else { return Ok(entries) };
        let more = read(text, file)?;
        if let Some(entry) = more.get(INCLUDE_NAME) {
            return Err(more.refuse(
                INCLUDE_NAME,
                entry,
                &format!("it is itself named by {INCLUDE_NAME} in {}", self.file),
                "settings are read from two files at most: move this file's settings into \
                 the one that names it, or delete the line",
            ));
        }
        for (name, &(line, value, _)) in &more.map {
            if let Some(&(first, _, _)) = entries.map.get(name) {
                return Err(SettingsError::TwiceAcross {
                    file: self.file.clone(),
                    included: file.clone(),
                    name,
                    first,
                    line,
                });
            }
            entries.map.insert(name, (line, value, true));
        }
        entries.included = Some(file.clone());
        Ok(entries)
    }
}

/// The text of the settings file at `path`.
fn read_file(path: &Path) -> Result<String, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(SettingsError::Missing { path: path.to_owned() })
        }
        Err(source) => Err(SettingsError::Read { path: path.to_owned(), source }),
    }
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
    /// The file `TENERAL_ENV_FILE` named, when its settings are here too.
    included: Option<String>,
    /// Each setting's line, value, and whether it is the named file's.
    map: HashMap<&'static str, (usize, &'a str, bool)>,
}

impl<'a> Entries<'a> {
    /// The setting, or `None` when it is absent or empty.
    pub fn get(&self, name: &str) -> Option<Entry<'a>> {
        match self.map.get(name) {
            Some(&(line, value, _)) if !value.is_empty() => Some(Entry { line, value }),
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
        let included = self.map.get(name).is_some_and(|&(_, _, included)| included);
        let file = match (&self.included, included) {
            (Some(other), true) => other.clone(),
            _ => self.file.clone(),
        };
        SettingsError::Value {
            file,
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
    let mut entries = Entries { file: file.to_owned(), included: None, map: HashMap::new() };
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
        if let Some(&(first, _, _)) = entries.map.get(known) {
            return Err(SettingsError::Twice { file: file.to_owned(), name: known, first, line });
        }
        entries.map.insert(known, (line, value, false));
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

    /// The settings of `.env` and of the file its `TENERAL_ENV_FILE` names,
    /// as the kernel reads them.
    type Read = Result<Vec<(String, String)>, String>;

    fn both(main: &str, other: Option<&str>) -> Read {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::write(dir.path().join(".env"), main).map_err(|e| e.to_string())?;
        if let Some(other) = other {
            std::fs::create_dir(dir.path().join("secret")).map_err(|e| e.to_string())?;
            std::fs::write(dir.path().join("secret/settings.env"), other)
                .map_err(|e| e.to_string())?;
        }
        let shown =
            |e: SettingsError| e.to_string().replace(&dir.path().display().to_string(), "D");
        let files = Files::load(&dir.path().join(".env")).map_err(shown)?;
        let entries = files.entries().map_err(shown)?;
        let names = ["TENERAL_PROVIDER", "TENERAL_API_KEY", "TENERAL_MODEL"];
        Ok(names
            .iter()
            .filter_map(|n| entries.get(n).map(|e| ((*n).to_owned(), e.value.to_owned())))
            .collect())
    }

    #[test]
    fn a_named_file_adds_its_settings_by_the_same_rules() {
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        let main = "TENERAL_PROVIDER=compatible\nTENERAL_ENV_FILE=secret/settings.env\n";
        // (the named file's text, what is read or the words of the refusal)
        type Want<'a> = Result<Vec<(String, String)>, &'a str>;
        let table: [(Option<&str>, Want<'_>); 6] = [
            (
                Some("TENERAL_API_KEY=k-123\nTENERAL_MODEL=m\n"),
                Ok(vec![
                    pair("TENERAL_PROVIDER", "compatible"),
                    pair("TENERAL_API_KEY", "k-123"),
                    pair("TENERAL_MODEL", "m"),
                ]),
            ),
            (
                Some("TENERAL_PROVIDER=openai\n"),
                Err("TENERAL_PROVIDER is set in both D/.env (line 1) and D/secret/settings.env (line 1)"),
            ),
            (
                Some("TENERAL_API_KEY=\"k-123\"\n"),
                Err("TENERAL_API_KEY=<redacted> in D/secret/settings.env line 1: the value is in quotes"),
            ),
            (
                Some("TENERAL_MODLE=m\n"),
                Err("TENERAL_MODLE in D/secret/settings.env line 1 is not a setting teneral knows"),
            ),
            (
                Some("TENERAL_ENV_FILE=/etc/more.env\n"),
                Err("TENERAL_ENV_FILE=/etc/more.env in D/secret/settings.env line 1: it is itself named"),
            ),
            (
                None,
                Err("TENERAL_ENV_FILE=secret/settings.env in D/.env line 2: there is no such file; write the path"),
            ),
        ];
        for (other, want) in table {
            let got = both(main, other);
            match (&got, &want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{other:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{other:?}: {got}"),
                _ => panic!("{other:?}: {got:?}, wanted {want:?}"),
            }
            if let Err(message) = &got {
                assert!(!message.contains("k-123"), "the key in a message: {message}");
            }
        }
        assert_eq!(
            both("TENERAL_PROVIDER=standin\n", None),
            Ok(vec![pair("TENERAL_PROVIDER", "standin")])
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
