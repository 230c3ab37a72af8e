//! Where a generation's event socket lives, and how it is bound.
//!
//! Sockets live in `/tmp/teneral-<uid>/<home id>/` (a private directory of
//! the kernel's user, one per individual), or under `TENERAL_SOCKET_DIR`
//! when a gate's check gives a kernel under test a place of its own. See
//! docs/design.md, "Event sockets live outside the individual".

use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use teneral_core::commit::Commit;

/// The variable that gives a kernel the directory for its event sockets.
pub const SOCKET_DIR_VAR: &str = "TENERAL_SOCKET_DIR";

/// Longest path a Unix socket may be bound at (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A place for the event socket of one run of the individual at `home`: a
/// private directory of the kernel's user, `/tmp/teneral-<uid>/<home id>/`
/// (mode 0700), and a name no other run shares. Not inside the individual:
/// a Unix socket's path has at most 107 bytes, and an individual (or a gate
/// checkout's temporary individuals) may lie deeper than that allows. Not
/// under `$XDG_RUNTIME_DIR` either: the cage hides it from bodies. One
/// directory per individual, so that the cage can one day grant a body
/// `connect` there and nowhere else.
pub fn socket_path(home: &Path, commit: &Commit, run: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = sockets_dir(home)?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
    let tag: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let short = commit.short();
    Ok(dir.join(format!("ev-{short}-{run}-{tag}.sock")))
}

/// Removes the event sockets a kernel of the individual at `home` left
/// behind (killed before it could remove them), hidden ones included; call
/// holding the individual's lock, before the first run. Returns how many.
pub fn sweep_stale(home: &Path) -> std::io::Result<usize> {
    let dir = sockets_dir(home)?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let bare = name.strip_prefix('.').unwrap_or(&name);
        if bare.starts_with("ev-") && bare.ends_with(".sock") {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The directory of the individual's event sockets (see [`socket_path`]):
/// the one `TENERAL_SOCKET_DIR` gives, or the kernel user's own under /tmp.
pub fn sockets_dir(home: &Path) -> std::io::Result<PathBuf> {
    // A kernel under test in a gate's check is given a short name that leads
    // into the check's own cache (see `gate::socket_dir`): /tmp is not the
    // check's to write.
    let dir = match std::env::var_os(SOCKET_DIR_VAR).filter(|d| !d.is_empty()) {
        Some(given) => PathBuf::from(given).join(home_id(home)),
        None => {
            let uid = rustix::process::getuid().as_raw();
            let base = PathBuf::from(format!("/tmp/teneral-{uid}"));
            private_dir(&base, uid)?;
            base.join(home_id(home))
        }
    };
    Ok(dir)
}

/// Makes `dir` if missing and checks it is a directory of `uid` that no one
/// else may enter: the sockets in it are a body's channel to the journal.
fn private_dir(dir: &Path, uid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory of this user; remove it and start again",
            dir.display()
        )));
    }
    Ok(())
}

/// Twelve hex digits naming the individual at `home` (a hash of its path).
pub fn home_id(home: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(home.as_os_str().as_encoded_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Binds a fresh socket for one run at `path`, replacing a stale one. The
/// socket is bound under a hidden name and renamed into place, so `path`
/// appears only once it accepts connections.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let hidden = path.with_file_name(format!(".{name}"));
    if hidden.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(std::io::Error::other(format!(
            "the event socket path {} is longer than a Unix socket allows ({MAX_SOCKET_PATH} \
             bytes); event sockets live in /tmp/teneral-<uid>/<home id>/, or under \
             {SOCKET_DIR_VAR} when it is set: give {SOCKET_DIR_VAR} a shorter directory",
            path.display()
        )));
    }
    let _ = std::fs::remove_file(&hidden);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(&hidden)?;
    std::fs::rename(&hidden, path)?;
    teneral_core::crash::point("socket.bound");
    Ok(listener)
}
