//! The full client in a real terminal: tmux runs `teneralctl talk` against a
//! journal the test writes, `send-keys` types and `capture-pane` reads the
//! screen. Each test has a tmux server of its own (`tmux -L`), killed when
//! the test ends.
//!
//! They are system tests: they need tmux (`scripts/deps` installs it) and
//! run when `TENERAL_SYSTEM_TESTS` is set, as `scripts/test` sets it. A
//! gate's check of a species commit leaves them out, as it leaves out the
//! kernel's other system tests.
#![allow(clippy::expect_used, clippy::panic)]
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// One tmux server running one client.
struct Tmux {
    socket: String,
    /// tmux's own directory for its socket (TMUX_TMPDIR), not /tmp's.
    dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `teneralctl talk -d home` in an 80x30 terminal with `env`.
    fn start(home: &Path, env: &[(&str, &str)]) -> Tmux {
        Tmux::start_with(home, env, &[])
    }

    /// Starts `teneralctl talk -d home` with `args` after it.
    fn start_with(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("talk-test-{}-{n}", std::process::id());
        let dir = tempfile::tempdir().expect("a temp dir for tmux");
        let tmux = Tmux { socket, dir };
        let mut line = String::from("env -u NO_COLOR -u COLORTERM LANG=C.UTF-8 LC_ALL= LC_CTYPE=");
        for (k, v) in env {
            line.push_str(&format!(" {k}={v}"));
        }
        line.push_str(&format!(
            " {} talk -d {} {}; sleep 600",
            env!("CARGO_BIN_EXE_teneralctl"),
            home.display(),
            args.join(" ")
        ));
        let out = tmux.run(&["new-session", "-d", "-x", "80", "-y", "30", &line]);
        assert!(out.status.success(), "tmux starts: {out:?}");
        tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .env("TMUX_TMPDIR", self.dir.path())
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs (scripts/deps installs it)")
    }

    /// Presses keys as tmux names them (`Enter`, `C-d`, `Escape`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// Types `text` as it is.
    fn type_text(&self, text: &str) {
        assert!(self.run(&["send-keys", "-t", "0", "-l", text]).status.success());
    }

    /// The screen as text (`escapes`: with its colours as SGR sequences).
    fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "0", "-S", "-200"];
        if escapes {
            args.push("-e");
        }
        String::from_utf8_lossy(&self.run(&args).stdout).into_owned()
    }

    /// Waits until the screen contains every one of `texts` (lines are
    /// printed one after the other, and the live region drawn apart);
    /// returns the screen.
    fn wait_for_all(&self, texts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen(false);
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{texts:?} never all showed; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the screen contains `text`; returns the screen.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen(false);
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{text:?} never showed; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// An individual with a soul, settings and a journal of `events` (JSON
/// objects without `ts`, `seq` and `commit`, which are added).
/// Whether system tests run; says why not when they do not.
fn system_tests(name: &str) -> bool {
    let on = std::env::var_os("TENERAL_SYSTEM_TESTS").is_some();
    if !on {
        eprintln!(
            "{name}: skipped, a system test (set TENERAL_SYSTEM_TESTS=1, as scripts/test does)"
        );
    }
    on
}

fn individual(events: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path();
    for sub in ["memory", "soul", ".teneral"] {
        std::fs::create_dir_all(home.join(sub)).expect("the individual's directories");
    }
    std::fs::write(home.join("soul/self.md"), "name: Ada\n").expect("a soul");
    std::fs::write(home.join(".env"), "TENERAL_MODEL=gpt-test\nTENERAL_API_KEY=do-not-show\n")
        .expect("settings");
    append(home, events);
    dir
}

/// Appends `events` to the journal, as a kernel would.
fn append(home: &Path, events: &[&str]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join("memory/journal.jsonl"))
        .expect("the journal");
    for (i, e) in events.iter().enumerate() {
        let head = format!(
            r#"{{"ts":"2026-11-30T10:00:{:02}.{:03}Z","seq":{i},"commit":"{COMMIT}","#,
            i / 1000 % 60,
            (i * 400) % 1000
        );
        let line = format!("{head}{}\n", e.trim_start_matches('{'));
        file.write_all(line.as_bytes()).expect("an event appended");
    }
}

fn owner_files(home: &Path, ext: &str) -> Vec<PathBuf> {
    match std::fs::read_dir(home.join(".teneral/owner")) {
        Ok(dir) => dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect(),
        Err(_) => Vec::new(),
    }
}

const CONVERSATION: &[&str] = &[
    r#"{"type":"owner.line","file":"a.txt","text":"What are you working on?"}"#,
    r#"{"type":"tool.call","id":"1","name":"bash","input":{"command":"ls -la"}}"#,
    r#"{"type":"tool.result","id":"1","output":"total 0"}"#,
    r##"{"type":"reply","text":"# Plan\n\nI am *reading* my **soul**.\n\n- one\n- two\n\n> a quote\n\n```\nfn main() { println!(\"a very long line of code that goes well past the edge of the screen\"); }\n```\n\nSee [the docs](https://example.com/docs)."}"##,
    r#"{"type":"turn.ended"}"#,
];

#[test]
fn the_panel_a_markdown_reply_and_a_tool_line() {
    if !system_tests("the_panel_a_markdown_reply_and_a_tool_line") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[]);
    let wants = [
        "model        gpt-test",
        "› What are you working on?",
        "▪ bash  command: ls -la ✓ 0.4s",
        "● Plan",
        "  I am reading my soul.",
        "  • one",
        "  │ a quote",
        "  See the docs (https://example.com/docs).",
        "◆ not running",
    ];
    let screen = tmux.wait_for_all(&wants);
    let code = screen.lines().find(|l| l.starts_with("  fn main()")).unwrap_or_default();
    assert!(code.ends_with('…') && code.chars().count() == 80, "cut at the edge: {code:?}");
    assert!(!screen.contains("do-not-show"), "the key is never shown:\n{screen}");
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "the code block is cut at the edge: {line:?}");
    }
}

#[test]
fn the_command_list_filters_and_completes() {
    if !system_tests("the_command_list_filters_and_completes") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    tmux.type_text("/");
    // The list is drawn top down: its second row means the first is there.
    let screen = tmux.wait_for("/accept [commit]");
    assert!(screen.contains("▸ /stop"), "{screen}");
    tmux.type_text("he");
    let screen = tmux.wait_for("▸ /help");
    assert!(!screen.contains("/stop"), "fewer with each letter:\n{screen}");
    tmux.keys(&["BSpace", "BSpace", "h"]);
    tmux.wait_for("▸ /history");
    tmux.keys(&["Down", "Tab"]);
    tmux.wait_for("› /help");
    tmux.keys(&["Enter"]);
    // The rows are printed one after the other, keys first: wait for a
    // command row, and the key rows are there.
    let screen = tmux.wait_for("/approve <commit>");
    assert!(screen.contains("Ctrl-L"), "/help prints the keys and the commands:\n{screen}");
    tmux.type_text("/ap");
    tmux.keys(&["Enter"]);
    tmux.wait_for("› /approve");
    assert!(owner_files(dir.path(), "txt").is_empty(), "nothing was sent");
}

#[test]
fn two_slashes_send_a_slash_line_and_an_unknown_command_is_refused() {
    if !system_tests("two_slashes_send_a_slash_line_and_an_unknown_command_is_refused") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    tmux.type_text("/hlep");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("not a command");
    assert!(screen.contains("/hlep is not a command and was not sent; the nearest is /help"));
    assert!(screen.contains("› /hlep"), "what was typed stays in the box:\n{screen}");
    assert!(owner_files(dir.path(), "txt").is_empty(), "nothing was sent");
    tmux.keys(&["C-u"]);
    tmux.type_text("//help me");
    tmux.keys(&["Enter"]);
    tmux.wait_for("your line waits");
    let sent = owner_files(dir.path(), "txt");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(std::fs::read_to_string(&sent[0]).expect("the line"), "/help me");
}

/// Whether `screen` (captured with escapes) sets a foreground or
/// background colour anywhere.
fn has_colour(screen: &str) -> bool {
    screen.split("\u{1b}[").skip(1).any(|seq| {
        let params = seq.split('m').next().unwrap_or_default();
        params.split(';').any(|p| {
            p.parse::<u32>()
                .is_ok_and(|n| (30..=38).contains(&n) || (40..=48).contains(&n) || n >= 90)
        })
    })
}

#[test]
fn no_color_and_an_ascii_locale() {
    if !system_tests("no_color_and_an_ascii_locale") {
        return;
    }
    let dir = individual(CONVERSATION);
    let coloured = Tmux::start(dir.path(), &[]);
    coloured.wait_for("See the docs");
    assert!(has_colour(&coloured.screen(true)), "the control has colours");
    drop(coloured);

    let tmux = Tmux::start(dir.path(), &[("NO_COLOR", "1"), ("LANG", "C"), ("LC_ALL", "C")]);
    tmux.wait_for_all(&[
        "See the docs",
        "> What are you working on?",
        "* Plan",
        "- bash  command: ls -la ok 0.4s",
        "# not running",
    ]);
    assert!(!has_colour(&tmux.screen(true)), "NO_COLOR: {}", tmux.screen(true));
    tmux.type_text("/");
    tmux.wait_for("> /stop");
}

#[test]
fn hostile_text_is_shown_inert() {
    if !system_tests("hostile_text_is_shown_inert") {
        return;
    }
    let dir = individual(&[
        r#"{"type":"owner.line","file":"a.txt","text":"hello"}"#,
        r#"{"type":"reply","text":"safe\u001b]0;pwned-title\u0007 \u001b]52;c;cHduZWQ=\u0007clip \u001b[2J\u001b[Hclear \u001b]8;;http://evil.example\u001b\\link\u001b]8;;\u001b\\ \u009b31mc1"}"#,
        r#"{"type":"tool.call","id":"1","name":"ba\u001b[1Ash","input":{"command":"x\u001b]0;pwned-tool\u0007"}}"#,
        r#"{"type":"tool.result","id":"1","output":"boom\u001b]52;c;cHduZWQ=\u0007 \u001b[31mred","error":true}"#,
        r#"{"type":"stimulus","source":"inbox","from":"eve\u001b[2J","text":"hi\u001b]0;pwned-inbox\u0007"}"#,
        r#"{"type":"turn.ended"}"#,
    ]);
    let tmux = Tmux::start(dir.path(), &[]);
    let screen = tmux.wait_for("woken by a message from eve: hi");
    for want in [
        "● safe clip clear link c1",
        "▪ bash  command: x ✗ failed",
        "    boom red",
        "talking with Ada",
    ] {
        assert!(screen.contains(want), "{want:?} is not on the screen:\n{screen}");
    }
    let title = tmux.run(&["display-message", "-p", "-t", "0", "#{pane_title}"]);
    assert!(!String::from_utf8_lossy(&title.stdout).contains("pwned"), "{title:?}");
    let buffers = tmux.run(&["list-buffers"]);
    assert!(String::from_utf8_lossy(&buffers.stdout).trim().is_empty(), "no OSC 52: {buffers:?}");
    assert!(!tmux.screen(true).contains("evil.example"), "no hyperlink reached the terminal");
}

#[test]
fn leaving_leaves_the_conversation_in_the_scrollback() {
    if !system_tests("leaving_leaves_the_conversation_in_the_scrollback") {
        return;
    }
    let dir = individual(CONVERSATION);
    for leave in [&["C-d"][..], &["C-c"][..], &["/quit", "Enter"][..]] {
        let tmux = Tmux::start(dir.path(), &[]);
        tmux.wait_for("lists the commands");
        if leave[0].starts_with('/') {
            tmux.type_text(leave[0]);
            tmux.keys(&leave[1..]);
        } else {
            tmux.keys(leave);
        }
        let screen = tmux.wait_for("left; the agent goes on");
        assert!(screen.contains("● Plan"), "{screen}");
        assert!(!screen.contains("lists the commands"), "the live region is gone:\n{screen}");
    }
}

#[test]
fn new_events_are_printed_and_esc_interrupts_a_turn() {
    if !system_tests("new_events_are_printed_and_esc_interrupts_a_turn") {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let tmux = Tmux::start(home, &[]);
    tmux.wait_for("◆ resting");
    tmux.keys(&["Escape"]);
    tmux.wait_for("there is no turn to stop now; nothing was sent");
    assert!(owner_files(home, "interrupt").is_empty());
    append(
        home,
        &[
            r#"{"type":"owner.line","file":"b.txt","text":"and now?"}"#,
            r#"{"type":"tool.call","id":"9","name":"sleep","input":{"seconds":60}}"#,
        ],
    );
    tmux.wait_for("› and now?");
    tmux.wait_for("running sleep");
    let screen = tmux.wait_for("esc to interrupt");
    assert!(screen.contains("(typed in another terminal)"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("interrupt sent");
    assert_eq!(owner_files(home, "interrupt").len(), 1, "one interrupt, through the owner channel");
    append(
        home,
        &[
            r#"{"type":"tool.result","id":"9","output":"[interrupted]"}"#,
            r#"{"type":"turn.interrupted"}"#,
        ],
    );
    tmux.wait_for("interrupted by you");
    tmux.wait_for("◆ resting");
}

#[test]
fn a_failing_model_is_shown_at_once_in_both_clients() {
    if !system_tests("a_failing_model_is_shown_at_once_in_both_clients") {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let plain = Tmux::start_with(home, &[], &["--plain"]);
    plain.wait_for("/help lists the commands");
    plain.type_text("are you there?");
    plain.keys(&["Enter"]);
    plain.wait_for("[teneral is not running: your line waits");
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let full = Tmux::start(home, &[]);
    full.wait_for("◆ resting");
    append(
        home,
        &[
            r#"{"type":"owner.line","file":"b.txt","text":"hello?"}"#,
            r#"{"type":"model.retry","message":"HTTP 503: the \u001b[2Jprovider is busy","status":503,"retry":1,"seconds":10}"#,
        ],
    );
    full.wait_for_all(&[
        "│ the model failed: HTTP 503: the provider is busy",
        "│   retry 1 in 10s (at 10:00:10 UTC); Esc gives up the turn",
        "the model failed; retry 1 in",
        "esc to interrupt",
    ]);
    plain.wait_for("[model failed; retry 1 in 10s] HTTP 503: the provider is busy");
}

#[test]
fn the_gate_shows_each_step_and_the_mutation_exit_is_no_crash() {
    if !system_tests("the_gate_shows_each_step_and_the_mutation_exit_is_no_crash") {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let tmux = Tmux::start(home, &[]);
    tmux.wait_for("◆ resting");
    append(home, &[r#"{"type":"mutation.requested","candidate":"fedcba9876543210"}"#]);
    tmux.wait_for("asked for a mutation to fedcba9");
    let status = r#"{"pid":1,"generation":null,"status":"checking mutation fedcba9: kernel tests, body tests","since":"2026-11-30T10:00:00.000Z"}"#;
    std::fs::write(home.join(".teneral/status"), status).expect("the kernel's status");
    tmux.wait_for_all(&["  gate kernel tests, body tests …", "◆ mutating: gate kernel tests"]);
    append(
        home,
        &[
            r#"{"type":"generation.exited","status":"exit status 75","result":"exited"}"#,
            r#"{"type":"mutation.check","candidate":"fedcba9876543210","check":"kernel tests","result":"passed","seconds":12.5}"#,
        ],
    );
    let screen = tmux.wait_for_all(&[
        "  the body stepped aside for the gate",
        "  gate kernel tests ✓ passed 12s",
    ]);
    assert!(!screen.contains("the body ended"), "not a crash:\n{screen}");
    tmux.type_text("still there?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("no body runs now: your line is answered when the next generation is up");
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl Tmux {
    /// Pastes `text` as a terminal does (bracketed, when the client asked).
    fn paste(&self, text: &str) {
        assert!(self.run(&["set-buffer", "--", text]).status.success());
        assert!(self.run(&["paste-buffer", "-p", "-t", "0"]).status.success());
    }
}

#[test]
fn images_by_a_pasted_path_and_by_the_image_command() {
    if !system_tests("images_by_a_pasted_path_and_by_the_image_command") {
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

    let tmux = Tmux::start(home, &[]);
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
    if !system_tests("ctrl_v_without_a_display_says_what_to_do") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[("DISPLAY", ""), ("WAYLAND_DISPLAY", "")]);
    tmux.wait_for("lists the commands");
    tmux.keys(&["C-v"]);
    tmux.wait_for("Ctrl+V: no display here; paste the image's path or use /image <path>");
}

#[test]
fn the_plain_client_attaches_images_too() {
    if !system_tests("the_plain_client_attaches_images_too") {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let files = tempfile::tempdir().expect("a temp dir for the images");
    let shot = files.path().join("shot.png");
    std::fs::write(&shot, PNG).expect("a png");
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, "not a picture").expect("a text file");
    let tmux = Tmux::start_with(home, &[], &["--plain"]);
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

#[test]
fn two_clients_see_each_others_lines() {
    if !system_tests("two_clients_see_each_others_lines") {
        return;
    }
    let dir = individual(CONVERSATION);
    let home = dir.path();
    let _kernel = teneralctl::lock::acquire(home).expect("the lock, as a kernel holds it");
    let (a, b) = (Tmux::start(home, &[]), Tmux::start(home, &[]));
    a.wait_for("◆ resting");
    b.wait_for("◆ resting");
    for (from, n) in [(&a, 1), (&b, 2)] {
        from.type_text(&format!("line {n}"));
        from.keys(&["Enter"]);
    }
    // The body takes each line in, as it would: journaled with its file's name.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut files = owner_files(home, "txt");
    while files.len() < 2 {
        assert!(Instant::now() < deadline, "two lines were not sent: {files:?}");
        std::thread::sleep(Duration::from_millis(50));
        files = owner_files(home, "txt");
    }
    let mut events = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a line");
        let name = f.file_name().and_then(|n| n.to_str()).expect("a name").to_owned();
        events.push(format!(r#"{{"type":"owner.line","file":"{name}","text":"{text}"}}"#));
    }
    events.sort_by_key(|e| e.contains("line 2"));
    append(home, &events.iter().map(String::as_str).collect::<Vec<_>>());
    for (me, mine, theirs) in [(&a, "› line 1", "› line 2"), (&b, "› line 2", "› line 1")] {
        let screen = me.wait_for_all(&[mine, theirs]);
        let lines: Vec<&str> = screen.lines().collect();
        let at = |t: &str| lines.iter().position(|l| l.starts_with(t)).expect("shown");
        assert_ne!(lines.get(at(mine) + 1), Some(&"  (typed in another terminal)"), "{screen}");
        assert_eq!(lines.get(at(theirs) + 1), Some(&"  (typed in another terminal)"), "{screen}");
    }
}

#[test]
fn a_resize_redraws_the_live_region_and_history_prints_again() {
    if !system_tests("a_resize_redraws_the_live_region_and_history_prints_again") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    assert!(tmux.run(&["resize-window", "-t", "0", "-x", "50", "-y", "20"]).status.success());
    tmux.type_text("narrow");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = tmux.run(&["capture-pane", "-p", "-t", "0"]);
        let screen = String::from_utf8_lossy(&out.stdout).into_owned();
        let rule = screen.lines().rev().find(|l| l.starts_with("──")).unwrap_or_default();
        if screen.contains("› narrow") && rule.chars().count() == 50 {
            break;
        }
        assert!(Instant::now() < deadline, "the box was not drawn 50 wide:\n{screen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.keys(&["C-u"]);
    tmux.type_text("/history");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["earlier conversation: 5 events", "end of the earlier conversation"]);
}

/// The pid of `teneralctl` in the tmux of `tmux`.
fn client_pid(tmux: &Tmux) -> u32 {
    let out = tmux.run(&["display-message", "-p", "-t", "0", "#{pane_pid}"]);
    let shell: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("the pane's pid");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("the shell's children");
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "teneralctl")
        })
        .unwrap_or(shell)
}

#[test]
fn a_vanished_terminal_is_noticed_within_half_a_minute() {
    if !system_tests("a_vanished_terminal_is_noticed_within_half_a_minute") {
        return;
    }
    let dir = individual(CONVERSATION);
    let tmux = Tmux::start(dir.path(), &[]);
    tmux.wait_for("lists the commands");
    let pid = client_pid(&tmux);
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let gone = Instant::now();
    assert!(tmux.run(&["kill-server"]).status.success());
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break; // ended, not yet reaped
        }
        assert!(gone.elapsed() < Duration::from_secs(30), "teneralctl {pid} still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn true_colour_with_256_and_16_colour_fallbacks() {
    if !system_tests("true_colour_with_256_and_16_colour_fallbacks") {
        return;
    }
    let dir = individual(CONVERSATION);
    // The owner's colour: 24-bit, index 31 of the palette, or basic cyan
    // (which tmux writes as index 6).
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (&[("COLORTERM", "truecolor"), ("TERM", "xterm-256color")], "38;2;0;135;175m", &["38;5;"]),
        (&[("TERM", "xterm-256color")], "38;5;31m", &["38;2;"]),
        (&[("TERM", "xterm")], "38;5;6m", &["38;2;", "38;5;31m"]),
    ];
    for (env, want, not) in cases {
        let tmux = Tmux::start(dir.path(), env);
        tmux.wait_for("See the docs");
        let screen = tmux.screen(true);
        assert!(screen.contains(want) && has_colour(&screen), "{env:?}: {screen}");
        for n in *not {
            assert!(!screen.contains(n), "{env:?} has {n}: {screen}");
        }
    }
}
