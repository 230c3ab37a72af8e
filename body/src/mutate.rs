//! Asking the kernel for a new generation (contract, sections 3 and 5).
//!
//! The agent edits its workspace, `.teneral/candidate` (its own clone, on
//! `lineage/local`), and calls the `mutate` tool. [`commit`] commits
//! everything there with the `git` command; the tool then sends
//! `mutation.requested` naming that commit, and the body exits with status
//! [`EXIT`] once the turn has ended, so the kernel can check the commit.
//! A workspace with nothing to commit is refused, so an unchanged tree is
//! never offered again (the kernel stops after the same commit is refused
//! three times in a row).

use std::path::Path;
use std::process::{Command, Stdio};

/// The workspace, relative to the individual's directory.
pub const CANDIDATE: &str = ".teneral/candidate";
/// The exit status that tells the kernel a mutation waits to be checked.
pub const EXIT: i32 = 75;

/// Commits everything in the workspace under `home` with `message`; the new
/// commit's 40 hex digits, or why there is none, in words for the model.
pub fn commit(home: &Path, message: &str) -> Result<String, String> {
    let dir = home.join(CANDIDATE);
    if message.trim().is_empty() {
        return Err("the commit message is empty; say in it what the change does".into());
    }
    if !dir.join(".git").exists() {
        return Err(format!(
            "{CANDIDATE} is not a git clone; the kernel makes it at start, so restarting \
             the agent mends it"
        ));
    }
    git(&dir, &["add", "-A"])?;
    if git(&dir, &["diff", "--cached", "--quiet"]).is_ok() {
        return Err(format!(
            "nothing to commit: {CANDIDATE} holds no change since its last commit. Edit your \
             body there first ({CANDIDATE}/body), then call mutate again"
        ));
    }
    git(
        &dir,
        &[
            "-c",
            "user.name=teneral agent",
            "-c",
            "user.email=agent@teneral.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "--quiet",
            "-m",
            message,
        ],
    )?;
    let head = git(&dir, &["rev-parse", "--verify", "HEAD^{commit}"])?;
    let head = head.trim();
    if head.len() != 40 || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("git rev-parse gave {head:?}, not a commit id"));
    }
    Ok(head.to_owned())
}

/// The last commit of the workspace, its 40 hex digits.
pub fn head(home: &Path) -> Result<String, String> {
    let head = git(&home.join(CANDIDATE), &["rev-parse", "--verify", "HEAD^{commit}"])?;
    Ok(head.trim().to_owned())
}

/// Runs `git -C dir args`; its stdout, or what it said when it failed.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said.trim();
    let said = if said.is_empty() { String::from_utf8_lossy(&output.stdout) } else { said.into() };
    Err(format!("git {} failed ({}): {}", args.join(" "), output.status, said.trim()))
}
