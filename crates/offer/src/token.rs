//! The forge token the owner typed (`teneralctl offer token`): kept in
//! `.teneral/auth/github-token` (0600), which no body can read, and read
//! back the way the key is: beneath the directory, following no link, a
//! file of one name that nobody else may read.
//!
//! It never leaves this process except in an HTTP header to the forge's
//! API and through the one-push credential file of [`crate::git`].

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use teneral_core::fsutil::{open_beneath, sync_dir};

use crate::key::AUTH_DIR;

/// The token's file name in [`AUTH_DIR`].
pub const TOKEN_NAME: &str = "github-token";

/// The token: never shown, never in `Debug` output.
pub struct Token(String);

impl Token {
    /// A token as typed: one line, no blanks inside.
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let text = text.trim();
        if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(TokenError::Shape);
        }
        Ok(Token(text.to_owned()))
    }

    /// The secret itself, for the one header or credential file that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(hidden)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("a token is one word without blanks; paste it again")]
    Shape,
    #[error("no forge token is stored: the owner types one with teneralctl offer token")]
    Missing,
    #[error("{path} is not a plain file of its own, or others may read it ({why}); move it away and type the token again with teneralctl offer token")]
    Unsafe { path: PathBuf, why: String },
    #[error("cannot {what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: io::Error },
}

pub fn token_path(home: &Path) -> PathBuf {
    home.join(AUTH_DIR).join(TOKEN_NAME)
}

/// The stored token.
pub fn load(home: &Path) -> Result<Token, TokenError> {
    let path = token_path(home);
    let dir = home.join(AUTH_DIR);
    let unsafe_ = |why: String| TokenError::Unsafe { path: path.clone(), why };
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(unsafe_("its directory is a symbolic link".into()));
    }
    let file = match open_beneath(&dir, Path::new(TOKEN_NAME)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(TokenError::Missing),
        Err(e) => return Err(unsafe_(e.to_string())),
    };
    let meta = file.metadata().map_err(|source| TokenError::Io {
        what: "read",
        path: path.clone(),
        source,
    })?;
    if meta.nlink() != 1 || meta.mode() & 0o077 != 0 {
        return Err(unsafe_(format!("{} names, mode {:o}", meta.nlink(), meta.mode() & 0o777)));
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).map_err(|source| TokenError::Io {
        what: "read",
        path: path.clone(),
        source,
    })?;
    Token::new(&text).map_err(|_| unsafe_("it holds no token".into()))
}

/// Stores `token` (0600, whole: written under a new temporary name, synced,
/// renamed over any earlier one, the directory synced).
pub fn store(home: &Path, token: &Token) -> Result<(), TokenError> {
    let dir = home.join(AUTH_DIR);
    let path = token_path(home);
    let io = |what, source| TokenError::Io { what, path: path.clone(), source };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| io("make the directory of", e))?;
    let tmp = dir.join(format!(".{TOKEN_NAME}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(format!("{}\n", token.expose()).as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(&dir)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(|e| io("write", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_private_and_never_shown() {
        let home = tempfile::tempdir().expect("a temporary directory");
        assert!(matches!(load(home.path()), Err(TokenError::Missing)));
        assert!(matches!(Token::new("two words"), Err(TokenError::Shape)));
        let token = Token::new(" ghp_abc \n").expect("a token");
        assert_eq!(format!("{token:?}"), "Token(hidden)");
        store(home.path(), &token).expect("stored");
        let mode = fs::metadata(token_path(home.path())).expect("there").mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load(home.path()).expect("loaded").expose(), "ghp_abc");
        fs::set_permissions(
            token_path(home.path()),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .expect("chmod");
        assert!(matches!(load(home.path()), Err(TokenError::Unsafe { .. })));
    }
}
