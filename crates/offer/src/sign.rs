//! Signing an offer's commits with the individual's key, as git signs with
//! SSH keys: each commit since the species' head is made again, the same
//! tree, author, committer and message, with a `gpgsig` header holding an
//! SSH signature (namespace `git`, SHA-512) of exactly the commit's text;
//! each one's parent is the one signed before it. `offer/<name>` is then
//! set to the signed head. Ids change, contents do not.

use std::collections::HashMap;
use std::path::Path;

use git2::{Oid, Repository, Sort};
use ssh_key::{HashAlg, LineEnding, PrivateKey};
use teneral_core::commit::Commit;

use crate::verdict::NAMESPACE;

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{0:?} is no offer name: use letters, digits, '-', '_' or '.'")]
    Name(String),
    #[error("cannot sign the offer: {0}")]
    Git(#[from] git2::Error),
    #[error("cannot sign with the individual's key: {0}")]
    Key(#[from] ssh_key::Error),
}

/// Whether `name` may be an offer's name (`offer/<name>`, `contrib/<id>/<name>`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && !name.contains("..")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Signs every commit from `head` back to (not including) its merge base
/// with `base`, points `offer/<name>` at the signed head and returns it.
pub fn sign(
    dir: &Path,
    head: &Commit,
    base: &str,
    name: &str,
    key: &PrivateKey,
) -> Result<Commit, SignError> {
    if !valid_name(name) {
        return Err(SignError::Name(name.to_owned()));
    }
    let repo = Repository::open(dir)?;
    let head = Oid::from_str(head.as_str())?;
    let base = repo.revparse_single(base)?.peel_to_commit()?.id();
    let fork = repo.merge_base(head, base)?;
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.push(head)?;
    walk.hide(fork)?;
    let mut made: HashMap<Oid, Oid> = HashMap::new();
    let mut last = fork;
    for oid in walk {
        let oid = oid?;
        let old = repo.find_commit(oid)?;
        let parents = old
            .parent_ids()
            .map(|p| repo.find_commit(*made.get(&p).unwrap_or(&p)))
            .collect::<Result<Vec<_>, _>>()?;
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let message = String::from_utf8_lossy(old.message_raw_bytes()).into_owned();
        let text = repo.commit_create_buffer(
            &old.author(),
            &old.committer(),
            &message,
            &old.tree()?,
            &parents,
        )?;
        let signature = key.sign(NAMESPACE, HashAlg::Sha512, &text)?.to_pem(LineEnding::LF)?;
        let text = String::from_utf8_lossy(&text).into_owned();
        let new = repo.commit_signed(&text, &signature, None)?;
        made.insert(oid, new);
        last = new;
    }
    repo.reference(&format!("refs/heads/offer/{name}"), last, true, "teneral: offer signed")?;
    Ok(Commit::from_raw(last.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["fast", "faster-search", "v1.2_x"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "a..b", "a b", "ä", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn every_commit_since_the_species_is_signed_and_verifies() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let repo = Repository::init(dir.path()).expect("a repository");
        let sig = git2::Signature::now("Agent", "agent@localhost").expect("a signature");
        let commit = |parent: Option<Oid>, file: &str, message: &str| {
            std::fs::write(dir.path().join(file), message).expect("written");
            let mut index = repo.index().expect("the index");
            index.add_path(Path::new(file)).expect("added");
            let tree = repo.find_tree(index.write_tree().expect("a tree")).expect("the tree");
            let parents: Vec<git2::Commit<'_>> =
                parent.map(|p| repo.find_commit(p).expect("the parent")).into_iter().collect();
            let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
            repo.commit(None, &sig, &sig, message, &tree, &parents).expect("a commit")
        };
        let species = commit(None, "a", "The species\n");
        repo.reference("refs/heads/main", species, true, "main").expect("main");
        let one = commit(Some(species), "b", "One\n");
        let two = commit(Some(one), "c", "Two\n");
        let pair = ssh_key::private::Ed25519Keypair::from_seed(&[7; 32]);
        let key =
            PrivateKey::new(ssh_key::private::KeypairData::Ed25519(pair), "test").expect("a key");
        let head = Commit::from_raw(two.as_bytes());
        let signed = sign(dir.path(), &head, "main", "fast", &key).expect("signed");
        let offer = crate::read::read(dir.path(), "offer/fast", "main").expect("read back");
        assert_eq!(offer.head, signed);
        assert_eq!(offer.commits.len(), 2);
        for s in &offer.signatures {
            let found = s.as_ref().map(|(sig, data)| (sig.as_slice(), data.as_slice()));
            assert_eq!(crate::verdict::signature(key.public_key(), found), Ok(()));
        }
        assert_eq!(offer.commits[1].message, "Two\n");
        assert!(sign(dir.path(), &head, "main", "../x", &key).is_err());
    }
}
