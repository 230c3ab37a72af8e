//! The owner's images: an owner line ends with one `[image:
//! memory/images/<sha256>.<ext>]` line per image its client stored, and the
//! model is shown each image beside the line's text.
//!
//! An image's name is the SHA-256 of its bytes. The client writes it, and
//! the body may write `memory/` too; so an image is shown only when its
//! bytes still hash to its name, are at most [`MAX_BYTES`], and begin with
//! the magic bytes of the type its extension names. Anything else is shown
//! to the model as a line saying why the image is missing, never as an
//! image: a body cannot make an owner's line show a picture the owner did
//! not send. Only owner lines carry images; the same text from anyone else
//! is just text.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::model::{Image, Item};

/// Where the client stores the owner's images, under the individual's root.
pub const DIR: &str = "memory/images";
/// The largest image shown.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The most images one owner line carries.
pub const MAX_PER_LINE: usize = 4;

/// The media type of an image's bytes, by their magic bytes.
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some("image/png"),
        [0xff, 0xd8, 0xff, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        _ => None,
    }
}

/// The media type an extension names.
fn media_type_of_ext(ext: &str) -> Option<&'static str> {
    match ext {
        "png" => Some("image/png"),
        "jpg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// The path of an image line (`[image: memory/images/<64 hex>.<ext>]`),
/// or `None` when the line is not one.
pub fn reference(line: &str) -> Option<&str> {
    let path = line.strip_prefix("[image: ")?.strip_suffix(']')?;
    let name = path.strip_prefix(DIR)?.strip_prefix('/')?;
    let (hash, ext) = name.split_once('.')?;
    let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (hex && media_type_of_ext(ext).is_some()).then_some(path)
}

/// Reads the image at `path` (relative to `home`) and checks it.
pub fn load(home: &Path, path: &str) -> Result<Image, String> {
    let name = path.rsplit('/').next().unwrap_or_default();
    let (hash, ext) = name.split_once('.').unwrap_or_default();
    let want = media_type_of_ext(ext).ok_or("its extension names no image type")?;
    let file = File::open(home.join(path)).map_err(|e| format!("it cannot be read ({e})"))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("it cannot be read ({e})"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("it is larger than {} MB", MAX_BYTES >> 20));
    }
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != hash {
        return Err("its bytes no longer match its name (changed after the owner sent it)".into());
    }
    if media_type(&bytes) != Some(want) {
        return Err(format!("its bytes are not {want}"));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(Image { media_type: want, data })
}

/// The owner's lines of `items` with their images: a line with image lines
/// becomes [`Item::UserImages`]; an image that cannot be shown stays a line
/// saying why.
pub fn attach(home: &Path, items: Vec<Item>) -> Vec<Item> {
    items
        .into_iter()
        .map(|item| match item {
            Item::Owner(text) => with_images(home, text),
            other => other,
        })
        .collect()
}

fn with_images(home: &Path, text: String) -> Item {
    let mut images = Vec::new();
    let mut lines = Vec::new();
    for line in text.split('\n') {
        let Some(path) = reference(line) else {
            lines.push(line.to_owned());
            continue;
        };
        if images.len() == MAX_PER_LINE {
            lines.push(format!("{line} (not shown: at most {MAX_PER_LINE} images a line)"));
            continue;
        }
        match load(home, path) {
            Ok(image) => {
                lines.push(line.to_owned());
                images.push(image);
            }
            Err(why) => lines.push(format!("{line} (not shown: {why})")),
        }
    }
    let text = lines.join("\n");
    if images.is_empty() {
        Item::User(text)
    } else {
        Item::UserImages { text, images }
    }
}
