//! Tar archives written header by header, so that each malicious case is
//! exactly the bytes it means to be: ustar and GNU headers, GNU long names
//! and links, PAX records, old-style GNU sparse entries.

use std::io::Write;

const BLOCK: usize = 512;

/// The header format of one entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ustar,
    Gnu,
}

/// One header's fields; `Default` is a ustar regular file, mode 0644.
#[derive(Clone)]
pub struct Head {
    pub name: Vec<u8>,
    pub prefix: Vec<u8>,
    pub kind: u8,
    pub size: u64,
    pub mode: u32,
    pub link: Vec<u8>,
    pub format: Format,
    /// GNU sparse: (offset, length) regions and the real size.
    pub sparse: Vec<(u64, u64)>,
    pub real_size: u64,
    pub extended: bool,
}

impl Default for Head {
    fn default() -> Self {
        Self {
            name: Vec::new(),
            prefix: Vec::new(),
            kind: b'0',
            size: 0,
            mode: 0o644,
            link: Vec::new(),
            format: Format::Ustar,
            sparse: Vec::new(),
            real_size: 0,
            extended: false,
        }
    }
}

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    assert!(text.len() == digits, "{value} does not fit in {digits} octal digits");
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}

fn put(field: &mut [u8], bytes: &[u8]) {
    assert!(bytes.len() <= field.len(), "{} bytes do not fit in {}", bytes.len(), field.len());
    field[..bytes.len()].copy_from_slice(bytes);
}

/// The 512 bytes of a header, checksum included.
pub fn header(h: &Head) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    // A name or link longer than its field is cut, as GNU tar does when a
    // long-name header or a PAX record carries the whole of it.
    put(&mut b[0..100], &h.name[..h.name.len().min(100)]);
    octal(&mut b[100..108], u64::from(h.mode));
    octal(&mut b[108..116], 0);
    octal(&mut b[116..124], 0);
    octal(&mut b[124..136], h.size);
    octal(&mut b[136..148], 1_700_000_000);
    b[156] = h.kind;
    put(&mut b[157..257], &h.link[..h.link.len().min(100)]);
    match h.format {
        Format::Ustar => {
            put(&mut b[257..263], b"ustar\0");
            put(&mut b[263..265], b"00");
            put(&mut b[345..500], &h.prefix);
        }
        Format::Gnu => {
            put(&mut b[257..265], b"ustar  \0");
            for (i, (off, len)) in h.sparse.iter().enumerate() {
                let at = 386 + i * 24;
                octal(&mut b[at..at + 12], *off);
                octal(&mut b[at + 12..at + 24], *len);
            }
            b[482] = u8::from(h.extended);
            octal(&mut b[483..495], h.real_size);
        }
    }
    put(&mut b[265..269], b"root");
    put(&mut b[297..301], b"root");
    b[148..156].copy_from_slice(b"        ");
    let sum: u32 = b.iter().map(|x| u32::from(*x)).sum();
    let text = format!("{sum:06o}\0 ");
    b[148..156].copy_from_slice(text.as_bytes());
    b
}

/// An archive being written.
#[derive(Default)]
pub struct Tar {
    pub bytes: Vec<u8>,
}

impl Tar {
    pub fn new() -> Self {
        Self::default()
    }

    /// A header and `data`, padded to whole blocks.
    pub fn raw(&mut self, h: &Head, data: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(&header(h));
        self.bytes.extend_from_slice(data);
        let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
        self.bytes.extend(std::iter::repeat_n(0u8, pad));
        self
    }

    pub fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.file_mode(name, data, 0o644)
    }

    pub fn file_mode(&mut self, name: &str, data: &[u8], mode: u32) -> &mut Self {
        let h = Head { name: name.into(), size: data.len() as u64, mode, ..Head::default() };
        self.raw(&h, data)
    }

    pub fn dir(&mut self, name: &str, mode: u32) -> &mut Self {
        self.raw(&Head { name: name.into(), kind: b'5', mode, ..Head::default() }, b"")
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> &mut Self {
        let h = Head {
            name: name.into(),
            kind: b'2',
            link: target.into(),
            mode: 0o777,
            ..Head::default()
        };
        self.raw(&h, b"")
    }

    pub fn hard_link(&mut self, name: &str, target: &str) -> &mut Self {
        let h = Head { name: name.into(), kind: b'1', link: target.into(), ..Head::default() };
        self.raw(&h, b"")
    }

    /// An entry of a type given by its flag (`3` char device, `4` block
    /// device, `6` fifo, ...), without data.
    pub fn special(&mut self, name: &str, kind: u8) -> &mut Self {
        self.raw(&Head { name: name.into(), kind, ..Head::default() }, b"")
    }

    /// A regular file under any name: a GNU long-name header first when
    /// the name does not fit the header's 100 bytes.
    pub fn named_file(&mut self, name: &[u8], data: &[u8]) -> &mut Self {
        if name.len() > 100 {
            self.gnu_long_name(name);
        }
        let h = Head { name: name.to_vec(), size: data.len() as u64, ..Head::default() };
        self.raw(&h, data)
    }

    /// A GNU long-name header (`L`) for the next entry.
    pub fn gnu_long_name(&mut self, name: &[u8]) -> &mut Self {
        self.gnu_long(b'L', name)
    }

    /// A GNU long-link header (`K`) for the next entry.
    pub fn gnu_long_link(&mut self, target: &[u8]) -> &mut Self {
        self.gnu_long(b'K', target)
    }

    fn gnu_long(&mut self, kind: u8, value: &[u8]) -> &mut Self {
        let mut data = value.to_vec();
        data.push(0);
        let h = Head {
            name: b"././@LongLink".to_vec(),
            kind,
            size: data.len() as u64,
            format: Format::Gnu,
            ..Head::default()
        };
        self.raw(&h, &data)
    }

    /// A PAX header (`x`) with these records for the next entry.
    pub fn pax(&mut self, records: &[(&str, &[u8])]) -> &mut Self {
        let data = pax_records(records);
        let h = Head {
            name: b"PaxHeaders/x".to_vec(),
            kind: b'x',
            size: data.len() as u64,
            ..Head::default()
        };
        self.raw(&h, &data)
    }

    /// The end: two zero blocks.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.bytes);
        out.extend(std::iter::repeat_n(0u8, 2 * BLOCK));
        out
    }
}

/// PAX records, each `<len> <key>=<value>\n` with `len` counting itself.
pub fn pax_records(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut data = Vec::new();
    for (key, value) in records {
        let rest = key.len() + value.len() + 3; // space, '=', newline
        let mut len = rest + 1;
        while len.to_string().len() + rest != len {
            len += 1;
        }
        data.extend_from_slice(format!("{len} {key}=").as_bytes());
        data.extend_from_slice(value);
        data.push(b'\n');
    }
    data
}

/// Gzip of `bytes`.
pub fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = enc.write_all(bytes);
    enc.finish().unwrap_or_default()
}
