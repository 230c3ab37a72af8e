//! Publishing a checked, approved offer: its commit pushed to
//! `contrib/<individual id>/<name>` on the species' repository and a pull
//! request opened against the species' branch, the agent's text from the
//! last commit message with the kernel's block under it.
//!
//! Steps, each safe to run again:
//! 1. the decision ([`crate::approve::decide`]) on the kept report;
//! 2. `ls-remote` of the species' branch and of the contrib branch: when
//!    the contrib branch already holds the commit (an earlier run pushed
//!    it), nothing is pushed again; else, when the species moved on since
//!    the check, nothing is pushed and the agent is told to rebase;
//! 3. the push (`git push <url> <commit>:refs/heads/contrib/...`);
//! 4. the pull request (the open one when the forge says it exists);
//! 5. the approval used up and the outcome kept in
//!    `.teneral/offers/<commit>.published.json`.
//!
//! A failure after the push leaves the branch and the approval in place.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use ssh_key::PublicKey;
use teneral_core::commit::Commit;
use teneral_core::owner;

use crate::approve::{self, Refused};
use crate::forge::{self, Forge, ForgeError, Pull};
use crate::git::{self, Credential, GitError};
use crate::token::{self, TokenError};
use crate::{key, OFFERS_DIR};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("the species moved on since the check ({branch} is at {now}, the check was against {checked}): nothing was pushed; rebase the offer onto the species' head, check it again and publish that")]
    Rebase { branch: String, checked: String, now: String },
    #[error("the report on {0} names no offer/<name> branch; check the offer again")]
    NoBranch(String),
    #[error("cannot keep the outcome in {path}: {source}")]
    Keep { path: PathBuf, source: std::io::Error },
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub commit: Commit,
    /// `contrib/<individual id>/<name>`.
    pub branch: String,
    pub pull: Pull,
    /// Whether this run pushed (false: an earlier run had).
    pub pushed: bool,
}

/// The individual's id: the first 16 hex digits of the SHA-256 of its
/// key's public half, so it is stable as long as the key (never replaced).
pub fn individual_id(key: &PublicKey) -> String {
    let blob = key.to_bytes().unwrap_or_default();
    Sha256::digest(&blob).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Where the outcome of publishing `commit` is kept.
pub fn record_path(home: &Path, commit: &Commit) -> PathBuf {
    home.join(OFFERS_DIR).join(format!("{}.published.json", commit.as_str()))
}

/// The kept outcome of publishing `commit`, if it was published.
pub fn published(home: &Path, commit: &Commit) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(record_path(home, commit)).ok()?).ok()
}

/// The pull request's text: the agent's (the last message after its
/// title), then the kernel's block.
pub fn pull_text(message: &str, report: &Value, id: &str) -> (String, String) {
    let mut lines = message.lines();
    let title = lines.next().unwrap_or("").trim().to_owned();
    let agent = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
    let count = report["commits"].as_array().map_or(0, Vec::len);
    let outside = report["outside"].as_array().map_or(0, Vec::len);
    let block = format!(
        "---\n\n**Offered by teneral individual `{id}`** (teneral {version})\n\n\
         - commit: `{commit}`\n\
         - signed with: `{key}` (SSH, namespace `git`)\n\
         - checked by its install: descends from the species' head `{base}`; \
           {count} commit(s), every one signed by that key; the last message complete; \
           the scan of every path, added line and message found nothing; \
           {outside} path(s) outside body/ and BACKLOG.md\n\
         {gates}",
        gates = crate::gates::block_line(&report["gates"]),
        version = env!("CARGO_PKG_VERSION"),
        commit = report["commit"].as_str().unwrap_or(""),
        key = report["key"].as_str().unwrap_or(""),
        base = report["base"].as_str().unwrap_or(""),
    );
    (title, format!("{agent}\n\n{block}"))
}

fn last_message(home: &Path, commit: &Commit) -> String {
    git2::Repository::open(home)
        .and_then(|r| {
            let oid = git2::Oid::from_str(commit.as_str())?;
            Ok(String::from_utf8_lossy(r.find_commit(oid)?.message_bytes()).into_owned())
        })
        .unwrap_or_default()
}

/// Publishes `commit` of the individual at `home`.
pub fn publish(home: &Path, commit: &Commit) -> Result<Published, PublishError> {
    let mode = approve::mode(home)?;
    let report = approve::kept_report(home, commit);
    let passed = report.as_ref().is_some_and(|r| r["passed"] == true);
    approve::decide(mode, commit, passed, owner::is_approved(home, commit))?;
    let report = report.unwrap_or_default();
    let name = report["branch"]
        .as_str()
        .and_then(|b| b.strip_prefix("offer/"))
        .ok_or_else(|| PublishError::NoBranch(commit.short().to_owned()))?
        .to_owned();
    let key = key::ensure(home)?;
    let id = individual_id(key.public_key());
    let branch = format!("contrib/{id}/{name}");
    let species = forge::species(home)?;
    let token = token::load(home)?;
    let credential = Credential::make(home, &token)?;
    let species_ref = format!("refs/heads/{}", species.branch);
    let contrib_ref = format!("refs/heads/{branch}");
    let found = git::remote_refs(
        home,
        &credential,
        &species.url,
        &[species_ref.as_str(), contrib_ref.as_str()],
    )?;
    let (species_now, contrib_now) = (found[0].clone(), found[1].clone());
    let pushed = contrib_now.as_deref() != Some(commit.as_str());
    if pushed {
        let checked = report["base"].as_str().unwrap_or("");
        let now = species_now.unwrap_or_default();
        if now != checked {
            return Err(PublishError::Rebase {
                branch: species.branch.clone(),
                checked: teneral_core::commit::short(checked).to_owned(),
                now: teneral_core::commit::short(&now).to_owned(),
            });
        }
        let refspec = format!("+{}:{contrib_ref}", commit.as_str());
        git::run(home, &credential, &["push", "--no-verify", &species.url, &refspec])?;
    }
    drop(credential);
    let forge = Forge::new(&species, &token)?;
    let (title, text) = pull_text(&last_message(home, commit), &report, &id);
    let pull = forge.open_pull(&branch, &title, &text)?;
    let record = json!({"commit": commit.as_str(), "branch": branch, "pull": pull.url, "number": pull.number});
    let path = record_path(home, commit);
    teneral_core::fsutil::write_atomic(&path, format!("{record:#}\n").as_bytes())
        .map_err(|source| PublishError::Keep { path: path.clone(), source })?;
    owner::use_approval(home, commit).map_err(|source| PublishError::Keep { path, source })?;
    Ok(Published { commit: commit.clone(), branch, pull, pushed })
}

/// The `offer.published` event's fields.
pub fn event(p: &Published) -> Value {
    json!({"offer": p.commit.as_str(), "branch": p.branch, "pull": p.pull.url, "number": p.pull.number})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_text_then_the_kernels_block() {
        let report = json!({"commit": "c".repeat(40), "key": "SHA256:abc", "base": "b".repeat(40),
            "commits": [{}, {}], "outside": []});
        let (title, text) =
            pull_text("Faster search\n\nWhat it changes: x\nWhy: y\n", &report, "0123abcd");
        assert_eq!(title, "Faster search");
        assert!(text.starts_with("What it changes: x\nWhy: y\n\n---"), "{text}");
        for want in ["`0123abcd`", &"c".repeat(40), "SHA256:abc", "2 commit(s)", "not checked"] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }
}
