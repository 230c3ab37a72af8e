//! The unpacker's only writes: into the staging directory, through
//! directory descriptors opened one component at a time with `O_NOFOLLOW`,
//! files made with `O_EXCL | O_NOFOLLOW`, links with `symlinkat`/`linkat`
//! relative to those descriptors. Whatever the tree holds meanwhile, nothing
//! is written through a link or outside the staging directory.
//!
//! The descriptors of the directory written into last and of all its
//! ancestors stay open (at most [`MAX_DEPTH`](super::resolve::MAX_DEPTH)):
//! the next entry opens only the components its directory does not share
//! with that one, so an archive in order costs one `openat` per directory,
//! not one per component per entry.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Instant;

use rustix::fs::{Mode, OFlags};

use super::resolve::{parent, show};
use super::{corrupt, Limits, UnpackError};

/// Writes into the staging directory through directory descriptors.
pub(super) struct Writer {
    root: OwnedFd,
    /// The directory written into last (normalized) and the descriptors of
    /// its components: `open[i]` is the directory of its first `i + 1`.
    path: Vec<u8>,
    open: Vec<OwnedFd>,
    buf: Vec<u8>,
    limits: Limits,
}

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl Writer {
    pub(super) fn open(dest: &Path, limits: Limits) -> Result<Self, UnpackError> {
        let root = rustix::fs::open(dest, DIR_FLAGS, Mode::empty()).map_err(|e| {
            UnpackError::Write { path: dest.display().to_string(), source: e.into() }
        })?;
        Ok(Self { root, path: Vec::new(), open: Vec::new(), buf: vec![0; 1 << 18], limits })
    }

    /// The descriptor of directory `dir` (normalized; empty for the root),
    /// and the file name of `path` in it.
    fn parent_of<'p>(&mut self, path: &'p [u8]) -> Result<(&OwnedFd, &'p [u8]), UnpackError> {
        let dir = parent(path);
        let base = if dir.is_empty() { path } else { &path[dir.len() + 1..] };
        if dir.is_empty() {
            return Ok((&self.root, base));
        }
        if self.path != dir || self.open.is_empty() {
            let shared = dir
                .split(|b| *b == b'/')
                .zip(self.path.split(|b| *b == b'/'))
                .take(self.open.len())
                .take_while(|(a, b)| a == b)
                .count();
            self.open.truncate(shared);
            self.path.clear();
            for part in dir.split(|b| *b == b'/').skip(shared) {
                let at = self.open.last().unwrap_or(&self.root);
                match rustix::fs::openat(at, part, DIR_FLAGS, Mode::empty()) {
                    Ok(fd) => self.open.push(fd),
                    Err(e) => {
                        self.open.clear();
                        return Err(write_err(dir, e.into()));
                    }
                }
            }
            self.path.extend_from_slice(dir);
        }
        match self.open.last() {
            Some(fd) => Ok((fd, base)),
            None => Err(write_err(dir, io::ErrorKind::NotFound.into())),
        }
    }

    pub(super) fn mkdir(&mut self, path: &[u8], mode: u32) -> Result<(), UnpackError> {
        let (dir, base) = self.parent_of(path)?;
        rustix::fs::mkdirat(dir, base, Mode::from_raw_mode(mode))
            .map_err(|e| write_err(path, e.into()))
    }

    pub(super) fn symlink(&mut self, target: &[u8], path: &[u8]) -> Result<(), UnpackError> {
        let (dir, base) = self.parent_of(path)?;
        rustix::fs::symlinkat(target, dir, base).map_err(|e| write_err(path, e.into()))
    }

    pub(super) fn hard_link(&mut self, target: &[u8], path: &[u8]) -> Result<(), UnpackError> {
        let (dir, base) = self.parent_of(target)?;
        let (from, from_base) =
            (rustix::io::dup(dir).map_err(|e| write_err(target, e.into()))?, base.to_vec());
        let (dir, base) = self.parent_of(path)?;
        rustix::fs::linkat(&from, from_base.as_slice(), dir, base, rustix::fs::AtFlags::empty())
            .map_err(|e| write_err(path, e.into()))
    }

    /// Creates file `path` and writes the entry's data into the regions of
    /// `map` (offset, length), then sets its length to `len`.
    pub(super) fn file(
        &mut self,
        path: &[u8],
        mode: u32,
        data: &mut impl Read,
        map: &[(u64, u64)],
        len: u64,
    ) -> Result<(), UnpackError> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (dir, base) = self.parent_of(path)?;
        let fd = rustix::fs::openat(dir, base, flags, Mode::from_raw_mode(mode))
            .map_err(|e| write_err(path, e.into()))?;
        let mut file = File::from(fd);
        let sparse = map.len() != 1 || map[0] != (0, len);
        for &(offset, mut left) in map {
            if sparse {
                io::Seek::seek(&mut file, io::SeekFrom::Start(offset))
                    .map_err(|e| write_err(path, e))?;
            }
            while left > 0 {
                if Instant::now() >= self.limits.deadline {
                    return Err(self.limits.late(path));
                }
                let want = self.buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = data.read(&mut self.buf[..want]).map_err(corrupt)?;
                if n == 0 {
                    return Err(UnpackError::Corrupt("the archive ends inside a file".into()));
                }
                file.write_all(&self.buf[..n]).map_err(|e| write_err(path, e))?;
                left -= n as u64;
            }
        }
        if sparse {
            file.set_len(len).map_err(|e| write_err(path, e))?;
        }
        Ok(())
    }
}

fn write_err(path: &[u8], source: io::Error) -> UnpackError {
    UnpackError::Write { path: show(path), source }
}
