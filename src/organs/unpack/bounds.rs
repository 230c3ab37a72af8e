//! What bounds one unpacking besides the fixed limits: its deadline and the
//! tree's final place ([`Limits`]), and what may follow the end of the tar
//! stream (zeros, up to [`MAX_PADDING`]; see the module doc of `unpack`).

use std::io::{self, Read};
use std::path::Path;
use std::time::{Duration, Instant};

use super::resolve::show;
use super::{corrupt, UnpackError};

/// At most this many zero bytes after the end-of-archive block.
pub const MAX_PADDING: u64 = 1 << 20;

/// What one unpacking may cost, besides the fixed bounds above.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// When unpacking must have finished.
    pub deadline: Instant,
    /// The time it was given, for messages.
    pub limit: Duration,
    /// The length in bytes of the path the tree will be used at (its final
    /// place, not the staging directory): every name must fit in PATH_MAX
    /// behind it.
    pub root_len: usize,
}

impl Limits {
    /// `limit` from now, for a tree that will be used at `root`.
    pub fn new(limit: Duration, root: &Path) -> Self {
        let now = Instant::now();
        let deadline = now.checked_add(limit).unwrap_or(now + Duration::from_secs(1 << 20));
        Self { deadline, limit, root_len: root.as_os_str().len() }
    }

    pub(super) fn check(&self, entry: &[u8]) -> Result<(), UnpackError> {
        if Instant::now() >= self.deadline {
            return Err(self.late(entry));
        }
        Ok(())
    }

    pub(super) fn late(&self, entry: &[u8]) -> UnpackError {
        UnpackError::TimedOut { entry: show(entry), limit: self.limit }
    }
}

/// The stream under the tar crate, noting whether it reached its end (the
/// crate reads whole blocks and stops at the first block of zeros, so it
/// reaches the end only when the end-of-archive block is missing).
pub(super) struct Ends<R> {
    pub(super) inner: R,
    pub(super) ended: bool,
}

impl<R: Read> Read for Ends<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.ended |= n == 0 && !buf.is_empty();
        Ok(n)
    }
}

/// Reads what follows the end-of-archive block: zeros up to
/// [`MAX_PADDING`], then the end of the stream.
pub(super) fn read_padding(rest: &mut impl Read, limits: &Limits) -> Result<(), UnpackError> {
    let end = b"(the end of the archive)";
    let mut buf = vec![0u8; 1 << 16];
    let mut seen = 0u64;
    loop {
        limits.check(end)?;
        let n = rest.read(&mut buf).map_err(corrupt)?;
        if n == 0 {
            return Ok(());
        }
        if let Some(i) = buf[..n].iter().position(|b| *b != 0) {
            return Err(UnpackError::Corrupt(format!(
                "byte {} after the end-of-archive block is not zero; only zero padding may \
                 follow the end (a second archive appended is not read)",
                seen + i as u64 + 1
            )));
        }
        seen += n as u64;
        if seen > MAX_PADDING {
            return Err(UnpackError::Corrupt(
                "more than 1 MiB of zeros follow the end-of-archive block".into(),
            ));
        }
    }
}
