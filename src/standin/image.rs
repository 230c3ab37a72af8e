//! The images of a request, checked as the real service checks them: an
//! `http(s)` address is taken as it is (the stand-in fetches nothing); a data
//! URL must name an image type, hold valid base64, and decode to bytes that
//! are an image of that type (by their magic bytes) and at most
//! [`MAX_BYTES`]. Pure: no I/O.

use base64::Engine;

use super::wire::ApiError;

/// The media types a data URL may name.
pub const TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The largest image the stand-in takes, as the owner's client stores them.
pub const MAX_BYTES: usize = 10 * 1024 * 1024;

/// The media type of `bytes` by their magic bytes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some("image/png"),
        [0xff, 0xd8, 0xff, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        _ => None,
    }
}

/// Checks the image address at `path` of the request.
pub fn check_url(url: &str, path: &str) -> Result<(), ApiError> {
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(());
    }
    let shape = || {
        ApiError::invalid(
            format!(
                "Invalid '{path}'. Expected a base64-encoded data URL with an image MIME type \
                 (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value that is \
                 not one."
            ),
            Some(path),
            Some("invalid_value"),
        )
    };
    let rest = url.strip_prefix("data:").ok_or_else(shape)?;
    let (media, data) = rest.split_once(";base64,").ok_or_else(shape)?;
    if !TYPES.contains(&media) {
        return Err(ApiError::bad_value(path, media, TYPES));
    }
    // Four base64 characters hold three bytes: refuse before decoding.
    if data.len() / 4 * 3 > MAX_BYTES + 3 {
        return Err(too_big(path));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).map_err(|_| shape())?;
    if bytes.len() > MAX_BYTES {
        return Err(too_big(path));
    }
    match sniff(&bytes) {
        Some(found) if found == media => Ok(()),
        _ => Err(ApiError::invalid(
            format!(
                "You uploaded an unsupported image at '{path}'. Please make sure your image is \
                 valid: its bytes are not {media}."
            ),
            Some(path),
            Some("invalid_image_format"),
        )),
    }
}

fn too_big(path: &str) -> ApiError {
    ApiError::invalid(
        format!("Invalid '{path}': the image is larger than {} MB.", MAX_BYTES >> 20),
        Some(path),
        Some("image_too_large"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(media: &str, bytes: &[u8]) -> String {
        format!("data:{media};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    #[test]
    fn taken_and_refused() {
        let png = b"\x89PNG\r\n\x1a\n rest of a png";
        assert!(check_url(&url("image/png", png), "p").is_ok());
        assert!(check_url(&url("image/gif", b"GIF87a..."), "p").is_ok());
        assert!(check_url(&url("image/webp", b"RIFF\0\0\0\0WEBPVP8 "), "p").is_ok());
        assert!(check_url(&url("image/jpeg", b"\xff\xd8\xff\xe0"), "p").is_ok());
        assert!(check_url("https://example.com/a.png", "p").is_ok());
        let refused = [
            (url("image/png", b"plain text"), "invalid_image_format"),
            (url("image/jpeg", png), "invalid_image_format"),
            (url("text/plain", b"hi"), "invalid_value"),
            ("data:image/png;base64,@@@".to_owned(), "invalid_value"),
            ("file:///etc/passwd".to_owned(), "invalid_value"),
            (url("image/png", &vec![0x89; MAX_BYTES + 1]), "image_too_large"),
        ];
        for (url, code) in refused {
            let e = check_url(&url, "messages[1].content[1].image_url.url").expect_err("refused");
            assert_eq!((e.status, e.code.as_deref()), (400, Some(code)), "{}", e.message);
            assert_eq!(e.param.as_deref(), Some("messages[1].content[1].image_url.url"));
        }
    }
}
