//! The unpacker: a hostile `.tar.gz` into an empty staging directory, or a
//! refusal of the whole archive that names the entry.
//!
//! The `tar` crate only parses: it is used in raw mode, so every header,
//! including PAX records and GNU long names, reaches this module, which
//! applies them itself (with a size bound on each) and checks every entry
//! with [`resolve`] before anything is written. No function that extracts
//! on its own is ever called. Writes go through directory file descriptors
//! opened one component at a time with `O_NOFOLLOW`, and files are created
//! with `O_EXCL | O_NOFOLLOW`, so even a tree changed under the unpacker
//! cannot make it write through a link.
//!
//! Invariants when [`unpack_tar`] returns `Ok`: the staging directory holds
//! only directories, regular files and symlinks; every symlink resolves
//! inside it; no name was written twice; at most [`MAX_BYTES`] bytes were
//! declared and at most [`MAX_ENTRIES`] entries read; no name is more than
//! [`MAX_DEPTH`] directories deep or longer than PATH_MAX where the tree
//! will be used ([`Limits::root_len`]); no set-id or sticky bit and no
//! group or other write bit is set. On `Err` the caller removes the staging
//! directory; nothing was written outside it.
//!
//! Costs: every entry costs work in proportion to its name and its data,
//! never to the names before it (directory descriptors stay open, the tree
//! model looks up one parent, link resolution has a budget for the whole
//! archive), and [`Limits::deadline`] is checked before every entry and
//! between every 256 KiB of an entry's data: past it, unpacking stops with
//! [`UnpackError::TimedOut`], naming the entry it reached.
//!
//! The end: the stream must hold the end-of-archive marker (a block of
//! zeros; the tar crate stops at the first). After it, only zero bytes may
//! follow, at most [`MAX_PADDING`] of them (GNU tar pads to whole records,
//! 10 KiB by default), then the end of the stream. Anything else, such as a
//! second archive appended, is refused rather than ignored. The stream is
//! read to its end, so under gzip ([`gzip::GzipReader`]) every member's
//! CRC32 and length are checked and nothing after the last member passes.

mod bounds;
pub mod gzip;
pub mod resolve;
mod write;

use std::borrow::Cow;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use tar::EntryType;

use bounds::{read_padding, Ends};
pub use bounds::{Limits, MAX_PADDING};
use gzip::GzipError;
pub use resolve::MAX_DEPTH;
use resolve::{normalize, show, Node, Refusal, Tree, PATH_MAX};
use write::Writer;

/// At most this many bytes unpacked, counted from what headers declare.
pub const MAX_BYTES: u64 = 1 << 30;
/// At most this many entries (metadata headers not counted; directories
/// made for an entry's name counted).
pub const MAX_ENTRIES: u32 = 20_000;
/// At most this many bytes in one PAX or GNU long-name header.
pub const MAX_METADATA: u64 = 64 * 1024;

/// Why an archive was not unpacked. Entry names are shown escaped and cut
/// ([`resolve::show`]).
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("entry \"{entry}\" is refused: {reason}")]
    Refused { entry: String, reason: Refusal },
    #[error("it is not a well-formed .tar.gz archive ({0})")]
    Corrupt(String),
    #[error("its gzip stream is damaged or cut: {0}")]
    Gzip(GzipError),
    #[error(
        "unpacking stopped at entry \"{entry}\": it took longer than {}s, the limit for one \
         archive; an organ must be an archive that unpacks within it: pin a release with fewer \
         entries or less data",
        limit.as_secs_f64()
    )]
    TimedOut { entry: String, limit: Duration },
    #[error("cannot write \"{path}\" in the staging directory: {source}")]
    Write { path: String, source: io::Error },
}

impl UnpackError {
    /// The refusal and the entry it names, when it is one.
    pub fn refusal(&self) -> Option<(&str, &Refusal)> {
        match self {
            UnpackError::Refused { entry, reason } => Some((entry, reason)),
            _ => None,
        }
    }
}

/// What was unpacked.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub entries: u32,
    pub bytes: u64,
}

fn refused(entry: &[u8], reason: Refusal) -> UnpackError {
    UnpackError::Refused { entry: show(entry), reason }
}

fn corrupt(e: io::Error) -> UnpackError {
    match GzipError::within(&e) {
        Some(gzip) => UnpackError::Gzip(gzip.clone()),
        None => UnpackError::Corrupt(e.to_string()),
    }
}

/// Metadata the next entry takes: GNU long name and link, PAX records.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

/// PAX records of one entry that this unpacker applies.
#[derive(Default)]
struct Pax {
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    size: Option<u64>,
    sparse: bool,
}

fn parse_pax(bytes: &[u8]) -> Result<Pax, String> {
    let mut pax = Pax::default();
    for record in tar::PaxExtensions::new(bytes) {
        let record = record.map_err(|e| format!("a PAX record is malformed: {e}"))?;
        match record.key_bytes() {
            b"path" => pax.path = Some(record.value_bytes().to_vec()),
            b"linkpath" => pax.linkpath = Some(record.value_bytes().to_vec()),
            b"size" => {
                let text = record.value().map_err(|_| "a PAX size is not text".to_owned())?;
                pax.size = Some(text.parse().map_err(|_| format!("PAX size {text:?}"))?);
            }
            k if k.starts_with(b"GNU.sparse.") => pax.sparse = true,
            _ => {}
        }
    }
    Ok(pax)
}

/// Reads a metadata header's data, at most [`MAX_METADATA`] bytes.
fn read_metadata(entry: &mut impl Read, name: &[u8], size: u64) -> Result<Vec<u8>, UnpackError> {
    if size > MAX_METADATA {
        return Err(refused(name, Refusal::MetadataTooLarge(size)));
    }
    let mut data = Vec::with_capacity(size as usize);
    entry.read_to_end(&mut data).map_err(corrupt)?;
    if data.len() as u64 != size {
        return Err(UnpackError::Corrupt("the archive ends inside a header".into()));
    }
    Ok(data)
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// Unpacks the uncompressed tar stream `reader` into `dest`, an existing
/// empty directory, for a tree used where it is, within
/// [`UNPACK_LIMIT`](super::UNPACK_LIMIT). See the module doc.
pub fn unpack_tar(reader: impl Read, dest: &Path) -> Result<Summary, UnpackError> {
    unpack_tar_within(reader, dest, &Limits::new(super::UNPACK_LIMIT, dest))
}

/// [`unpack_tar`] within `limits`; reads `reader` to its end.
pub fn unpack_tar_within(
    reader: impl Read,
    dest: &Path,
    limits: &Limits,
) -> Result<Summary, UnpackError> {
    let mut out = Writer::open(dest, *limits)?;
    let mut tree = Tree::default();
    let mut pending = Pending::default();
    let mut summary = Summary::default();
    let mut headers = 0u32;
    let mut archive = tar::Archive::new(Ends { inner: reader, ended: false });
    let entries = archive.entries().map_err(corrupt)?.raw(true);
    for entry in entries {
        let mut entry = entry.map_err(corrupt)?;
        let header = entry.header().clone();
        let raw_name = header.path_bytes().into_owned();
        headers += 1;
        if headers > 4 * MAX_ENTRIES {
            return Err(refused(&raw_name, Refusal::TooMany));
        }
        let size = header.entry_size().map_err(corrupt)?;
        summary.bytes = summary.bytes.saturating_add(size);
        let kind = header.entry_type();
        let slot = match kind {
            EntryType::GNULongName => &mut pending.long_name,
            EntryType::GNULongLink => &mut pending.long_link,
            EntryType::XHeader => &mut pending.pax,
            EntryType::XGlobalHeader => {
                if summary.bytes > MAX_BYTES {
                    return Err(refused(&raw_name, Refusal::TooLarge));
                }
                read_metadata(&mut entry, &raw_name, size)?;
                continue;
            }
            _ => {
                let taken = std::mem::take(&mut pending);
                summary.entries += 1;
                let mut at = At { tree: &mut tree, out: &mut out, summary: &mut summary, limits };
                member(&mut entry, &header, taken, &mut at)?;
                continue;
            }
        };
        limits.check(&raw_name)?;
        if slot.is_some() {
            return Err(UnpackError::Corrupt(format!(
                "two {} headers in a row before entry {:?}",
                kind.as_byte() as char,
                show(&raw_name)
            )));
        }
        if summary.bytes > MAX_BYTES {
            return Err(refused(&raw_name, Refusal::TooLarge));
        }
        *slot = Some(read_metadata(&mut entry, &raw_name, size)?);
    }
    if pending.long_name.is_some() || pending.long_link.is_some() || pending.pax.is_some() {
        return Err(UnpackError::Corrupt("a metadata header has no entry after it".into()));
    }
    let mut rest = archive.into_inner();
    if rest.ended {
        return Err(UnpackError::Corrupt(
            "it ends without its end-of-archive block (512 zero bytes); it may be cut".into(),
        ));
    }
    read_padding(&mut rest, limits)?;
    if let Some((name, reason)) = tree.escaping_link() {
        return Err(refused(&name, reason));
    }
    Ok(summary)
}

/// Where unpacking stands, for [`member`].
struct At<'a> {
    tree: &'a mut Tree,
    out: &'a mut Writer,
    summary: &'a mut Summary,
    limits: &'a Limits,
}

/// Checks and writes one entry that is not metadata.
fn member(
    entry: &mut impl Read,
    header: &tar::Header,
    pending: Pending,
    at: &mut At<'_>,
) -> Result<(), UnpackError> {
    let At { tree, out, summary, limits } = at;
    let header_name = header.path_bytes();
    let pax = match &pending.pax {
        Some(bytes) => parse_pax(bytes).map_err(UnpackError::Corrupt)?,
        None => Pax::default(),
    };
    let name: Cow<'_, [u8]> = match (pending.long_name, pax.path) {
        (Some(_), Some(_)) => return Err(refused(&header_name, Refusal::TwoNames("name"))),
        (Some(long), None) => Cow::Owned(trim_nul(long)),
        (None, Some(path)) => Cow::Owned(path),
        (None, None) => header_name.clone(),
    };
    let link: Option<Vec<u8>> = match (pending.long_link, pax.linkpath) {
        (Some(_), Some(_)) => return Err(refused(&name, Refusal::TwoNames("link target"))),
        (Some(long), None) => Some(trim_nul(long)),
        (None, Some(path)) => Some(path),
        (None, None) => header.link_name_bytes().map(Cow::into_owned),
    };
    limits.check(&name)?;
    if summary.entries > MAX_ENTRIES {
        return Err(refused(&name, Refusal::TooMany));
    }
    if summary.bytes > MAX_BYTES {
        return Err(refused(&name, Refusal::TooLarge));
    }
    let size = header.entry_size().map_err(corrupt)?;
    if let Some(pax_size) = pax.size.filter(|s| *s != size) {
        return Err(refused(&name, Refusal::PaxSize { pax: pax_size, header: size }));
    }
    if pax.sparse {
        return Err(refused(&name, Refusal::Sparse("PAX sparse records")));
    }
    let mode = header.mode().map_err(corrupt)? & 0o755;
    let kind = header.entry_type();
    let is_dir =
        kind == EntryType::Directory || (kind == EntryType::Regular && name.last() == Some(&b'/'));
    let path = normalize(&name).map_err(|r| refused(&name, r))?;
    let used = limits.root_len + 1 + path.len();
    if used >= PATH_MAX {
        let root_len = limits.root_len;
        return Err(refused(&name, Refusal::PathTooLong { len: used, root_len }));
    }
    if path.is_empty() {
        // The tree's root ("./") is the staging directory itself.
        return if is_dir { Ok(()) } else { Err(refused(&name, Refusal::EmptyName)) };
    }
    let entries_before = summary.entries;
    let mut admit = |tree: &mut Tree, out: &mut Writer, node| -> Result<(), UnpackError> {
        let made = tree.admit(&path, node).map_err(|r| refused(&name, r))?;
        // Directories made for an entry count as entries: they cost the same.
        let entries = entries_before.saturating_add(made.len() as u32);
        summary.entries = entries;
        if entries > MAX_ENTRIES {
            return Err(refused(&name, Refusal::TooMany));
        }
        made.iter().try_for_each(|dir| out.mkdir(dir, 0o755))
    };
    if is_dir {
        let existed = tree.get(&path).is_some();
        admit(tree, out, Node::Dir { explicit: true })?;
        return if existed { Ok(()) } else { out.mkdir(&path, mode | 0o700) };
    }
    match kind {
        EntryType::Regular | EntryType::Continuous => {
            admit(tree, out, Node::File)?;
            out.file(&path, mode | 0o400, entry, &[(0, size)], size)
        }
        EntryType::GNUSparse => {
            let (map, real) = sparse_map(header).map_err(|r| refused(&name, r))?;
            if summary.bytes.saturating_add(real.saturating_sub(size)) > MAX_BYTES {
                return Err(refused(&name, Refusal::TooLarge));
            }
            if map.iter().map(|(_, len)| len).sum::<u64>() != size {
                return Err(refused(&name, Refusal::Sparse("its map disagrees with its size")));
            }
            admit(tree, out, Node::File)?;
            summary.bytes = summary.bytes.saturating_add(real.saturating_sub(size));
            out.file(&path, mode | 0o400, entry, &map, real)
        }
        EntryType::Symlink => {
            let target = link.ok_or_else(|| refused(&name, Refusal::NoTarget))?;
            admit(tree, out, Node::Symlink(target.clone()))?;
            out.symlink(&target, &path)
        }
        EntryType::Link => {
            let target = link.ok_or_else(|| refused(&name, Refusal::NoTarget))?;
            let target = tree.hard_link_target(&target).map_err(|r| refused(&name, r))?;
            admit(tree, out, Node::File)?;
            out.hard_link(&target, &path)
        }
        EntryType::Char => Err(refused(&name, Refusal::Type("character device"))),
        EntryType::Block => Err(refused(&name, Refusal::Type("block device"))),
        EntryType::Fifo => Err(refused(&name, Refusal::Type("fifo"))),
        _ => Err(refused(&name, Refusal::Type("entry of an unknown type"))),
    }
}

/// The data regions of an old-style GNU sparse entry and its real size.
fn sparse_map(header: &tar::Header) -> Result<(Vec<(u64, u64)>, u64), Refusal> {
    let bad = Refusal::Sparse;
    let gnu = header.as_gnu().ok_or(bad("not a GNU header"))?;
    if gnu.is_extended() {
        return Err(bad("more than four regions"));
    }
    let real = gnu.real_size().map_err(|_| bad("an unreadable real size"))?;
    if real > MAX_BYTES {
        return Err(Refusal::TooLarge);
    }
    let mut map = Vec::new();
    let mut end = 0u64;
    for block in gnu.sparse.iter().filter(|b| !b.is_empty()) {
        let off = block.offset().map_err(|_| bad("an unreadable region"))?;
        let len = block.length().map_err(|_| bad("an unreadable region"))?;
        let stop = off.checked_add(len).ok_or(bad("a region past any size"))?;
        if off < end || stop > real {
            return Err(bad("regions out of order or past its size"));
        }
        end = stop;
        map.push((off, len));
    }
    Ok((map, real))
}
