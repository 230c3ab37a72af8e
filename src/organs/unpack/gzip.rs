//! A gzip stream read member by member, each member's trailer checked.
//!
//! flate2's decoders check a member's CRC32 and length only when they are
//! read to their end, and say "checksum" for both; this reader decodes with
//! flate2's raw inflater instead and checks every member itself, so each
//! failure has its own message: a header that is not gzip, corrupt deflate
//! data, a stream cut inside a member's data or its 8-byte trailer, a CRC32
//! or a length (ISIZE) that disagrees with the data. After the last member
//! only the end of the file may come: any other byte (zeros included) is
//! refused, because what follows a member must be another member.

use std::io::{self, BufRead, Read};

use flate2::{Crc, Decompress, FlushDecompress, Status};

/// What is wrong with a gzip stream. Members count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GzipError {
    #[error("it does not start with a gzip header (bytes 1f 8b 08)")]
    NotGzip,
    #[error("member {member}: its header is malformed ({what})")]
    Header { member: u32, what: &'static str },
    #[error("member {member}: the stream ends inside its header")]
    CutHeader { member: u32 },
    #[error("member {member}: its compressed data is corrupt ({what})")]
    Deflate { member: u32, what: String },
    #[error("member {member}: the stream ends inside its compressed data")]
    CutData { member: u32 },
    #[error(
        "member {member}: the stream ends inside its 8-byte trailer ({got} bytes of it are there)"
    )]
    CutTrailer { member: u32, got: usize },
    #[error(
        "member {member}: its trailer gives CRC32 {stored:08x}, but its data has {actual:08x}"
    )]
    Crc { member: u32, stored: u32, actual: u32 },
    #[error(
        "member {member}: its trailer gives a length (ISIZE) of {stored} bytes, but its data \
         has {actual} (mod 2^32)"
    )]
    Length { member: u32, stored: u32, actual: u32 },
    #[error("after member {member}: bytes that are not another gzip member")]
    Trailing { member: u32 },
}

impl GzipError {
    /// The `GzipError` an I/O error from this reader carries, looked for
    /// through the sources of wrapping errors (the tar crate wraps them).
    pub fn within(e: &io::Error) -> Option<&GzipError> {
        let mut at: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|r| r as _);
        while let Some(err) = at {
            if let Some(found) = err.downcast_ref::<GzipError>() {
                return Some(found);
            }
            at = err.source();
        }
        None
    }
}

impl From<GzipError> for io::Error {
    fn from(e: GzipError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At a member's start (or the end of the stream after one).
    Header,
    Body,
    Done,
}

/// The decompressed bytes of every member of a gzip stream, in order.
pub struct GzipReader<R> {
    inner: R,
    state: State,
    member: u32,
    inflate: Decompress,
    crc: Crc,
    failed: Option<GzipError>,
}

/// ID1, ID2 and CM (deflate), the first bytes of every member.
const MAGIC: [u8; 3] = [0x1f, 0x8b, 8];
const FTEXT_AND_KNOWN: u8 = 0x1f;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;

impl<R: BufRead> GzipReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            state: State::Header,
            member: 0,
            inflate: Decompress::new(false),
            crc: Crc::new(),
            failed: None,
        }
    }

    /// The compressed stream, wherever reading stopped.
    pub fn into_inner(self) -> R {
        self.inner
    }

    fn fail(&mut self, e: GzipError) -> io::Error {
        self.failed = Some(e.clone());
        self.state = State::Done;
        e.into()
    }

    /// Reads exactly `buf.len()` bytes; how many there were if the stream ends.
    fn take(&mut self, buf: &mut [u8], header: &mut Crc) -> io::Result<Result<(), usize>> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.inner.read(&mut buf[got..])?;
            if n == 0 {
                return Ok(Err(got));
            }
            header.update(&buf[got..got + n]);
            got += n;
        }
        Ok(Ok(()))
    }

    /// Skips a NUL-terminated field of the header.
    fn skip_text(&mut self, header: &mut Crc) -> io::Result<Result<(), usize>> {
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok(Err(0));
            }
            let (n, end) = match buf.iter().position(|b| *b == 0) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            header.update(&buf[..n]);
            self.inner.consume(n);
            if end {
                return Ok(Ok(()));
            }
        }
    }

    /// Reads a member's header; `Ok(false)` at the end of the stream.
    fn header(&mut self) -> Result<bool, GzipError> {
        let member = self.member + 1;
        let io = |e: io::Error| GzipError::Deflate { member, what: e.to_string() };
        let cut = |_| GzipError::CutHeader { member };
        if self.member > 0 && self.inner.fill_buf().map_err(io)?.is_empty() {
            return Ok(false);
        }
        self.member = member;
        let mut sum = Crc::new();
        let mut fixed = [0u8; 10];
        let have = self.take(&mut fixed, &mut sum).map_err(io)?.err().unwrap_or(fixed.len());
        let k = have.min(MAGIC.len());
        if have == 0 || fixed[..k] != MAGIC[..k] {
            return Err(match member {
                1 => GzipError::NotGzip,
                _ => GzipError::Trailing { member: member - 1 },
            });
        }
        if have < fixed.len() {
            return Err(cut(have));
        }
        let flags = fixed[3];
        if flags & !FTEXT_AND_KNOWN != 0 {
            return Err(GzipError::Header { member, what: "reserved flag bits are set" });
        }
        if flags & FEXTRA != 0 {
            let mut len = [0u8; 2];
            self.take(&mut len, &mut sum).map_err(io)?.map_err(cut)?;
            let mut extra = vec![0u8; usize::from(u16::from_le_bytes(len))];
            self.take(&mut extra, &mut sum).map_err(io)?.map_err(cut)?;
        }
        for flag in [FNAME, FCOMMENT] {
            if flags & flag != 0 {
                self.skip_text(&mut sum).map_err(io)?.map_err(cut)?;
            }
        }
        if flags & FHCRC != 0 {
            let want = (sum.sum() & 0xffff) as u16;
            let mut crc16 = [0u8; 2];
            self.take(&mut crc16, &mut Crc::new()).map_err(io)?.map_err(cut)?;
            if u16::from_le_bytes(crc16) != want {
                return Err(GzipError::Header { member, what: "its header CRC16 is wrong" });
            }
        }
        self.inflate.reset(false);
        self.crc.reset();
        Ok(true)
    }

    /// Reads and checks a member's trailer: CRC32, then ISIZE.
    fn trailer(&mut self) -> Result<(), GzipError> {
        let member = self.member;
        let mut buf = [0u8; 8];
        self.take(&mut buf, &mut Crc::new())
            .map_err(|e| GzipError::Deflate { member, what: e.to_string() })?
            .map_err(|got| GzipError::CutTrailer { member, got })?;
        let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let length = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        if stored != self.crc.sum() {
            return Err(GzipError::Crc { member, stored, actual: self.crc.sum() });
        }
        if length != self.crc.amount() {
            return Err(GzipError::Length { member, stored: length, actual: self.crc.amount() });
        }
        Ok(())
    }

    /// Inflates into `out`: `Some(n)` bytes made, or `None` when the member
    /// ended without making any.
    fn body(&mut self, out: &mut [u8]) -> Result<Option<usize>, GzipError> {
        let member = self.member;
        loop {
            let input = self
                .inner
                .fill_buf()
                .map_err(|e| GzipError::Deflate { member, what: e.to_string() })?;
            let eof = input.is_empty();
            let (in0, out0) = (self.inflate.total_in(), self.inflate.total_out());
            let status = self
                .inflate
                .decompress(input, out, FlushDecompress::None)
                .map_err(|e| GzipError::Deflate { member, what: e.to_string() })?;
            let used = (self.inflate.total_in() - in0) as usize;
            let made = (self.inflate.total_out() - out0) as usize;
            self.inner.consume(used);
            self.crc.update(&out[..made]);
            if status == Status::StreamEnd {
                self.trailer()?;
                self.state = State::Header;
                return Ok((made > 0).then_some(made));
            }
            if made > 0 {
                return Ok(Some(made));
            }
            if eof {
                return Err(GzipError::CutData { member });
            }
            if used == 0 {
                let what = "the inflater makes no progress".to_owned();
                return Err(GzipError::Deflate { member, what });
            }
        }
    }
}

impl<R: BufRead> Read for GzipReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(e.clone().into());
        }
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Header => match self.header() {
                    Ok(true) => self.state = State::Body,
                    Ok(false) => {
                        self.state = State::Done;
                        return Ok(0);
                    }
                    Err(e) => return Err(self.fail(e)),
                },
                State::Body => match self.body(out) {
                    Ok(Some(n)) => return Ok(n),
                    Ok(None) => {}
                    Err(e) => return Err(self.fail(e)),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = enc.write_all(data);
        enc.finish().unwrap_or_default()
    }

    fn read(bytes: &[u8]) -> Result<Vec<u8>, GzipError> {
        let mut out = Vec::new();
        match GzipReader::new(bytes).read_to_end(&mut out) {
            Ok(_) => Ok(out),
            Err(e) => Err(GzipError::within(&e).cloned().unwrap_or(GzipError::NotGzip)),
        }
    }

    #[test]
    fn members_are_read_in_order_and_each_trailer_checked() {
        let mut two = gz(b"hello ");
        two.extend(gz(b"world"));
        let named = {
            let mut enc = flate2::GzBuilder::new()
                .filename("x.tar")
                .comment("c")
                .extra(vec![1, 2, 3])
                .write(Vec::new(), flate2::Compression::default());
            let _ = enc.write_all(b"named");
            enc.finish().unwrap_or_default()
        };
        let one = gz(b"data");
        let n = one.len();
        let patch = |at: usize, x: u8| {
            let mut b = one.clone();
            b[at] ^= x;
            b
        };
        type Case<'a> = (&'a str, Vec<u8>, Result<&'a [u8], GzipError>);
        let cases: Vec<Case<'_>> = vec![
            ("two members", two.clone(), Ok(b"hello world")),
            ("header fields", named, Ok(b"named")),
            ("empty", vec![], Err(GzipError::NotGzip)),
            ("not gzip", b"plain tar".to_vec(), Err(GzipError::NotGzip)),
            ("crc", patch(n - 8, 1), Err(GzipError::Crc { member: 1, stored: 0, actual: 0 })),
            ("length", patch(n - 4, 1), Err(GzipError::Length { member: 1, stored: 5, actual: 4 })),
            (
                "cut trailer",
                one[..n - 3].to_vec(),
                Err(GzipError::CutTrailer { member: 1, got: 5 }),
            ),
            ("cut data", one[..12].to_vec(), Err(GzipError::CutData { member: 1 })),
            ("cut header", one[..5].to_vec(), Err(GzipError::CutHeader { member: 1 })),
            ("reserved flag", patch(3, 0x80), Err(GzipError::Header { member: 1, what: "" })),
            ("zero after", [one.clone(), vec![0]].concat(), Err(GzipError::Trailing { member: 1 })),
            (
                "junk after",
                [two, b"junk".to_vec()].concat(),
                Err(GzipError::Trailing { member: 2 }),
            ),
        ];
        for (case, bytes, want) in cases {
            let got = read(&bytes);
            // CRC values and the reserved-flag text are compared by kind.
            let same = match (&got, &want) {
                (Err(GzipError::Crc { member: a, .. }), Err(GzipError::Crc { member: b, .. })) => {
                    a == b
                }
                (Err(GzipError::Header { .. }), Err(GzipError::Header { .. })) => true,
                (got, want) => got.as_deref() == want.as_ref().map(|w| &w[..]),
            };
            assert!(same, "{case}: got {got:?}, want {want:?}");
        }
    }
}
