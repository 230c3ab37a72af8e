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
/// Read from a file (`state.json`), it is checked like any other text.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
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

    /// The id of a git object from its raw bytes (20 for SHA-1, 32 for
    /// SHA-256, as git2's `Oid::as_bytes` gives them), in hex.
    pub fn from_raw(bytes: &[u8]) -> Commit {
        debug_assert!(matches!(bytes.len(), 20 | 32), "an object id is 20 or 32 bytes");
        let mut hex = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        Commit(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The short form, [`SHORT_LEN`] digits.
    pub fn short(&self) -> &str {
        short(&self.0)
    }
}

impl TryFrom<String> for Commit {
    type Error = NotACommit;
    fn try_from(text: String) -> Result<Commit, NotACommit> {
        Commit::parse(&text)
    }
}

impl From<Commit> for String {
    fn from(commit: Commit) -> String {
        commit.0
    }
}

impl PartialEq<str> for Commit {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Commit {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Commit {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
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

/// Hex digits only: a commit is a safe name for one file or directory.
impl AsRef<std::path::Path> for Commit {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(&self.0)
    }
}

impl AsRef<std::ffi::OsStr> for Commit {
    fn as_ref(&self) -> &std::ffi::OsStr {
        std::ffi::OsStr::new(&self.0)
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
    fn raw_bytes_are_written_as_lowercase_hex() {
        let raw: Vec<u8> = (0..20).map(|i| i * 13).collect();
        let commit = Commit::from_raw(&raw);
        assert_eq!(commit.as_str(), "000d1a2734414e5b6875828f9ca9b6c3d0ddeaf7");
        assert_eq!(Commit::parse(commit.as_str()), Ok(commit));
    }

    #[test]
    fn full_ids_parse_and_anything_else_is_refused() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        // Named, so that the borrows below outlive the statement (rustc 1.85).
        let (sha256, too_long) = ("a".repeat(64), "a".repeat(41));
        let cases: &[(&str, Option<&str>)] = &[
            (sha1, Some(sha1)),
            ("0123456789ABCDEF0123456789ABCDEF01234567", Some(sha1)),
            (&sha256, Some(&sha256)),
            ("0123456", None),
            ("", None),
            ("0123456789abcdef0123456789abcdef0123456g", None),
            ("../../etc/passwd", None),
            (&too_long, None),
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
