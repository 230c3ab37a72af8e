//! Who a root kernel's cages are on the host: each individual's own
//! unprivileged identity, taken from a sub-id range and recorded
//! machine-wide, and the ownership of what its cages may write.
//!
//! Invariants:
//! - Two individuals of the machine never hold the same identity: ids are
//!   chosen under an exclusive lock on [`REGISTRY`] by a pure function of
//!   the range and the ids taken ([`choose`]), and recorded before the lock
//!   is let go; an individual keeps the identity recorded for it.
//! - The walk that gives a tree to an identity ([`own`]) never follows a
//!   link, never leaves the mount it starts on, and changes only the inode
//!   it examined (each entry is opened with `openat2`, `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, and changed through that
//!   descriptor); it gives away directories and regular files with one
//!   link only, never a device, FIFO, socket or a file linked elsewhere.
//!
//! The reasons are in docs/cage.md, "Identities".

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// A host user and group, without supplementary groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

impl Identity {
    /// What a root kernel's cage runs as when its launch names no
    /// individual (tests and benchmarks that run the helper themselves).
    pub const NOBODY: Identity = Identity { uid: super::BODY_ID, gid: super::BODY_ID };

    /// `UID:GID`, as the helper's `--identity` takes it.
    pub fn to_arg(self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }

    /// Reads [`Identity::to_arg`]; root (0) is never an identity.
    pub fn from_arg(text: &str) -> Option<Identity> {
        let (uid, gid) = text.split_once(':')?;
        let id = Identity { uid: uid.parse().ok()?, gid: gid.parse().ok()? };
        (id.uid != 0 && id.gid != 0).then_some(id)
    }
}

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

/// The map of the user namespace a root cage's task limit counts in: every
/// id but root's, each as itself, so whatever identity the plan names is
/// there, and the namespace can be made before the plan is known.
pub const EVERY_ID_BUT_ROOT: &str = "1 1 4294967294";

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
            crate::fsutil::write_atomic(&self.path, &registry_text(&entries))
                .map_err(io("replace", &self.path))?;
        }
        drop(lock);
        Ok(id)
    }
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

/// How many links [`resolve_grant`] follows before it gives up (as Linux).
const MAX_LINKS: usize = 40;

/// `path` made absolute and free of links, as `canonicalize` makes it, but
/// following no link a body or a check may have made or replaced: none
/// that lies beneath one of `writable` (the real paths of the plan's
/// writable grants), and for a root kernel's cage (`id`) none that the
/// identity owns or that lies in a directory it owns (or may write as its
/// group). A grant of the kernel's may lead through its own links (to a
/// cache, the sockets' link into the gate's target); what a cage writes
/// must not turn that into a path of its choosing.
pub fn resolve_grant(
    path: &Path,
    id: Option<Identity>,
    writable: &[PathBuf],
) -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let start =
        if path.is_absolute() { path.to_owned() } else { std::env::current_dir()?.join(path) };
    let mut todo: Vec<std::ffi::OsString> =
        start.components().rev().map(|c| c.as_os_str().to_owned()).collect();
    let mut done = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) | Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let next = done.join(&part);
        let meta = std::fs::symlink_metadata(&next)?;
        if !meta.file_type().is_symlink() {
            done = next;
            continue;
        }
        links += 1;
        let beneath_writable = writable.iter().any(|w| next.starts_with(w) && next != *w);
        let identitys = match id {
            Some(id) => {
                let parent = std::fs::symlink_metadata(&done)?;
                let group_writes = parent.gid() == id.gid && parent.mode() & 0o020 != 0;
                meta.uid() == id.uid || parent.uid() == id.uid || group_writes
            }
            None => false,
        };
        if beneath_writable || identitys {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a link in a place a cage writes; the kernel follows no link a body \
                     or a check may have made (remove it, or grant the place it leads to)",
                    next.display(),
                ),
            ));
        }
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&next)?;
        if target.is_absolute() {
            done = PathBuf::from("/");
        }
        todo.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
    }
    Ok(done)
}

/// An `O_PATH` descriptor of the absolute, link-free `path`: a link found
/// anywhere on it (one swapped in since it was resolved) is refused.
pub fn open_resolved(path: &Path) -> io::Result<OwnedFd> {
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    Ok(rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    )?)
}

/// Deeper than this, a walk gives nothing more away (each level holds two
/// descriptors open).
const MAX_DEPTH: usize = 256;

/// Gives the tree at `top` to `id`: `top` is a path resolved already (by
/// [`resolve_grant`]), and a link on it now is refused; nothing beneath it
/// is followed either.
/// A top that `id` owns already is the individual's since an earlier
/// start: only its entries owned by someone else (made by the kernel
/// since) are given, each whole. Otherwise the whole tree is, `top` last,
/// so a walk cut short is done again at the next start. `keep` (the
/// kernel's read-only files beneath) stay as they are.
pub fn own(top: &Path, id: Identity, keep: &[PathBuf]) -> io::Result<()> {
    let handle = open_resolved(top)?;
    let stat = rustix::fs::fstat(&handle)?;
    let real = top.to_owned();
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {
            give(&handle, &stat, id, false)?;
            Ok(())
        }
        FileType::Directory => {
            let ours = stat.st_uid == id.uid && stat.st_gid == id.gid;
            walk(&handle, &real, id, keep, ours)?;
            if !ours {
                give(&handle, &stat, id, true)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Gives the directory of sockets at `dir` and each socket in it to `id`
/// (a socket is connected to only by who may write it), nothing deeper.
pub fn own_sockets(dir: &Path, id: Identity) -> io::Result<()> {
    let handle = open_resolved(dir)?;
    let stat = rustix::fs::fstat(&handle)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    give(&handle, &stat, id, true)?;
    for entry in listing(&handle)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let Some(fd) = beneath(&handle, OsStr::from_bytes(name))? else { continue };
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Socket {
            give(&fd, &stat, id, true)?;
        }
    }
    Ok(())
}

/// The entries of the directory `handle` (an `O_PATH` descriptor) holds.
fn listing(handle: &OwnedFd) -> io::Result<rustix::fs::Dir> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(handle, ".", flags, Mode::empty())?;
    Ok(rustix::fs::Dir::new(fd)?)
}

/// An `O_PATH` descriptor of `name` beneath `dir`, or `None` when it is a
/// link, on another mount, or gone.
fn beneath(dir: &impl AsFd, name: &OsStr) -> io::Result<Option<OwnedFd>> {
    let resolve = ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat2(dir, name, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::XDEV | rustix::io::Errno::LOOP | rustix::io::Errno::NOENT) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Changes the owner of the inode `fd` holds (`stat` is its) to `id`,
/// unless it is `id`'s already, or a file with more than one link when
/// `linked_too` is false. Returns whether it changed.
fn give(fd: &OwnedFd, stat: &rustix::fs::Stat, id: Identity, linked_too: bool) -> io::Result<bool> {
    if stat.st_uid == id.uid && stat.st_gid == id.gid {
        return Ok(false);
    }
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind == FileType::RegularFile && stat.st_nlink > 1 && !linked_too {
        return Ok(false);
    }
    let (uid, gid) = (rustix::fs::Uid::from_raw(id.uid), rustix::fs::Gid::from_raw(id.gid));
    rustix::fs::chownat(fd, "", Some(uid), Some(gid), AtFlags::EMPTY_PATH)?;
    Ok(true)
}

/// Walks the directory `dir` (at `path`), depth first with one listing
/// open per level. With `only_others`, its entries that `id` owns are
/// passed over (at this level only; below an entry given, everything is).
fn walk(
    dir: &OwnedFd,
    path: &Path,
    id: Identity,
    keep: &[PathBuf],
    only_others: bool,
) -> io::Result<()> {
    struct Level {
        handle: OwnedFd,
        stat: rustix::fs::Stat,
        path: PathBuf,
        entries: rustix::fs::Dir,
        skip_ours: bool,
    }
    let open_level = |handle: OwnedFd, stat, path: PathBuf, skip_ours| -> io::Result<Level> {
        let entries = listing(&handle)?;
        Ok(Level { handle, stat, path, entries, skip_ours })
    };
    let top = rustix::fs::fstat(dir)?;
    let top_handle = rustix::fs::openat(
        dir,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut stack = vec![open_level(top_handle, top, path.to_owned(), only_others)?];
    while let Some(level) = stack.last_mut() {
        let Some(entry) = level.entries.next() else {
            // The directory's entries are given; now the directory itself
            // (the top is the caller's).
            let done = stack.pop();
            if let (Some(done), false) = (done, stack.is_empty()) {
                give(&done.handle, &done.stat, id, true)?;
            }
            continue;
        };
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_owned();
        if name == "." || name == ".." {
            continue;
        }
        let child = level.path.join(&name);
        if keep.contains(&child) {
            continue;
        }
        let Some(fd) = beneath(&level.handle, &name)? else { continue };
        let stat = rustix::fs::fstat(&fd)?;
        let ours = stat.st_uid == id.uid && stat.st_gid == id.gid;
        if level.skip_ours && ours {
            continue;
        }
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {
                give(&fd, &stat, id, false)?;
            }
            FileType::Directory if stack.len() < MAX_DEPTH => {
                stack.push(open_level(fd, stat, child, false)?);
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
