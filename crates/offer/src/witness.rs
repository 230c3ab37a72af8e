//! Witnessing somebody else's offer: fetch an open pull request's head and
//! the branch it is against, run the same check on it (signed by any key:
//! whose, nothing here knows), and post the result as a comment: pass or
//! fail for each check, the toolchain and platform it ran on, and an SSH
//! signature of exactly that text by the individual's key (namespace
//! `teneral-witness`). What the check found in detail stays here, in
//! `.teneral/offers/witness-<number>-<commit>.json`.
//!
//! Under `TENERAL_PUBLISH=ask` the owner approves the pull request's head
//! commit first (`teneralctl offer approve`, which takes the head of a
//! fetched pull request); the approval is used up by the report it allowed.
//!
//! When those checks pass, the mutation gate's checks run on the head in
//! the cage, and after them the owner's `--also '<command>'` in the same
//! cage on the same tree (both by the kernel: `teneral offer-gates`, which
//! the caller runs through [`RunGates`]); each is a line of the report, the
//! command's output kept here with the rest.

use std::path::Path;

use serde_json::json;
use ssh_key::{HashAlg, LineEnding};
use teneral_core::commit::Commit;
use teneral_core::owner;

use crate::approve::{self, Refused};
use crate::forge::{self, Forge, ForgeError};
use crate::gates::{Also, Gates};
use crate::git::{self, Credential, GitError};
use crate::scan::Scanner;
use crate::{key, read, secrets, token, verdict, OFFERS_DIR};

/// The namespace of a witness report's signature.
pub const NAMESPACE: &str = "teneral-witness";

/// Where a fetched pull request's head is kept: `refs/witness/<number>`.
pub fn witness_ref(number: u64) -> String {
    format!("refs/witness/{number}")
}

#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Token(#[from] token::TokenError),
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error(transparent)]
    Read(#[from] read::ReadError),
    #[error("pull request {0} is not open: only an open one is witnessed")]
    Closed(u64),
    #[error("cannot sign the report: {0}")]
    Sign(#[from] ssh_key::Error),
}

/// Runs the mutation gate's checks (and the owner's extra command) on a
/// commit; `Err` says why they could not run.
pub type RunGates<'a> = &'a dyn Fn(&Commit) -> Result<(Gates, Option<Also>), String>;

/// What a witness did.
pub struct Witnessed {
    pub head: Commit,
    pub passed: bool,
    /// The text posted, and its armoured signature.
    pub text: String,
    pub signature: String,
    pub comment: String,
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "pass"
    } else {
        "FAIL"
    }
}

/// Witnesses pull request `number` of the species of the individual at
/// `home`, running `gates` on its head when the offer crate's checks pass
/// (`None`: the report says they were not run).
pub fn witness(
    home: &Path,
    number: u64,
    gates: Option<RunGates<'_>>,
) -> Result<Witnessed, WitnessError> {
    let mode = approve::mode(home)?;
    if mode == approve::Mode::Off {
        return Err(Refused::Off.into());
    }
    let species = forge::species(home)?;
    let token = token::load(home)?;
    let forge = Forge::new(&species, &token)?;
    let (head, base, open) = forge.pull(number)?;
    if !open {
        return Err(WitnessError::Closed(number));
    }
    let credential = Credential::make(home, &token)?;
    let head_ref = witness_ref(number);
    let base_ref = format!("{head_ref}-base");
    let fetch =
        [format!("+refs/pull/{number}/head:{head_ref}"), format!("+refs/heads/{base}:{base_ref}")];
    git::run(home, &credential, &["fetch", "-q", &species.url, &fetch[0], &fetch[1]])?;
    drop(credential);
    let head = Commit::parse(&head).map_err(|e| ForgeError::Answer {
        what: "the pull request's head",
        status: 200,
        message: e.to_string(),
    })?;
    if mode == approve::Mode::Ask && !owner::is_approved(home, &head) {
        return Err(Refused::NotApproved(head.short().to_owned()).into());
    }
    let offer = read::read_ref(home, format!("pull/{number}"), head.as_str(), &base_ref)?;
    let secrets = secrets::collect(home, std::env::vars());
    let scan = Scanner::new(&secrets, &offer.known_top).scan(&offer.commits);
    let mut keys = std::collections::BTreeSet::new();
    let mut signed = true;
    for s in &offer.signatures {
        let found = s.as_ref().map(|(sig, data)| (sig.as_slice(), data.as_slice()));
        match verdict::any_signature(found) {
            Ok(fp) => {
                keys.insert(fp);
            }
            Err(_) => signed = false,
        }
    }
    let message = offer.commits.last().map(|c| verdict::message(&c.message)).unwrap_or_default();
    let checks = [
        (offer.descends, format!("descends from {base} at {}", offer.base.short())),
        (scan.findings.is_empty(), format!("scan: {} finding(s)", scan.findings.len())),
        (
            signed && !offer.commits.is_empty(),
            format!("every commit signed (by {})", {
                let k: Vec<&str> = keys.iter().map(String::as_str).collect();
                if k.is_empty() {
                    "no key".to_owned()
                } else {
                    k.join(", ")
                }
            }),
        ),
        (message.is_empty(), "last message complete".to_owned()),
    ];
    let mut passed = checks.iter().all(|(ok, _)| *ok);
    let uname = rustix::system::uname();
    let mut text = format!("teneral witness report on #{number} at {}\n\n", head.as_str());
    for (ok, what) in &checks {
        text.push_str(&format!("- {} {what}\n", mark(*ok)));
    }
    let ran = match gates {
        Some(run) if passed => Some(run(&head)),
        _ => None,
    };
    let (gates_kept, also_kept) = match &ran {
        Some(Ok((gates, also))) => {
            for step in &gates.steps {
                let ok = !matches!(step.result, crate::gates::Outcome::Failed);
                let how = step.result.as_str();
                text.push_str(&format!("- {} gate {} ({how})\n", mark(ok), step.name));
            }
            if let Some(also) = also {
                text.push_str(&format!("- {}\n", also.line()));
            }
            passed &= gates.passed() && also.as_ref().is_none_or(|a| a.passed);
            (Some(gates.to_json()), also.as_ref().map(Also::to_json))
        }
        Some(Err(why)) => {
            passed = false;
            text.push_str(&format!("- FAIL the mutation gates could not run: {why}\n"));
            (None, None)
        }
        None => {
            text.push_str("- not run: the mutation gates (organs, type check, tests, smoke)\n");
            (None, None)
        }
    };
    text.push('\n');
    text.push_str(&format!(
        "teneral {}; {}; {} {} {}\n",
        env!("CARGO_PKG_VERSION"),
        git::version(),
        uname.sysname().to_string_lossy(),
        uname.release().to_string_lossy(),
        uname.machine().to_string_lossy(),
    ));
    let key = key::ensure(home)?;
    let signature =
        key.sign(NAMESPACE, HashAlg::Sha512, text.as_bytes())?.to_pem(LineEnding::LF)?;
    let body = format!(
        "{text}\nSigned by `{}` (namespace `{NAMESPACE}`) over the text above, up to and \
         including its last newline:\n\n```\n{signature}```\n",
        key::fingerprint(key.public_key())
    );
    let comment = forge.comment(number, &body)?;
    let kept = json!({"number": number, "head": head.as_str(), "passed": passed, "text": text,
        "comment": comment, "findings": scan.findings.len(), "binaries": scan.binaries.len(),
        "gates": gates_kept, "also": also_kept});
    let path = home.join(OFFERS_DIR).join(format!("witness-{number}-{}.json", head.as_str()));
    let _ = std::fs::create_dir_all(home.join(OFFERS_DIR));
    let _ = teneral_core::fsutil::write_atomic(&path, format!("{kept:#}\n").as_bytes());
    let _ = owner::use_approval(home, &head);
    Ok(Witnessed { head, passed, text, signature, comment })
}
