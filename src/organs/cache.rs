//! The cache `.teneral/organs/`, everything in it named by an archive's hash:
//! `archives/<sha256>.tar.gz` (put there by the agent), `trees/<sha256>/`
//! (unpacked in the cage, checked by the kernel), `sets/<id>/<name>` (one
//! link per pinned organ).
//!
//! Invariants: a tree that exists is whole, because it is unpacked into a
//! staging directory beside its place, checked, synced, and renamed into
//! it; the bytes hashed are the bytes unpacked (the kernel hashes the
//! archive as it writes it into the pipe that is the unpacker's stdin, and
//! the unpacker must say it read all of it);
//! nothing here removes an archive or a tree; a set is named by a hash of
//! what it holds, so sets of equal pins are one directory.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use sha2::{Digest, Sha256};

use std::os::unix::fs::DirBuilderExt;

use super::pins::Pin;
use super::staged::{self, Found, StagedError};
use super::steps;
use super::unpack::gzip::GzipReader;
use super::unpack::{self, Limits, Summary, UnpackError};
use super::unpacker::{self, Outcome, RunFailed, Unpacker};

/// The cache, relative to the individual's directory.
pub const CACHE_DIR: &str = ".teneral/organs";
/// An archive may not be larger than this.
pub const MAX_ARCHIVE: u64 = 256 << 20;

/// The cache's paths.
#[derive(Debug, Clone)]
pub struct Cache {
    pub root: PathBuf,
}

impl Cache {
    pub fn new(home: &Path) -> Self {
        Self { root: home.join(CACHE_DIR) }
    }

    pub fn archive(&self, sha256: &str) -> PathBuf {
        self.root.join("archives").join(format!("{sha256}.tar.gz"))
    }

    pub fn tree(&self, sha256: &str) -> PathBuf {
        self.root.join("trees").join(sha256)
    }

    pub fn sets(&self) -> PathBuf {
        self.root.join("sets")
    }
}

/// A name beside `dir` that no other process or call uses.
fn staging_name(prefix: &str, what: &str) -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    format!(".{prefix}-{what}-{}-{n}", std::process::id())
}

/// Why an archive could not be read or hashed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("it is not in the cache")]
    Missing,
    #[error("it is not a regular file")]
    NotFile,
    #[error("it is {0} bytes; at most 256 MiB are allowed")]
    TooLarge(u64),
    #[error("it cannot be read: {0}")]
    Read(io::Error),
}

/// Opens a cached archive: a regular file of at most [`MAX_ARCHIVE`] bytes.
/// Opened without blocking, so that a fifo put in its place cannot hold the
/// kernel (for a regular file the flag changes nothing).
pub fn open_archive(path: &Path) -> Result<File, ArchiveError> {
    use rustix::fs::{Mode, OFlags};
    // NOFOLLOW: an archive is taken as the file it is, never through a link.
    let flags =
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Err(ArchiveError::Missing),
        Err(e) => return Err(ArchiveError::Read(e.into())),
    };
    let meta = file.metadata().map_err(ArchiveError::Read)?;
    if !meta.is_file() {
        return Err(ArchiveError::NotFile);
    }
    if meta.len() > MAX_ARCHIVE {
        return Err(ArchiveError::TooLarge(meta.len()));
    }
    Ok(file)
}

/// Reads through to the hash, when there is one, counting the bytes read;
/// fails past [`MAX_ARCHIVE`] bytes (a file that grows while it is read).
struct Hashing<R> {
    inner: R,
    hash: Option<Sha256>,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > MAX_ARCHIVE {
            return Err(io::Error::other("the archive grew past 256 MiB while it was read"));
        }
        if let Some(hash) = &mut self.hash {
            hash.update(&buf[..n]);
        }
        Ok(n)
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of everything `reader` gives, in lower-case hex.
pub fn hash(reader: impl Read) -> io::Result<String> {
    let mut h = Hashing { inner: reader, hash: Some(Sha256::new()), read: 0 };
    io::copy(&mut h, &mut io::sink())?;
    Ok(hex(&h.hash.unwrap_or_default().finalize()))
}

/// Unpacks the `.tar.gz` `archive` into `dest` (an existing empty
/// directory), hashing every byte read; returns what was unpacked and the
/// archive's SHA-256. The gzip stream is read to its end: every member's
/// CRC32 and length are checked, and nothing may follow the last member
/// (see [`unpack`] for what may follow the tar stream's end).
pub fn unpack_file(archive: impl Read, dest: &Path) -> Result<(Summary, String), UnpackError> {
    unpack_file_within(archive, dest, &Limits::new(super::UNPACK_LIMIT, dest))
}

/// [`unpack_file`] within `limits`.
pub fn unpack_file_within(
    archive: impl Read,
    dest: &Path,
    limits: &Limits,
) -> Result<(Summary, String), UnpackError> {
    let (summary, hashing) = unpack_through(archive, Some(Sha256::new()), dest, limits)?;
    let hash = hashing.hash.unwrap_or_default();
    Ok((summary, hex(&hash.finalize())))
}

/// [`unpack_file_within`] without hashing: returns what was unpacked and
/// the number of bytes of `archive` read. The caged unpacker's, whose
/// input the kernel hashes as it feeds it. The gzip stream is inflated on
/// a thread of its own ([`ReadAhead`]) while this one parses and writes, as
/// `tar` and the `gzip` it runs share the work; where no thread can be
/// started, inflating is done inline.
pub fn unpack_counted_within<R: Read + Send + 'static>(
    archive: R,
    dest: &Path,
    limits: &Limits,
) -> Result<(Summary, u64), UnpackError> {
    let hashing = Hashing { inner: archive, hash: None, read: 0 };
    let gz = GzipReader::new(BufReader::with_capacity(1 << 16, hashing));
    // Past the gzip stream's end: read for certain, and count.
    let rest = |gz: GzipReader<BufReader<Hashing<R>>>| -> io::Result<u64> {
        let mut rest = gz.into_inner();
        io::copy(&mut rest, &mut io::sink())?;
        Ok(rest.into_inner().read)
    };
    let corrupt = |e: io::Error| UnpackError::Corrupt(e.to_string());
    match ReadAhead::start(gz) {
        Ok(mut ahead) => {
            let summary = unpack::unpack_tar_within(&mut ahead, dest, limits)?;
            // At the end already (the tar stream's end was read); for certain.
            io::copy(&mut ahead, &mut io::sink()).map_err(corrupt)?;
            let gz = ahead.finish().map_err(corrupt)?;
            Ok((summary, rest(gz).map_err(corrupt)?))
        }
        Err(Some(mut gz)) => {
            let summary = unpack::unpack_tar_within(&mut gz, dest, limits)?;
            Ok((summary, rest(gz).map_err(corrupt)?))
        }
        Err(None) => Err(corrupt(io::Error::other("the reader was lost starting a thread"))),
    }
}

/// How many chunks the inflating thread of [`ReadAhead`] may be ahead.
const AHEAD_CHUNKS: usize = 4;
/// The size of one chunk.
const AHEAD_CHUNK: usize = 1 << 18;

type Chunk = io::Result<(Vec<u8>, usize)>;

/// A reader whose reads are made on a thread of its own, up to
/// [`AHEAD_CHUNKS`] chunks ahead. The chunks go round between the two
/// threads, so the reading thread allocates nothing. An error is handed on
/// as it was made (a gzip error stays one); the thread ends at the end of
/// the stream, at an error, or when the reader is dropped.
struct ReadAhead<R> {
    full: std::sync::mpsc::Receiver<Chunk>,
    empty: std::sync::mpsc::SyncSender<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<Option<R>>>,
    chunk: Vec<u8>,
    at: usize,
    len: usize,
    ended: bool,
}

impl<R: Read + Send + 'static> ReadAhead<R> {
    /// Starts the thread on `inner`; gives `inner` back when no thread can
    /// be started (`None` only if it was lost, which a thread that did not
    /// start cannot do).
    fn start(inner: R) -> Result<ReadAhead<R>, Option<R>> {
        use std::sync::mpsc::sync_channel;
        use std::sync::{Arc, Mutex};
        let (full_tx, full) = sync_channel::<Chunk>(AHEAD_CHUNKS);
        let (empty, empty_rx) = sync_channel::<Vec<u8>>(AHEAD_CHUNKS + 1);
        for _ in 0..AHEAD_CHUNKS {
            let _ = empty.send(vec![0u8; AHEAD_CHUNK]);
        }
        // Where the thread takes `inner` from, and where it is taken back
        // from if the thread cannot start.
        let slot = Arc::new(Mutex::new(Some(inner)));
        let theirs = Arc::clone(&slot);
        let spawned = std::thread::Builder::new().name("inflate".into()).spawn(move || {
            let taken = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
            let mut inner = taken?;
            while let Ok(mut buf) = empty_rx.recv() {
                let got = loop {
                    match inner.read(&mut buf) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        got => break got,
                    }
                };
                let last = !matches!(got, Ok(n) if n > 0);
                if full_tx.send(got.map(|n| (buf, n))).is_err() || last {
                    break;
                }
            }
            Some(inner)
        });
        match spawned {
            Ok(thread) => Ok(ReadAhead {
                full,
                empty,
                thread: Some(thread),
                chunk: Vec::new(),
                at: 0,
                len: 0,
                ended: false,
            }),
            // A thread that did not start took nothing: `inner` is there.
            Err(_) => Err(slot.lock().unwrap_or_else(|p| p.into_inner()).take()),
        }
    }

    /// Waits for the thread, which has reached the end, and gives back the
    /// reader it read.
    fn finish(mut self) -> io::Result<R> {
        if !self.ended {
            return Err(io::Error::other("the stream was not read to its end"));
        }
        let thread = self.thread.take().ok_or_else(|| io::Error::other("no reading thread"))?;
        let inner = thread.join().map_err(|_| io::Error::other("the inflating thread failed"))?;
        inner.ok_or_else(|| io::Error::other("the inflating thread had no reader"))
    }
}

impl<R> Read for ReadAhead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.len {
            if self.ended {
                return Ok(0);
            }
            if !self.chunk.is_empty() {
                let _ = self.empty.send(std::mem::take(&mut self.chunk));
            }
            match self.full.recv() {
                Ok(Ok((_, 0))) => self.ended = true,
                Ok(Ok((chunk, n))) => (self.chunk, self.at, self.len) = (chunk, 0, n),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other("the inflating thread ended early")),
            }
        }
        let n = buf.len().min(self.len - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn unpack_through<R: Read>(
    archive: R,
    hash: Option<Sha256>,
    dest: &Path,
    limits: &Limits,
) -> Result<(Summary, Hashing<R>), UnpackError> {
    let hashing = Hashing { inner: archive, hash, read: 0 };
    let mut gz = GzipReader::new(BufReader::with_capacity(1 << 16, hashing));
    let summary = unpack::unpack_tar_within(&mut gz, dest, limits)?;
    // At the end already (the gzip reader ended there); read for certain.
    let mut rest = gz.into_inner();
    io::copy(&mut rest, &mut io::sink()).map_err(|e| UnpackError::Corrupt(e.to_string()))?;
    Ok((summary, rest.into_inner()))
}

/// What went wrong making a tree.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The archive the kernel read does not hash to the pin.
    #[error("the archive hashes to {0}")]
    WrongHash(String),
    /// The unpacker refused the archive, in its words.
    #[error("{0}")]
    Refused(String),
    #[error(
        "unpacking took longer than {}s, the limit for one archive; an organ must be an \
         archive that unpacks within it: pin a release with fewer entries or less data",
        .0.as_secs_f64()
    )]
    TimedOut(std::time::Duration),
    #[error("the unpacker ended with {how}: {said}")]
    Unpacker { how: String, said: String },
    #[error(
        "the unpacker says it read {said} bytes of the archive, but the kernel gave it \
         {given}{}",
        if .given < .len { format!(" of its {len}") } else { String::new() }
    )]
    Misreported { said: u64, given: u64, len: u64 },
    #[error("the unpacked tree is refused: {0}")]
    Staged(#[from] StagedError),
    #[error(transparent)]
    Run(#[from] RunFailed),
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: io::Error },
}

/// Unpacks `archive` (pinned as `sha256`) as `trees/<sha256>`: the caged
/// `unpacker` writes a staging directory beside it, the kernel checks what
/// it left ([`staged::check`]), syncs it and renames it into place. A tree
/// that appears meanwhile (another kernel) is kept and the staging
/// directory removed. Names are measured against PATH_MAX at the tree's
/// final place.
pub async fn make_tree(
    cache: &Cache,
    sha256: &str,
    archive: File,
    unpacker: &Unpacker<'_>,
) -> Result<PathBuf, TreeError> {
    let tree = cache.tree(sha256);
    let trees = cache.root.join("trees");
    std::fs::create_dir_all(&trees).map_err(io_err("cannot make", &trees))?;
    remove_orphans(&trees, &format!(".unpack-{sha256}-"));
    let staging = trees.join(staging_name("unpack", sha256));
    // 0755 at most whatever the umask: the check refuses group or other write.
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&staging)
        .map_err(io_err("cannot make", &staging))?;
    let result = unpack_and_check(cache, sha256, archive, unpacker, &staging, &tree).await;
    let result = match result {
        Ok(_) => {
            let (from, to, trees) = (staging.clone(), tree.clone(), trees.clone());
            tokio::task::spawn_blocking(move || install(&from, &to, &trees))
                .await
                .unwrap_or_else(|e| Err(io_err("cannot install", &tree)(io::Error::other(e))))
        }
        Err(e) => Err(e),
    };
    if result.is_err() {
        // A refused tree may hold 20,000 names: removed off the runtime's thread.
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&staging)).await;
    }
    result.map(|()| tree)
}

/// The first half of [`make_tree`]: `archive` (pinned as `sha256`)
/// unpacked into `staging` (an empty directory of the cache's individual)
/// by the caged `unpacker`, then the kernel's check of what it left, for a
/// tree that will be used at `tree`. Nothing is synced or renamed.
/// Returns what the check found.
pub async fn unpack_and_check(
    cache: &Cache,
    sha256: &str,
    archive: File,
    unpacker: &Unpacker<'_>,
    staging: &Path,
    tree: &Path,
) -> Result<Found, TreeError> {
    let individual = unpacker::individual_of_cache(&cache.root);
    let root_len = tree.as_os_str().len();
    let unit = unpacker::unit_name(staging);
    let (fed, outcome) = unpacker.run(&unit, archive, &individual, staging, root_len).await?;
    if fed.sha256 != sha256 {
        return Err(TreeError::WrongHash(fed.sha256));
    }
    match outcome {
        Outcome::Said { read, .. } if read != fed.len || fed.taken != fed.len => {
            return Err(TreeError::Misreported { said: read, given: fed.taken, len: fed.len })
        }
        Outcome::Said { .. } => {}
        Outcome::Refused(said) => return Err(TreeError::Refused(said)),
        Outcome::TimedOut => return Err(TreeError::TimedOut(unpacker.limit)),
        Outcome::Failed { how, said } => return Err(TreeError::Unpacker { how, said }),
    }
    let staged = staging.to_owned();
    let found = tokio::task::spawn_blocking(move || staged::check(&staged, root_len))
        .await
        .map_err(|e| io_err("cannot check", staging)(io::Error::other(e)))??;
    steps::mark("checked");
    Ok(found)
}

/// Syncs the checked `staging` and renames it to `tree` in `trees`.
fn install(staging: &Path, tree: &Path, trees: &Path) -> Result<(), TreeError> {
    // The tree's data reaches the disk before its name does, so a tree
    // that exists after a power loss is whole too.
    File::open(staging)
        .and_then(|dir| rustix::fs::syncfs(&dir).map_err(io::Error::from))
        .map_err(io_err("cannot sync", staging))?;
    steps::mark("synced");
    match std::fs::rename(staging, tree) {
        Ok(()) => {
            let synced =
                teneral_core::fsutil::sync_dir(trees).map_err(io_err("cannot sync", trees));
            steps::mark("renamed");
            synced
        }
        Err(_) if tree.is_dir() => {
            let _ = std::fs::remove_dir_all(staging);
            Ok(())
        }
        Err(e) => Err(io_err("cannot rename the unpacked tree to", tree)(e)),
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> TreeError {
    let path = path.to_owned();
    move |source| TreeError::Io { what, path, source }
}

/// Removes staging directories `<prefix><pid>-<n>` in `dir` whose process
/// is gone (a kernel killed while it unpacked or linked a set). Never a tree
/// nor a set: they have no leading dot.
fn remove_orphans(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The link each organ of a set has: `../../trees/<sha256>[/<dir>]`.
fn link_target(pin: &Pin) -> PathBuf {
    let mut target = PathBuf::from("../../trees").join(&pin.sha256);
    if let Some(dir) = &pin.dir {
        target.push(dir);
    }
    target
}

/// The set for `pins`: `sets/<id>/<name>` links, made if missing or wrong.
pub fn link_set(cache: &Cache, pins: &[Pin]) -> io::Result<PathBuf> {
    let mut sorted: Vec<&Pin> = pins.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut id = Sha256::new();
    for pin in &sorted {
        id.update(format!("{}\0{}\0{}\n", pin.name, pin.sha256, pin.dir.as_deref().unwrap_or("")));
    }
    let id = hex(&id.finalize()[..8]);
    let sets = cache.sets();
    let set = sets.join(&id);
    // What a kill left while this set was last made.
    remove_orphans(&sets, &format!(".set-{id}-"));
    remove_orphans(&sets, &format!(".stale-{id}-"));
    if set_is(&set, &sorted) {
        return Ok(set);
    }
    std::fs::create_dir_all(&sets)?;
    let staging = sets.join(staging_name("set", &id));
    std::fs::create_dir(&staging)?;
    let made = (|| {
        for pin in &sorted {
            std::os::unix::fs::symlink(link_target(pin), staging.join(&pin.name))?;
        }
        if set.symlink_metadata().is_ok() {
            // A set that is not what its name says: set it aside, then replace it.
            let stale = sets.join(staging_name("stale", &id));
            std::fs::rename(&set, &stale)?;
            let _ = std::fs::remove_dir_all(&stale);
        }
        std::fs::rename(&staging, &set)
    })();
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
        if set_is(&set, &sorted) {
            return Ok(set);
        }
    }
    made.map(|()| set)
}

/// Whether `set` holds exactly the links `pins` need.
fn set_is(set: &Path, pins: &[&Pin]) -> bool {
    let Ok(entries) = std::fs::read_dir(set) else { return false };
    let count = entries.count();
    count == pins.len()
        && pins
            .iter()
            .all(|pin| std::fs::read_link(set.join(&pin.name)).is_ok_and(|t| t == link_target(pin)))
}
