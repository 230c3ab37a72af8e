//! The maintainer's signature: the install's `SIGNERS` file (git's
//! allowed-signers format for SSH signatures) and the check of a species
//! commit's signature against it, in-process.
//!
//! A line is `principals [options] keytype base64-key [comment]`; `#`
//! starts a comment. Of the options, `namespaces="..."` is honoured (it must
//! allow `git`) and `cert-authority` is refused (certificates are not taken
//! here); others are ignored. A file without key lines asks for no
//! signature. The signature is the commit's `gpgsig` header, extracted by
//! git2 with the data it signs, and verified with the `ssh-key` crate's
//! `sshsig` support under namespace `git`: exactly what `git verify-commit`
//! with `gpg.ssh.allowedSignersFile` accepts for these key types.

use std::path::Path;

use git2::{Oid, Repository};
use ssh_key::{HashAlg, PublicKey, SshSig};

/// The install's file of allowed signers, beside its units and scripts.
pub const SIGNERS_FILE: &str = "SIGNERS";

/// The namespace git signs commits under.
const NAMESPACE: &str = "git";

/// One key allowed to sign species commits.
#[derive(Debug, Clone)]
pub struct Signer {
    pub principals: String,
    pub key: PublicKey,
}

/// A line of the file that cannot be read as a signer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}: {why}; write it as `<e-mail> <key type> <key>` (see the comment at the top of the file)")]
pub struct BadLine {
    pub file: String,
    pub line: usize,
    pub why: String,
}

fn is_key_type(word: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"].iter().any(|p| word.starts_with(p))
}

/// The signers of an allowed-signers text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<Vec<Signer>, BadLine> {
    let mut signers = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| BadLine { file: file.to_owned(), line: n + 1, why };
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().skip(1).position(|w| is_key_type(w)).map(|i| i + 1) else {
            return Err(bad("no key type (ssh-ed25519 ...) after the principals".into()));
        };
        let options = words[1..at].join(" ");
        if options.split(',').any(|o| o.trim().eq_ignore_ascii_case("cert-authority")) {
            return Err(bad(
                "cert-authority keys are not taken; list the signing key itself".into()
            ));
        }
        if let Some(spaces) = namespaces(&options) {
            if !spaces.iter().any(|s| s == NAMESPACE) {
                continue;
            }
        }
        let Some(base64) = words.get(at + 1) else {
            return Err(bad("the key is missing after its type".into()));
        };
        let key = PublicKey::from_openssh(&format!("{} {base64}", words[at]))
            .map_err(|e| bad(format!("the key cannot be read: {e}")))?;
        signers.push(Signer { principals: words[0].to_owned(), key });
    }
    Ok(signers)
}

/// The namespaces a `namespaces="a,b"` option allows, if it is there.
fn namespaces(options: &str) -> Option<Vec<String>> {
    let start = options.find("namespaces=\"")? + "namespaces=\"".len();
    let rest = &options[start..];
    let end = rest.find('"')?;
    Some(rest[..end].split(',').map(|s| s.trim().to_owned()).collect())
}

/// Reads the install's `SIGNERS` at `path`; no file asks for no signature.
pub fn load(path: &Path) -> Result<Vec<Signer>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &path.display().to_string()).map_err(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read {}: {e}; make it readable", path.display())),
    }
}

/// Checks that `signature` (an armoured SSH signature) over `signed` is by
/// one of `signers` under namespace `git`; the signer's principals, or why not.
pub fn verify(signers: &[Signer], signature: &[u8], signed: &[u8]) -> Result<String, String> {
    let sig = SshSig::from_pem(signature).map_err(|e| {
        let pgp = signature.starts_with(b"-----BEGIN PGP");
        let kind = if pgp { "an OpenPGP signature" } else { "no SSH signature" };
        format!("its signature is {kind} ({e}); species commits are signed with SSH keys")
    })?;
    let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256);
    let Some(signer) = signers.iter().find(|s| s.key.key_data() == sig.public_key()) else {
        return Err(format!("it is signed by a key SIGNERS does not list ({fingerprint})"));
    };
    if sig.namespace() != NAMESPACE {
        return Err(format!(
            "its signature is for namespace {:?}, not {NAMESPACE:?}",
            sig.namespace()
        ));
    }
    signer.key.verify(NAMESPACE, signed, &sig).map(|()| signer.principals.clone()).map_err(|e| {
        format!("its signature by {} ({fingerprint}) does not verify: {e}", signer.principals)
    })
}

/// Checks the signature of `commit` in `repo` against `signers`.
pub fn check_commit(repo: &Repository, commit: Oid, signers: &[Signer]) -> Result<String, String> {
    let (signature, signed) =
        repo.extract_signature(&commit, None).map_err(|_| "it is not signed".to_owned())?;
    verify(signers, &signature, &signed)
}
