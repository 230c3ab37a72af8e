//! The individual's key: an ed25519 SSH key, made the first time it is
//! needed and never replaced, in `.teneral/auth/offer-key` (0600, OpenSSH
//! format, so `git -c gpg.format=ssh -c user.signingkey=<it>` signs with
//! it) beside its public half `offer-key.pub`.
//!
//! It appears only whole: written under a temporary name opened with
//! `O_EXCL` at mode 0600, synced, then hard-linked to its name (which fails
//! when a key is already there, so a race between two first uses keeps the
//! first), the directory synced. Reading it follows no link and refuses a
//! file that has another name (a hard link) or that others may read.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ssh_key::private::{Ed25519Keypair, KeypairData};
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey};

use teneral_core::fsutil::{open_beneath, sync_dir, write_atomic};

/// Where the owner's credentials live; no body can read it.
pub const AUTH_DIR: &str = ".teneral/auth";
/// The key's file name in [`AUTH_DIR`].
pub const KEY_NAME: &str = "offer-key";
/// The comment the key carries, and the principal of its allowed-signers line.
pub const PRINCIPAL: &str = "teneral-individual";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "cannot {what} {path}: {source}; the directory must be the individual's, writable by you"
    )]
    Io { what: &'static str, path: PathBuf, source: io::Error },
    #[error("{path} is not a plain file of its own ({why}); move it away and look at what made it: the key is never taken through a link")]
    Linked { path: PathBuf, why: String },
    #[error("{path} may be read by others (mode {mode:o}); run chmod 600 {path}")]
    Open { path: PathBuf, mode: u32 },
    #[error("{path} is no ed25519 OpenSSH private key ({why}); it is never replaced by itself: move it away to make a new one, and the old public half stops verifying")]
    Bad { path: PathBuf, why: String },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> KeyError + 'a {
    move |source| KeyError::Io { what, path: path.to_owned(), source }
}

pub fn key_path(home: &Path) -> PathBuf {
    home.join(AUTH_DIR).join(KEY_NAME)
}

/// The individual's key, made now when there is none.
pub fn ensure(home: &Path) -> Result<PrivateKey, KeyError> {
    match load(home)? {
        Some(key) => Ok(key),
        None => {
            make(home)?;
            load(home)?.ok_or_else(|| KeyError::Bad {
                path: key_path(home),
                why: "it vanished right after it was made".into(),
            })
        }
    }
}

/// The individual's key, or `None` when it was never made.
pub fn load(home: &Path) -> Result<Option<PrivateKey>, KeyError> {
    let path = key_path(home);
    let dir = home.join(AUTH_DIR);
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(KeyError::Linked { path: dir, why: "a symbolic link".into() });
    }
    let file = match open_beneath(&dir, Path::new(KEY_NAME)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if is_link_refusal(&e) => {
            return Err(KeyError::Linked { path, why: e.to_string() });
        }
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    let meta = file.metadata().map_err(io_err("read", &path))?;
    if meta.nlink() != 1 {
        return Err(KeyError::Linked { path, why: format!("{} names", meta.nlink()) });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(KeyError::Open { path, mode: meta.mode() & 0o777 });
    }
    let mut text = Vec::new();
    file.take(64 * 1024).read_to_end(&mut text).map_err(io_err("read", &path))?;
    let key = PrivateKey::from_openssh(&text)
        .map_err(|e| KeyError::Bad { path: path.clone(), why: e.to_string() })?;
    if key.algorithm() != ssh_key::Algorithm::Ed25519 || key.is_encrypted() {
        return Err(KeyError::Bad { path, why: format!("a {} key", key.algorithm()) });
    }
    Ok(Some(key))
}

/// The errors of [`open_beneath`] that say a link was met or the name is no file.
fn is_link_refusal(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
        || e.kind() == io::ErrorKind::InvalidInput
}

fn make(home: &Path) -> Result<(), KeyError> {
    let dir = home.join(AUTH_DIR);
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(io_err("make", &dir))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| io_err("make a key for", &dir)(io::Error::other(e.to_string())))?;
    let pair = KeypairData::Ed25519(Ed25519Keypair::from_seed(&seed));
    seed.fill(0);
    let bad = |e: ssh_key::Error| KeyError::Bad { path: key_path(home), why: e.to_string() };
    let key = PrivateKey::new(pair, PRINCIPAL).map_err(bad)?;
    let text = key.to_openssh(LineEnding::LF).map_err(bad)?;
    let public = key.public_key().to_openssh().map_err(bad)?;
    let path = key_path(home);
    let tmp = dir.join(format!(".{KEY_NAME}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        match fs::hard_link(&tmp, &path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    })();
    let _ = fs::remove_file(&tmp);
    written.map_err(io_err("write", &path))?;
    let pub_path = dir.join(format!("{KEY_NAME}.pub"));
    write_atomic(&pub_path, format!("{public}\n").as_bytes())
        .map_err(io_err("write", &pub_path))?;
    sync_dir(&dir).map_err(io_err("sync", &dir))
}

/// The public half as one OpenSSH line.
pub fn public_line(key: &PublicKey) -> String {
    key.to_openssh().unwrap_or_default()
}

/// The key's SHA-256 fingerprint, as `ssh-keygen -l` prints it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The line of an allowed-signers file that accepts this key's signatures
/// on commits (`gpg.ssh.allowedSignersFile`).
pub fn allowed_signers_line(key: &PublicKey) -> String {
    let mut bare = key.clone();
    bare.set_comment("");
    format!("{PRINCIPAL} namespaces=\"git\" {}", public_line(&bare).trim_end())
}

/// What `teneralctl offer key` prints.
pub fn explain(home: &Path, key: &PublicKey) -> String {
    let path = key_path(home);
    format!(
        "{public}\nfingerprint {fp}\n\nThis is the individual's key: commits it offers to the species are signed with it.\n\
         The private half stays in {path}. To check a signature, put this line in an allowed-signers file:\n\n  \
         {line}\n\nthen: git -c gpg.ssh.allowedSignersFile=<that file> verify-commit <commit>\n\
         To sign by hand: git -c gpg.format=ssh -c user.signingkey={path} commit -S\n",
        public = public_line(key).trim_end(),
        fp = fingerprint(key),
        path = path.display(),
        line = allowed_signers_line(key),
    )
}
