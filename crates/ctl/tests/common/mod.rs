//! What the client's tests share: a tmux terminal running one client
//! (`teneral_testkit::tmux`), the stand-in model beside it, a test
//! individual and its journal, small readers of the screen, and what the
//! tests of `teneralctl setup` share (a home with its `.env`, the browser).
//!
//! tmux runs `teneralctl talk` against a journal the test writes,
//! `send-keys` types and `capture-pane` reads the screen. Each test has a
//! tmux server of its own (`tmux -L`), killed when the test ends. These are
//! system tests: they need tmux (`scripts/deps` installs it) and run when
//! `TENERAL_SYSTEM_TESTS` is set, as `scripts/test` sets it. A gate's check
//! of a species commit leaves them out, as it leaves out the kernel's other
//! system tests.
#![allow(dead_code, clippy::expect_used, clippy::panic)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use teneral_testkit::standin::Standin;
pub use teneral_testkit::system_tests;
pub use teneral_testkit::tmux::Tmux;

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Starts `teneralctl talk -d home` in an 80x30 terminal with `env`.
pub fn talk_terminal(home: &Path, env: &[(&str, &str)]) -> Tmux {
    talk_terminal_with(home, env, &[])
}

/// Starts `teneralctl talk -d home` with `args` after it.
pub fn talk_terminal_with(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Tmux {
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
    let tmux = Tmux::start("talk-test", 80, 30, &line);
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux
}

/// `teneral standin` serving `script`, taking only `key` when given: the
/// kernel's binary beside this one (`cargo build --bin teneral` first, as
/// `cargo test --workspace` does).
pub fn standin(script: &str, key: Option<&str>) -> Standin {
    let teneral = Path::new(env!("CARGO_BIN_EXE_teneralctl")).with_file_name("teneral");
    assert!(teneral.exists(), "{} is missing: cargo build --bin teneral", teneral.display());
    Standin::start(&teneral, script, key).expect("teneral standin starts")
}

/// The key the stand-in takes in the setup tests.
pub const KEY: &str = "sk-test-secret-4711";
/// A stand-in script that answers setup's two test requests: in words,
/// then with a call of the tool.
pub const WORDS_THEN_CALL: &str = "{\"reply\":\"Hello, owner.\"}\n{\"tool_calls\":[{\"name\":\"record_word\",\"arguments\":{\"word\":\"ready\"}}]}\n";

/// An individual's directory with `.teneral/` and, when given, a `.env` (0640).
pub fn home(env: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path().to_owned();
    std::fs::create_dir(home.join(".teneral")).expect(".teneral/");
    if let Some(text) = env {
        std::fs::write(home.join(".env"), text).expect("a .env");
        std::fs::set_permissions(home.join(".env"), std::fs::Permissions::from_mode(0o640))
            .expect("its mode");
    }
    (dir, home)
}

/// The `.env` of `home`: its text and mode.
pub fn env_of(home: &Path) -> (String, u32) {
    let path = home.join(".env");
    let text = std::fs::read_to_string(&path).expect(".env is there");
    let mode = std::fs::metadata(&path).expect("its metadata").permissions().mode() & 0o777;
    (text, mode)
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// The browser opens `address`; where the sign-in server sends it back.
pub fn browser_opens(address: &str) -> String {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let response = client.get(address).send().expect("the authorize page answers");
    assert_eq!(response.status().as_u16(), 302, "the stand-in redirects: {response:?}");
    let to = response.headers().get("location").expect("a Location").to_str().expect("text");
    to.to_owned()
}

/// An individual with a soul, settings and a journal of `events` (JSON
/// objects without `ts`, `seq` and `commit`, which are added).
pub fn individual(events: &[&str]) -> tempfile::TempDir {
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
pub fn append(home: &Path, events: &[&str]) {
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

pub fn owner_files(home: &Path, ext: &str) -> Vec<PathBuf> {
    match std::fs::read_dir(home.join(".teneral/owner")) {
        Ok(dir) => dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect(),
        Err(_) => Vec::new(),
    }
}

pub const CONVERSATION: &[&str] = &[
    r#"{"type":"owner.line","file":"a.txt","text":"What are you working on?"}"#,
    r#"{"type":"tool.call","id":"1","name":"bash","input":{"command":"ls -la"}}"#,
    r#"{"type":"tool.result","id":"1","output":"total 0"}"#,
    r##"{"type":"reply","text":"# Plan\n\nI am *reading* my **soul**.\n\n- one\n- two\n\n> a quote\n\n```\nfn main() { println!(\"a very long line of code that goes well past the edge of the screen\"); }\n```\n\nSee [the docs](https://example.com/docs)."}"##,
    r#"{"type":"turn.ended"}"#,
];

/// Whether `screen` (captured with escapes) sets a foreground or
/// background colour anywhere.
pub fn has_colour(screen: &str) -> bool {
    screen.split("\u{1b}[").skip(1).any(|seq| {
        let params = seq.split('m').next().unwrap_or_default();
        params.split(';').any(|p| {
            p.parse::<u32>()
                .is_ok_and(|n| (30..=38).contains(&n) || (40..=48).contains(&n) || n >= 90)
        })
    })
}

pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The pid of `teneralctl` in the tmux of `tmux`.
pub fn client_pid(tmux: &Tmux) -> u32 {
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
