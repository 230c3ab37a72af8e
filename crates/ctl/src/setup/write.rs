//! The one step both ways of asking end with: the provider's settings put
//! into `.env` (and a sign-in's tokens into `.teneral/auth/chatgpt.json`),
//! and what to tell the owner about it.
//!
//! Invariants: called only once both tests passed and the owner agreed;
//! `.env` is replaced atomically with mode 0600; should `.env` fail, a token
//! file written just before is put back as it was; the key is never in
//! what is said ([`shown`]).
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use teneral_core::chatgpt::Tokens;

use super::{env, SetupError};

/// Writes `settings` over `existing` (the text of `.env`, or `None` for a
/// new one, which starts from `.env.example`); the lines to tell the owner.
pub fn settings(
    home: &Path,
    existing: Option<String>,
    settings: &[(&'static str, String)],
    tokens: Option<&Tokens>,
) -> Result<Vec<String>, SetupError> {
    let path = home.join(".env");
    let base = match existing {
        Some(text) => text,
        // A new .env starts from the checkout's commented example.
        None => std::fs::read_to_string(home.join(".env.example")).unwrap_or_default(),
    };
    let pairs: Vec<(&str, &str)> = settings.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let text = env::merge(&base, &pairs);
    let tokens_path = teneral_core::chatgpt::tokens_path(home);
    let previous_tokens = std::fs::read(&tokens_path).ok();
    if let Some(tokens) = tokens {
        teneral_core::chatgpt::write(&tokens_path, tokens)
            .map_err(|source| SetupError::Write { path: tokens_path.clone(), source })?;
    }
    if let Err(source) = write_private(&path, text.as_bytes()) {
        if tokens.is_some() {
            // Put the token file back as it was, so that nothing changed.
            let _ = match &previous_tokens {
                Some(bytes) => write_private(&tokens_path, bytes),
                None => std::fs::remove_file(&tokens_path),
            };
        }
        return Err(SetupError::Write { path: path.clone(), source });
    }
    let mut said = Vec::new();
    if tokens.is_some() {
        said.push(format!(
            "Wrote the sign-in's tokens to {} (mode 0600); the kernel renews them. \
             What the agent uses counts against your plan: review or limit it at {}.",
            tokens_path.display(),
            teneral_core::chatgpt::USAGE_PAGE
        ));
    }
    said.push(format!("Wrote {} (mode 0600): {}.", path.display(), shown(settings).join(", ")));
    said.push(restart_advice(home));
    Ok(said)
}

/// Pure: the settings as the owner may see them, the key hidden.
pub fn shown(settings: &[(&'static str, String)]) -> Vec<String> {
    settings
        .iter()
        .map(|(name, value)| {
            if *name == "TENERAL_API_KEY" {
                format!("{name}=(the key)")
            } else {
                format!("{name}={value}")
            }
        })
        .collect()
}

/// Writes `bytes` to `path` atomically: a 0600 file beside it, synced, then
/// renamed over it, and the directory synced.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".env.setup-{}", std::process::id()));
    let result = (|| {
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        crate::fsutil::sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What the owner does next for the kernel to use the new settings.
fn restart_advice(home: &Path) -> String {
    let unit = crate::status::read(home).and_then(|s| s.unit);
    super::advice(crate::lock::is_held(home), unit.as_deref())
}
