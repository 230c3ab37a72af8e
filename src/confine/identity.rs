//! Who a root kernel's cages are on the host: each individual's own
//! unprivileged identity, taken from a sub-id range and recorded
//! machine-wide. The identity itself, and the helper's giving a tree to it,
//! are the cage's (`teneral_cage::identity`).
//!
//! Invariants:
//! - Two individuals of the machine never hold the same identity: ids are
//!   chosen under an exclusive lock on [`REGISTRY`] by a pure function of
//!   the range and the ids taken ([`choose`]), and recorded before the lock
//!   is let go; an individual keeps the identity recorded for it.
//! - The record is replaced whole (a temporary synced, then renamed), and a
//!   temporary a killed writer left is removed under the lock before the
//!   record is read.
//!
//! The reasons are in docs/cage.md, "Identities".

use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use teneral_cage::identity::Identity;

/// A range of host ids: `count` ids from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub first: u32,
    pub count: u32,
}

/// The range used when `/etc/subuid` or `/etc/subgid` has no line for
/// root: 65536 ids from 2,000,000,000, above what `useradd`, systemd's
/// dynamic users and the usual sub-id ranges hand out, and below 2^31.
pub const FALLBACK: Range = Range { first: 2_000_000_000, count: 65_536 };

/// The machine-wide record of which individual holds which identity.
pub const REGISTRY: &str = "/var/lib/teneral/identities";

/// Test knob: the name an individual's identity is recorded under
/// instead of its directory, so that test individuals sharing one build
/// cache share one identity. Empty or unset: the directory.
pub const TEST_KEY_VAR: &str = "TENERAL_TEST_IDENTITY";

/// Why an identity cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot {what} {}: {source}; the kernel keeps it as root, check that {} is a directory root may write", path.display(), Path::new(REGISTRY).parent().unwrap_or(Path::new("/")).display())]
    Io { what: &'static str, path: PathBuf, source: io::Error },
    #[error("{} line {line} is not `UID GID DIRECTORY`: {text:?}; mend or remove that line (an unread line could hand its id to a second individual)", path.display())]
    Malformed { path: PathBuf, line: usize, text: String },
    #[error("every id of the range {first} to {last} is taken by another individual; give root a larger range in /etc/subuid and /etc/subgid, or remove the lines of individuals that are gone from {registry}", last = range.first.saturating_add(range.count.saturating_sub(1)), first = range.first, registry = REGISTRY)]
    Exhausted { range: Range },
    #[error("the directory {} holds a line break; an individual's identity is recorded by its directory: rename it", .0.display())]
    Unrecordable(PathBuf),
}

/// The first line of a `/etc/subuid` or `/etc/subgid` text that gives
/// root (by name or as 0) at least one id.
pub fn parse_subid(text: &str) -> Option<Range> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).find_map(|line| {
        let mut parts = line.split(':');
        let (who, first, count) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !(who == "root" || who == "0") {
            return None;
        }
        let range = Range { first: first.parse().ok()?, count: count.parse().ok()? };
        let fits =
            range.count > 0 && range.first > 0 && range.first.checked_add(range.count).is_some();
        fits.then_some(range)
    })
}

/// The uid and gid ranges of this machine: root's lines of `/etc/subuid`
/// and `/etc/subgid` when both have one, else [`FALLBACK`] for both.
pub fn ranges() -> (Range, Range) {
    let read = |p: &str| std::fs::read_to_string(p).ok().and_then(|t| parse_subid(&t));
    match (read("/etc/subuid"), read("/etc/subgid")) {
        (Some(uids), Some(gids)) => (uids, gids),
        _ => (FALLBACK, FALLBACK),
    }
}

/// The identity a new individual gets: the lowest offset into both ranges
/// whose uid and gid no recorded individual holds. `None` when none is left.
pub fn choose(uids: Range, gids: Range, taken: &[Identity]) -> Option<Identity> {
    (0..uids.count.min(gids.count)).find_map(|i| {
        let id = Identity { uid: uids.first.checked_add(i)?, gid: gids.first.checked_add(i)? };
        let free = !taken.iter().any(|t| t.uid == id.uid || t.gid == id.gid);
        free.then_some(id)
    })
}

/// One recorded line: an identity and the individual it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: Identity,
    pub key: PathBuf,
}

/// Reads the registry's text; a line it cannot read is an error, never
/// passed over (its id could be handed out twice).
pub fn parse_registry(path: &Path, text: &str) -> Result<Vec<Entry>, IdentityError> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let malformed = || IdentityError::Malformed {
            path: path.to_owned(),
            line: n + 1,
            text: line.to_owned(),
        };
        let mut parts = line.splitn(3, ' ');
        let (uid, gid, key) = (parts.next(), parts.next(), parts.next());
        let (Some(uid), Some(gid), Some(key)) = (uid, gid, key) else { return Err(malformed()) };
        let id = Identity::from_arg(&format!("{uid}:{gid}")).ok_or_else(malformed)?;
        if key.is_empty() {
            return Err(malformed());
        }
        entries.push(Entry { id, key: PathBuf::from(key) });
    }
    Ok(entries)
}

fn registry_text(entries: &[Entry]) -> Vec<u8> {
    let mut text = Vec::new();
    for e in entries {
        text.extend_from_slice(format!("{} {} ", e.id.uid, e.id.gid).as_bytes());
        text.extend_from_slice(e.key.as_os_str().as_bytes());
        text.push(b'\n');
    }
    text
}

/// What [`Registry::identity_of`] decided, given the entries read: the
/// identity `key` keeps or gets, and whether the entries changed. Entries
/// of individuals whose directory is gone (`gone`) give their ids back.
pub fn decide(
    entries: &mut Vec<Entry>,
    key: &Path,
    uids: Range,
    gids: Range,
    gone: impl Fn(&Path) -> bool,
) -> Result<(Identity, bool), IdentityError> {
    if let Some(e) = entries.iter().find(|e| e.key == key) {
        return Ok((e.id, false));
    }
    entries.retain(|e| !gone(&e.key));
    let taken: Vec<Identity> = entries.iter().map(|e| e.id).collect();
    let id = choose(uids, gids, &taken).ok_or(IdentityError::Exhausted { range: uids })?;
    entries.push(Entry { id, key: key.to_owned() });
    Ok((id, true))
}

/// The record of identities at one path (with its lock beside it).
pub struct Registry {
    path: PathBuf,
}

impl Registry {
    /// The machine's registry, [`REGISTRY`].
    pub fn machine() -> Registry {
        Registry::at(Path::new(REGISTRY))
    }

    pub fn at(path: &Path) -> Registry {
        Registry { path: path.to_owned() }
    }

    /// The identity of the individual recorded as `key` (its directory,
    /// canonical), chosen from `uids` and `gids` and recorded if it has
    /// none yet. Read and written under an exclusive lock.
    pub fn identity_of(
        &self,
        key: &Path,
        uids: Range,
        gids: Range,
    ) -> Result<Identity, IdentityError> {
        if key.as_os_str().as_bytes().contains(&b'\n') {
            return Err(IdentityError::Unrecordable(key.to_owned()));
        }
        let io = |what: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| IdentityError::Io { what, path, source }
        };
        if let Some(dir) = self.path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io("make the directory of", &self.path))?;
        }
        let lock_path = self.path.with_extension("lock");
        let lock = open_private(&lock_path).map_err(io("open the lock", &lock_path))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io("lock", &lock_path)(e.into()))?;
        remove_stale_temporaries(&self.path)
            .map_err(io("remove the temporaries beside", &self.path))?;
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io("read", &self.path)(e)),
        };
        let mut entries = parse_registry(&self.path, &text)?;
        let gone = |key: &Path| key.is_absolute() && !key.exists();
        let (id, changed) = decide(&mut entries, key, uids, gids, gone)?;
        if changed {
            // Synced with its directory: an identity handed out is never
            // handed out again after a power cut.
            teneral_core::fsutil::write_atomic(&self.path, &registry_text(&entries))
                .map_err(io("replace", &self.path))?;
        }
        drop(lock);
        Ok(id)
    }
}

/// Removes the temporaries of `path` a writer killed between writing one
/// and renaming it left beside it (`.<name>.tmp-<pid>`,
/// `teneral_core::fsutil::temp_path`). Called holding the registry's lock:
/// a writer writes its temporary and renames it only while it holds the
/// lock, so every one found then is stale. Nothing else is touched, and no
/// link is followed. How many were removed.
fn remove_stale_temporaries(path: &Path) -> io::Result<usize> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return Ok(0) };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let found = entry.file_name();
        let Some(found) = found.to_str() else { continue };
        let ours = found
            .strip_prefix(&prefix)
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if ours && !entry.file_type()?.is_dir() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

fn open_private(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// The identity of the individual at `home` in the machine's registry,
/// kept for the process's life once known. The key is its canonical
/// directory, or [`TEST_KEY_VAR`]'s value when that is set.
pub fn of(home: &Path) -> Result<Identity, IdentityError> {
    static KNOWN: Mutex<Option<HashMap<PathBuf, Identity>>> = Mutex::new(None);
    let key = match std::env::var_os(TEST_KEY_VAR).filter(|v| !v.is_empty()) {
        Some(name) => PathBuf::from(name),
        None => home.canonicalize().unwrap_or_else(|_| home.to_owned()),
    };
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(id) = known.as_ref().and_then(|k| k.get(&key)) {
        return Ok(*id);
    }
    let (uids, gids) = ranges();
    let id = Registry::machine().identity_of(&key, uids, gids)?;
    known.get_or_insert_with(HashMap::new).insert(key, id);
    Ok(id)
}

#[cfg(test)]
mod tests;
