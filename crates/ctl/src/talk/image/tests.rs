//! Images: kinds, chips, paths pasted, loading and storing.

use super::*;

/// A 2×1 PNG header is enough for the kind and the size.
fn png() -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    b.extend_from_slice(b"IHDR");
    b.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 1, 8, 6, 0, 0, 0]);
    b.extend_from_slice(&[0; 4]);
    b
}

#[test]
fn kinds_by_magic_bytes() {
    let table: &[(&[u8], Option<Kind>)] = &[
        (&png(), Some(Kind::Png)),
        (b"\xff\xd8\xff\xe0rest", Some(Kind::Jpeg)),
        (b"GIF87a....", Some(Kind::Gif)),
        (b"GIF89a....", Some(Kind::Gif)),
        (b"RIFF\x10\0\0\0WEBPVP8 ", Some(Kind::Webp)),
        (b"RIFF\x10\0\0\0WAVEfmt ", None),
        (b"%PDF-1.7", None),
        (b"just text", None),
        (b"", None),
    ];
    for (bytes, want) in table {
        assert_eq!(Kind::of(bytes), *want, "{bytes:?}");
    }
}

#[test]
fn a_chip_says_what_goes() {
    let image = Image::from_bytes(Path::new("/x.png"), png()).expect("a png");
    assert_eq!(image.size, Some((2, 1)));
    assert_eq!(image.chip(1, true), "[image 1 · png · 2×1 · 33 B]");
    assert_eq!(image.chip(2, false), "[image 2 - png - 2x1 - 33 B]");
    assert_eq!(human_size(240 * 1024), "240 KB");
    assert_eq!(human_size(3 * 1024 * 1024 / 2), "1.5 MB");
    assert_eq!(image.path(), format!("memory/images/{}.png", image.hash));
    assert_eq!(image.hash.len(), 64);
}

#[test]
fn the_line_ends_with_one_image_line_each() {
    let image = Image::from_bytes(Path::new("/x.png"), png()).expect("a png");
    let line = format!("[image: memory/images/{}.png]", image.hash);
    assert_eq!(line_text("look\n", std::slice::from_ref(&image)), format!("look\n{line}"));
    assert_eq!(line_text("", &[image.clone(), image]), format!("{line}\n{line}"));
}

#[test]
fn pasted_paths_table() {
    let table = [
        ("/home/ada/a.png", Some("/home/ada/a.png")),
        ("  '/home/ada/my shot.png'  ", Some("/home/ada/my shot.png")),
        ("\"/tmp/a b.png\"", Some("/tmp/a b.png")),
        ("/tmp/my\\ shot\\ 1.png", Some("/tmp/my shot 1.png")),
        ("file:///tmp/my%20shot.png", Some("/tmp/my shot.png")),
        ("file://localhost/tmp/a.png", Some("/tmp/a.png")),
        ("~/Pictures/a.png", Some("~/Pictures/a.png")),
        ("hello world", None),
        ("/tmp/a.png\n/tmp/b.png", None),
        ("file:///tmp/bad%zz.png", None),
        ("", None),
    ];
    for (text, want) in table {
        assert_eq!(pasted_path(text), want.map(PathBuf::from), "{text:?}");
    }
}

#[test]
fn loading_refuses_what_is_no_image_or_too_big() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let text = dir.path().join("notes.png");
    fs::write(&text, "not a picture").expect("a file");
    let e = load(&text).expect_err("text is refused");
    assert!(matches!(e, ImageError::NotAnImage { .. }), "{e}");
    assert!(e.to_string().contains("is not an image: only PNG, JPEG, GIF and WebP"), "{e}");
    let big = dir.path().join("big.png");
    let file = fs::File::create(&big).expect("a file");
    file.set_len(MAX_BYTES + 1).expect("a sparse file");
    let e = load(&big).expect_err("too big");
    assert!(e.to_string().contains("an image is at most 10 MB"), "{e}");
    let e = load(&dir.path().join("gone.png")).expect_err("missing");
    assert_eq!(e.to_string().matches("gone.png").count(), 1, "named once: {e}");
}

#[test]
fn storing_writes_once_and_mends_a_changed_file() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let image = Image::from_bytes(Path::new("/x.png"), png()).expect("a png");
    store(dir.path(), &image).expect("stored");
    let at = dir.path().join(image.path());
    assert_eq!(fs::read(&at).expect("the stored image"), png());
    assert!(stored(&at, &image.hash));
    fs::write(&at, b"GIF89a a body's picture").expect("changed");
    assert!(!stored(&at, &image.hash), "a changed file no longer matches its name");
    store(dir.path(), &image).expect("stored again");
    assert_eq!(fs::read(&at).expect("the stored image"), png());
    let left: Vec<_> = fs::read_dir(dir.path().join(DIR)).expect("the dir").flatten().collect();
    assert_eq!(left.len(), 1, "no temp file left: {left:?}");
}

/// A body writes `memory/`; the client stores with its owner's rights, so
/// nothing planted there may send the bytes anywhere else.
#[test]
fn what_a_body_planted_in_memory_does_not_redirect_the_store() {
    let image = Image::from_bytes(Path::new("/x.png"), png()).expect("a png");
    // memory/images as a link to another directory of the owner's: ELOOP.
    let dir = tempfile::tempdir().expect("a temp dir");
    let elsewhere = tempfile::tempdir().expect("another dir");
    fs::create_dir_all(dir.path().join("memory")).expect("memory/");
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(DIR)).expect("a link");
    let e = store(dir.path(), &image).expect_err("a link is not followed");
    assert!(e.to_string().contains("Too many levels of symbolic links"), "{e}");
    assert_eq!(fs::read_dir(elsewhere.path()).expect("the dir").count(), 0, "nothing written");
    // A link at the temporary name: removed, not followed.
    let dir = tempfile::tempdir().expect("a temp dir");
    fs::create_dir_all(dir.path().join(DIR)).expect("memory/images");
    let victim = dir.path().join("victim");
    fs::write(&victim, b"the owner's file").expect("the victim");
    let temp = format!(".{}.{}.tmp", image.hash, std::process::id());
    std::os::unix::fs::symlink(&victim, dir.path().join(DIR).join(temp)).expect("a link");
    store(dir.path(), &image).expect("stored beside the link");
    assert_eq!(fs::read(&victim).expect("the victim"), b"the owner's file");
    assert_eq!(fs::read(dir.path().join(image.path())).expect("the image"), png());
    // A FIFO at the image's name does not block the check.
    let dir = tempfile::tempdir().expect("a temp dir");
    fs::create_dir_all(dir.path().join(DIR)).expect("memory/images");
    let at = dir.path().join(image.path());
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &at,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("a fifo");
    assert!(!stored(&at, &image.hash), "a FIFO is no stored image, and no wait");
}
