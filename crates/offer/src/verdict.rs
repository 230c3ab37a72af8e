//! The pure parts of a check besides the scan: a commit's signature by the
//! individual's key, and the completeness of the offer's last message.

use ssh_key::{HashAlg, PublicKey, SshSig};

/// The namespace git signs commits under.
pub const NAMESPACE: &str = "git";

/// The lines the last message must hold, each with some text.
pub const SECTIONS: [&str; 4] = ["What it changes:", "Why:", "Evidence:", "Not verified:"];

/// Checks that `signature` (an armoured SSH signature, from the commit's
/// `gpgsig` header) over `signed` is by `key` under namespace `git`: what
/// `git verify-commit` accepts with an allowed-signers file naming `key`.
pub fn signature(key: &PublicKey, found: Option<(&[u8], &[u8])>) -> Result<(), String> {
    let Some((signature, signed)) = found else {
        return Err("not signed; sign it with the individual's key (see teneralctl offer key) and check again".into());
    };
    let sig = SshSig::from_pem(signature).map_err(|e| {
        let pgp = signature.starts_with(b"-----BEGIN PGP");
        let kind = if pgp { "an OpenPGP signature" } else { "no SSH signature" };
        format!("its signature is {kind} ({e}); sign with the individual's SSH key")
    })?;
    if sig.public_key() != key.key_data() {
        let theirs = sig.public_key().fingerprint(HashAlg::Sha256);
        return Err(format!(
            "signed by another key ({theirs}), not the individual's ({}); sign it again with the individual's key",
            key.fingerprint(HashAlg::Sha256)
        ));
    }
    if sig.namespace() != NAMESPACE {
        return Err(format!("signed for namespace {:?}, not {NAMESPACE:?}", sig.namespace()));
    }
    key.verify(NAMESPACE, signed, &sig).map_err(|e| {
        format!("its signature does not verify ({e}): the commit changed after it was signed")
    })
}

/// Checks that `signature` over `signed` is a valid SSH signature under
/// namespace `git` by whatever key it names (a witness knows nobody's key);
/// that key's fingerprint.
pub fn any_signature(found: Option<(&[u8], &[u8])>) -> Result<String, String> {
    let Some((armoured, _)) = found else { return Err("not signed".into()) };
    let sig = SshSig::from_pem(armoured).map_err(|e| format!("no SSH signature ({e})"))?;
    let key = PublicKey::from(sig.public_key().clone());
    signature(&key, found).map(|()| key.fingerprint(HashAlg::Sha256).to_string())
}

/// What the last message lacks: a title, or a section with its text.
pub fn message(text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let mut lines = text.lines();
    let title = lines.next().unwrap_or("").trim();
    if title.is_empty() || SECTIONS.iter().any(|s| title.starts_with(s)) {
        missing.push("a title on its first line".to_owned());
    }
    for section in SECTIONS {
        let Some(at) = text.lines().position(|l| l.trim_start().starts_with(section)) else {
            missing.push(format!("a line starting {section:?}"));
            continue;
        };
        let mut body = text.lines().skip(at);
        let first = body.next().unwrap_or("").trim_start()[section.len()..].trim().to_owned();
        let rest: String = body
            .take_while(|l| !SECTIONS.iter().any(|s| l.trim_start().starts_with(s)))
            .collect::<Vec<_>>()
            .join(" ");
        if first.is_empty() && rest.trim().is_empty() {
            missing.push(format!("some text after {section:?}"));
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_message_lacks_nothing() {
        let text = "Faster search\n\nWhat it changes: the index\nWhy: slow\nEvidence:\n  3x in bench\nNot verified: ARM\n";
        assert_eq!(message(text), Vec::<String>::new());
    }

    #[test]
    fn what_a_message_lacks_is_named() {
        let cases: &[(&str, &str)] = &[
            ("", "a title on its first line"),
            ("Why: x\nWhat it changes: y\nEvidence: z\nNot verified: w", "a title"),
            ("T\nWhat it changes: y\nEvidence: z\nNot verified: w", "\"Why:\""),
            (
                "T\nWhat it changes: y\nWhy:\nEvidence: z\nNot verified: w",
                "some text after \"Why:\"",
            ),
            ("T\nWhat it changes: y\nWhy: x\nEvidence: z\n", "\"Not verified:\""),
        ];
        for (text, lack) in cases {
            let missing = message(text);
            assert!(missing.iter().any(|m| m.contains(lack)), "{text:?}: {missing:?}");
        }
    }
}
