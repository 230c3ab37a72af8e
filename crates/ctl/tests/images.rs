//! Images in a real terminal (see `common`): by a pasted path, by
//! `/image`, a file that is no image and a fifth image refused, Ctrl+V with
//! no display, and the plain client's `/image`.
#![allow(clippy::expect_used, clippy::panic)]
mod common;

use common::*;
use teneral_testkit::PNG;

#[test]
fn images_by_a_pasted_path_and_by_the_image_command() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let files = tempfile::tempdir().expect("a temp dir for the images");
    let shot = files.path().join("my shot.png");
    std::fs::write(&shot, PNG).expect("a png");
    let gif: &[u8] = b"GIF89a\x02\x00\x03\x00\x00\x00\x00;";
    let anim = files.path().join("anim.gif");
    std::fs::write(&anim, gif).expect("a gif");
    let notes = files.path().join("notes.png");
    std::fs::write(&notes, "text under a picture's name").expect("a text file");

    let tmux = talk_terminal(home, &[]);
    tmux.wait_for("lists the commands");
    tmux.paste(&format!("'{}'", shot.display()));
    tmux.wait_for("[image 1 · png · 1×1 · 70 B]");
    tmux.type_text(&format!("/image {}", anim.display()));
    tmux.keys(&["Enter"]);
    tmux.wait_for("[image 1 · png · 1×1 · 70 B] [image 2 · gif · 2×3 · 14 B]");
    tmux.type_text(&format!("/image {}", notes.display()));
    tmux.keys(&["Enter"]);
    tmux.wait_for("is not an image: only PNG, JPEG, GIF and WebP");
    assert!(owner_files(home, "txt").is_empty(), "nothing was sent yet");
    tmux.type_text("what are these?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("your line waits");
    let sent = owner_files(home, "txt");
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (png_at, gif_at) = (
        format!("memory/images/{}.png", sha256(PNG)),
        format!("memory/images/{}.gif", sha256(gif)),
    );
    assert_eq!(
        std::fs::read_to_string(&sent[0]).expect("the line"),
        format!("what are these?\n[image: {png_at}]\n[image: {gif_at}]")
    );
    assert_eq!(std::fs::read(home.join(&png_at)).expect("the png stored"), PNG);
    assert_eq!(std::fs::read(home.join(&gif_at)).expect("the gif stored"), gif);

    for n in 1..=4 {
        tmux.type_text(&format!("/image {}", shot.display()));
        tmux.keys(&["Enter"]);
        tmux.wait_for(&format!("[image {n} · png"));
    }
    tmux.type_text(&format!("/image {}", anim.display()));
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("a line carries at most 4 images");
    assert!(!screen.contains("[image 5"), "{screen}");
    tmux.keys(&["BSpace"]);
    let screen = tmux.wait_for("the last image was taken off");
    assert!(!screen.contains("[image 4 · png"), "{screen}");
}

#[test]
fn ctrl_v_without_a_display_says_what_to_do() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = talk_terminal(dir.path(), &[("DISPLAY", ""), ("WAYLAND_DISPLAY", "")]);
    tmux.wait_for("lists the commands");
    tmux.keys(&["C-v"]);
    tmux.wait_for("Ctrl+V: no display here; paste the image's path or use /image <path>");
}

#[test]
fn the_plain_client_attaches_images_too() {
    if !system_tests() {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let files = tempfile::tempdir().expect("a temp dir for the images");
    let shot = files.path().join("shot.png");
    std::fs::write(&shot, PNG).expect("a png");
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, "not a picture").expect("a text file");
    let tmux = talk_terminal_with(home, &[], &["--plain"]);
    tmux.wait_for("/help lists the commands");
    tmux.type_text(&format!("/image {}", notes.display()));
    tmux.keys(&["Enter"]);
    tmux.wait_for("is not an image");
    tmux.type_text(&format!("/image {}", shot.display()));
    tmux.keys(&["Enter"]);
    tmux.wait_for("[attached [image 1 · png · 1×1 · 70 B]");
    tmux.type_text("and this?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("[teneral is not running: your line waits");
    let sent = owner_files(home, "txt");
    let png_at = format!("memory/images/{}.png", sha256(PNG));
    assert_eq!(
        std::fs::read_to_string(&sent[0]).expect("the line"),
        format!("and this?\n[image: {png_at}]")
    );
}
