//! The git commands of a publish (`ls-remote`, `push`), and the one way the
//! token reaches git: a credential file made for one publish in
//! `.teneral/auth/` (0600, removed when the publish ends), read by a
//! credential helper that is a line of shell naming only that file's path.
//! So the token is in no argument, no environment and no git configuration,
//! and every other helper (a user's credential store) is switched off, so
//! git never hands it on.
//!
//! The one place the offer crate starts programs.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::key::AUTH_DIR;
use crate::token::Token;

/// The user name sent with the token (GitHub takes any; this is its custom).
pub const USER: &str = "x-access-token";

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot make the credential file {path} for this publish: {source}")]
    Credential { path: PathBuf, source: io::Error },
    #[error("cannot start git: {0}; install git")]
    Start(io::Error),
    #[error("git {what} failed: {stderr}")]
    Failed { what: String, stderr: String },
}

/// A credential file for one publish, removed when dropped.
pub struct Credential {
    path: PathBuf,
}

impl Credential {
    pub fn make(home: &Path, token: &Token) -> Result<Credential, GitError> {
        let mut random = [0u8; 8];
        let _ = getrandom::fill(&mut random);
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = home.join(AUTH_DIR).join(format!(".push-{}-{suffix}", std::process::id()));
        let err = |source| GitError::Credential { path: path.clone(), source };
        let mut f =
            OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(err)?;
        let text = format!("username={USER}\npassword={}\n", token.expose());
        f.write_all(text.as_bytes()).map_err(err)?;
        Ok(Credential { path })
    }

    /// The helper git runs: it answers `get` with the file, and ignores
    /// `store` and `erase`.
    fn helper(&self) -> String {
        let quoted = self.path.to_string_lossy().replace('\'', "'\\''");
        format!("!f() {{ test \"$1\" = get && cat '{quoted}'; }}; f")
    }
}

impl Drop for Credential {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Runs git in `dir` with only `credential` as its credential helper, no
/// prompt, no hooks; its standard output.
pub fn run(dir: &Path, credential: &Credential, args: &[&str]) -> Result<String, GitError> {
    let out = Command::new("git")
        .arg("-c")
        .arg("credential.helper=")
        .arg("-c")
        .arg(format!("credential.helper={}", credential.helper()))
        .args(["-c", "core.hooksPath=/dev/null", "-c", "core.askPass="])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::null())
        .output()
        .map_err(GitError::Start)?;
    if !out.status.success() {
        let what = args.first().copied().unwrap_or("").to_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(GitError::Failed { what, stderr });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The commit each of `refs` points at on the remote `url` (`None`: no such ref).
pub fn remote_refs(
    dir: &Path,
    credential: &Credential,
    url: &str,
    refs: &[&str],
) -> Result<Vec<Option<String>>, GitError> {
    let mut args = vec!["ls-remote", url];
    args.extend(refs);
    let out = run(dir, credential, &args)?;
    Ok(refs
        .iter()
        .map(|r| {
            out.lines().find_map(|l| {
                let (commit, name) = l.split_once('\t')?;
                (name == *r).then(|| commit.to_owned())
            })
        })
        .collect())
}

/// `git --version`, for a witness report's toolchain line.
pub fn version() -> String {
    Command::new("git")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|e| format!("git (its version unknown: {e})"))
}
