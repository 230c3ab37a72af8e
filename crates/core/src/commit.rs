//! A commit as the kernel names it: the full hex id of a git object, and the
//! short form people read. A leaf module: it depends on nothing of the
//! kernel, so every other module may use it.

use std::fmt;

/// Hex digits people read a commit by.
pub const SHORT_LEN: usize = 7;

/// The first [`SHORT_LEN`] characters of a commit's id, as people read them
/// (characters, not bytes: text read from a file may be anything).
pub fn short(commit: &str) -> &str {
    match commit.char_indices().nth(SHORT_LEN) {
        Some((end, _)) => &commit[..end],
        None => commit,
    }
}

/// A full commit id: 40 lowercase hex digits (SHA-1) or 64 (SHA-256).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Commit(String);

/// Text that is not a full commit id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a full commit id (40 or 64 hex digits)")]
pub struct NotACommit(pub String);

impl Commit {
    /// Takes `text` when it is a full commit id; upper-case digits are
    /// lowered, anything else is refused.
    pub fn parse(text: &str) -> Result<Commit, NotACommit> {
        let full = matches!(text.len(), 40 | 64);
        if full && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Commit(text.to_ascii_lowercase()))
        } else {
            Err(NotACommit(text.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The short form, [`SHORT_LEN`] digits.
    pub fn short(&self) -> &str {
        short(&self.0)
    }
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Commit {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Commit {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ids_parse_and_anything_else_is_refused() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        let cases: &[(&str, Option<&str>)] = &[
            (sha1, Some(sha1)),
            ("0123456789ABCDEF0123456789ABCDEF01234567", Some(sha1)),
            (&"a".repeat(64), Some(&"a".repeat(64))),
            ("0123456", None),
            ("", None),
            ("0123456789abcdef0123456789abcdef0123456g", None),
            ("../../etc/passwd", None),
            (&"a".repeat(41), None),
        ];
        for (text, want) in cases {
            let got = Commit::parse(text).ok();
            assert_eq!(got.as_ref().map(Commit::as_str), *want, "{text}");
        }
    }

    #[test]
    fn the_short_form_is_seven_digits_or_what_there_is() {
        assert_eq!(short("0123456789"), "0123456");
        assert_eq!(short("abc"), "abc");
        assert_eq!(short("ééééééééé"), "ééééééé");
        let c = Commit::parse("0123456789abcdef0123456789abcdef01234567").expect("a full id");
        assert_eq!(c.short(), "0123456");
        assert_eq!(c.to_string().len(), 40);
    }
}
