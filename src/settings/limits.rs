//! `TENERAL_MEMORY_MAX` and `TENERAL_TASKS_MAX`: the limits of a body and of
//! a gate check, written the way systemd takes them (`512M`, `4G`, a plain
//! number, or `infinity` for none).
//!
//! Invariant: a value is refused rather than rounded or guessed at; a limit
//! so small that nothing could run under it (below 16 MiB, below 8 tasks) is
//! refused too, with what to write instead.

use super::{Quota, SettingsError};
use teneral_core::dotenv::Entries;

const LEAST_MEMORY: u64 = 16 << 20;
const LEAST_TASKS: u64 = 8;

pub(super) fn limits(entries: &Entries<'_>) -> Result<Quota, SettingsError> {
    let memory_max = match entries.get_or_default("TENERAL_MEMORY_MAX") {
        None => return Err(no_default(entries, "TENERAL_MEMORY_MAX")),
        Some(entry) => match bytes(entry.value) {
            Some(Some(n)) if n < LEAST_MEMORY => {
                return Err(entries.refuse(
                    "TENERAL_MEMORY_MAX",
                    entry,
                    "less than 16M, too little for any body",
                    &example("TENERAL_MEMORY_MAX"),
                ))
            }
            Some(n) => n,
            None => {
                return Err(entries.refuse(
                    "TENERAL_MEMORY_MAX",
                    entry,
                    "not a size",
                    "write a number of bytes with K, M, G or T after it (e.g. 4G), or infinity",
                ))
            }
        },
    };
    let tasks_max = match entries.get_or_default("TENERAL_TASKS_MAX") {
        None => return Err(no_default(entries, "TENERAL_TASKS_MAX")),
        Some(entry) if entry.value == "infinity" => None,
        Some(entry) => match entry.value.parse::<u64>() {
            Ok(n) if n >= LEAST_TASKS => Some(n),
            _ => {
                return Err(entries.refuse(
                    "TENERAL_TASKS_MAX",
                    entry,
                    "not a whole number of at least 8",
                    &example("TENERAL_TASKS_MAX"),
                ))
            }
        },
    };
    Ok(Quota { memory_max, tasks_max })
}

/// What to write for the limit `name`: its default from the table, or none.
fn example(name: &str) -> String {
    format!("write e.g. {name}={}, or infinity for no limit", teneral_core::setting::default(name))
}

/// A limit neither written nor given a default by the table.
fn no_default(entries: &Entries<'_>, name: &'static str) -> SettingsError {
    SettingsError::Absent {
        file: entries.file.clone(),
        name,
        problem: "it has no default".to_owned(),
        fix: format!("write {name}=<limit>, or infinity for no limit"),
    }
}

/// `Some(None)` for infinity, `Some(Some(bytes))` for a size, `None` when
/// the text is neither.
fn bytes(text: &str) -> Option<Option<u64>> {
    if text == "infinity" {
        return Some(None);
    }
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 10),
        b'M' => (&text[..text.len() - 1], 20),
        b'G' => (&text[..text.len() - 1], 30),
        b'T' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1u64 << shift).map(Some)
}

#[cfg(test)]
mod tests {
    use super::bytes;
    use crate::settings::{Quota, RunnerChoice, Settings};

    #[test]
    fn sizes() {
        let table = [
            ("infinity", Some(None)),
            ("1024", Some(Some(1024))),
            ("512M", Some(Some(512 << 20))),
            ("4G", Some(Some(4 << 30))),
            ("2T", Some(Some(2 << 40))),
            ("1K", Some(Some(1024))),
            ("", None),
            ("G", None),
            ("1.5G", None),
            ("-1", None),
            ("4g", None),
            ("99999999999999T", None),
        ];
        for (text, want) in table {
            assert_eq!(bytes(text), want, "{text}");
        }
    }

    fn load(extra: &str) -> Result<Settings, String> {
        Settings::parse(&format!("TENERAL_PROVIDER=standin\n{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_values() {
        let s = load("").expect("no limits set is valid");
        assert_eq!(s.quota, Quota { memory_max: Some(4 << 30), tasks_max: Some(2048) });
        assert_eq!(s.runner, RunnerChoice::Auto);
        let s = load("TENERAL_MEMORY_MAX=256M\nTENERAL_TASKS_MAX=infinity\nTENERAL_RUNNER=direct")
            .expect("these limits are valid");
        assert_eq!(s.quota, Quota { memory_max: Some(256 << 20), tasks_max: None });
        assert_eq!(s.runner, RunnerChoice::Direct);
    }

    #[test]
    fn refusals_say_what_to_write() {
        let table = [
            ("TENERAL_MEMORY_MAX=lots", "write a number of bytes"),
            ("TENERAL_MEMORY_MAX=1M", "less than 16M"),
            ("TENERAL_TASKS_MAX=3", "at least 8"),
            ("TENERAL_RUNNER=docker", "TENERAL_RUNNER=auto or systemd or direct"),
        ];
        for (line, want) in table {
            let err = load(line).err().unwrap_or_default();
            assert!(err.contains(want), "{line}: {err}");
            assert!(err.contains("line 2"), "{line}: {err}");
        }
    }
}
