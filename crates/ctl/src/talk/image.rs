//! Images the owner attaches to a line: checked, shown as chips, stored for
//! good as `memory/images/<sha256>.<ext>`, and named at the end of the line.
//!
//! Who writes `memory/images/`: the owner's client, here, before it writes
//! the line that names the image; the body may write there too (all of
//! `memory/` but the journal is its own). That cannot forge an owner's
//! image: only an owner line (which the kernel checks against the owner's
//! own file) names an image, and a name is the SHA-256 of the bytes, so a
//! file a body changed no longer matches its name and is not shown (the seed
//! body checks, and so does [`stored`]). A body can only remove an image.
//!
//! Invariants: an image is PNG, JPEG, GIF or WebP by its magic bytes,
//! whatever its name says; at most [`MAX_BYTES`] and [`MAX_PER_LINE`] to a
//! line; a file is stored by writing a dot-name beside it and renaming, so
//! no reader sees half an image. The decisions are pure; [`load`] and
//! [`store`] are the only I/O.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where images are stored, under the individual's root.
pub const DIR: &str = "memory/images";
/// The largest image.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The most images one line carries.
pub const MAX_PER_LINE: usize = 4;

/// Why an image was not attached.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{path} cannot be read ({source}); check the path")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not an image: only PNG, JPEG, GIF and WebP are attached")]
    NotAnImage { path: PathBuf },
    #[error("{path} is {} MB; an image is at most {} MB", .size >> 20, MAX_BYTES >> 20)]
    TooBig { path: PathBuf, size: u64 },
    #[error("a line carries at most {MAX_PER_LINE} images; send this one with the next line")]
    TooMany,
    #[error("the image cannot be stored in {dir} ({source}); nothing was sent")]
    Store { dir: PathBuf, source: io::Error },
}

/// An image's type, by its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl Kind {
    pub fn of(bytes: &[u8]) -> Option<Kind> {
        match bytes {
            [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some(Kind::Png),
            [0xff, 0xd8, 0xff, ..] => Some(Kind::Jpeg),
            [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some(Kind::Gif),
            [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some(Kind::Webp),
            _ => None,
        }
    }

    pub fn ext(self) -> &'static str {
        match self {
            Kind::Png => "png",
            Kind::Jpeg => "jpg",
            Kind::Gif => "gif",
            Kind::Webp => "webp",
        }
    }
}

/// An image ready to go with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub kind: Kind,
    pub bytes: Vec<u8>,
    /// Width and height, when the header says.
    pub size: Option<(usize, usize)>,
    /// SHA-256 of the bytes, in hex.
    pub hash: String,
}

impl Image {
    /// Checks `bytes` read from `path` (which names it in refusals).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Image, ImageError> {
        if bytes.len() as u64 > MAX_BYTES {
            return Err(ImageError::TooBig { path: path.to_owned(), size: bytes.len() as u64 });
        }
        let kind = Kind::of(&bytes).ok_or(ImageError::NotAnImage { path: path.to_owned() })?;
        let size = imagesize::blob_size(&bytes).ok().map(|s| (s.width, s.height));
        let hash = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        Ok(Image { kind, bytes, size, hash })
    }

    /// Where it is stored, relative to the individual's root.
    pub fn path(&self) -> String {
        format!("{DIR}/{}.{}", self.hash, self.kind.ext())
    }

    /// Its chip: `[image 1 · png · 1280×720 · 240 KB]` (`n` counts from 1).
    pub fn chip(&self, n: usize, utf8: bool) -> String {
        let (dot, by) = if utf8 { (" · ", "×") } else { (" - ", "x") };
        let mut parts = vec![format!("image {n}"), self.kind.ext().to_owned()];
        if let Some((w, h)) = self.size {
            parts.push(format!("{w}{by}{h}"));
        }
        parts.push(human_size(self.bytes.len() as u64));
        format!("[{}]", parts.join(dot))
    }
}

/// `240 KB`, `1.5 MB`, `512 B`.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{} KB", b.div_ceil(1024)),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// The text of a line sent with `images`: the typed text, then one image
/// line each.
pub fn line_text(text: &str, images: &[Image]) -> String {
    let mut out = text.trim_end().to_owned();
    for image in images {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("[image: {}]", image.path()));
    }
    out
}

/// The extension and hash of an image line of an owner line
/// (`[image: memory/images/<64 hex>.<ext>]`); `None` for any other line.
pub fn referenced(line: &str) -> Option<(&str, &str)> {
    let name = line.strip_prefix("[image: ")?.strip_suffix(']')?.strip_prefix(DIR)?;
    let (hash, ext) = name.strip_prefix('/')?.split_once('.')?;
    let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let known = matches!(ext, "png" | "jpg" | "gif" | "webp");
    (hex && known).then_some((ext, hash))
}

/// What a paste or a drop names, when it is one path: as it is, in quotes,
/// with backslash escapes, or as a `file://` URL. `None` for anything else.
pub fn pasted_path(text: &str) -> Option<PathBuf> {
    let t = text.trim();
    if t.is_empty() || t.contains('\n') {
        return None;
    }
    let unquoted = match (t.chars().next(), t.chars().last()) {
        (Some(q @ ('\'' | '"')), Some(e)) if q == e && t.len() >= 2 => t[1..t.len() - 1].to_owned(),
        _ => unescape(t),
    };
    let path = match unquoted.strip_prefix("file://") {
        Some(rest) => percent_decode(rest.strip_prefix("localhost").unwrap_or(rest))?,
        None => unquoted,
    };
    (path.starts_with('/') || path.starts_with("~/") || path.starts_with("./"))
        .then(|| PathBuf::from(path))
}

/// Removes backslash escapes (`a\ b` is `a b`).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// `%20` and the like, as a file URL writes them.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Reads and checks the image at `path` (`~/` is the home directory).
pub fn load(path: &Path) -> Result<Image, ImageError> {
    let path = match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    };
    let read = |source| ImageError::Read { path: path.clone(), source };
    let file = fs::File::open(&path).map_err(read)?;
    let size = file.metadata().map_err(read)?.len();
    if size > MAX_BYTES {
        return Err(ImageError::TooBig { path, size });
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(read)?;
    Image::from_bytes(&path, bytes)
}

/// Stores `image` under `home` unless a file with its bytes is there.
///
/// A body may write `memory/`, and this client runs with its owner's
/// rights: `memory/images` is opened beneath `home` following no link, the
/// file is made new there (`O_EXCL`, no link followed) and renamed within
/// that one directory, so nothing the body planted can send the bytes
/// anywhere else.
pub fn store(home: &Path, image: &Image) -> Result<(), ImageError> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let dir = home.join(DIR);
    let failed = |source: io::Error| ImageError::Store { dir: dir.clone(), source };
    let errno = |e: rustix::io::Errno| failed(io::Error::from(e));
    let name = format!("{}.{}", image.hash, image.kind.ext());
    if stored(&dir.join(&name), &image.hash) {
        return Ok(());
    }
    fs::create_dir_all(&dir).map_err(failed)?;
    let base =
        rustix::fs::open(home, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(errno)?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let images = rustix::fs::openat2(&base, DIR, flags, Mode::empty(), resolve).map_err(errno)?;
    let temp = format!(".{}.{}.tmp", image.hash, std::process::id());
    let _ = rustix::fs::unlinkat(&images, &temp, rustix::fs::AtFlags::empty());
    let create =
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        rustix::fs::openat(&images, &temp, create, Mode::from_raw_mode(0o644)).map_err(errno)?;
    let mut file = fs::File::from(fd);
    let written = file.write_all(&image.bytes).and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| {
        rustix::fs::renameat(&images, &temp, &images, &name).map_err(io::Error::from)
    });
    renamed.map_err(|e| {
        let _ = rustix::fs::unlinkat(&images, &temp, rustix::fs::AtFlags::empty());
        failed(e)
    })
}

/// Whether the file at `path` holds bytes whose SHA-256 is `hash`: a
/// regular file, reached by no link at its end (a FIFO a body left there
/// does not block the client).
pub fn stored(path: &Path, hash: &str) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return false };
    crate::fsutil::read_beneath(dir, Path::new(name), MAX_BYTES).is_ok_and(|bytes| {
        Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>() == hash
    })
}

#[cfg(test)]
mod tests;
