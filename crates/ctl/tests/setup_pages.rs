//! `teneralctl setup`'s full-screen pages in a real terminal: tmux runs it
//! against `teneral standin` (the kernel's binary beside this one: `cargo
//! build --workspace --bins` first), `send-keys` types, `capture-pane` reads
//! the pages. After setup the shell prints its exit status and the
//! terminal's modes, so each test sees the terminal given back as it was.
//!
//! System tests, as the talk client's: they need tmux and run when
//! `TENERAL_SYSTEM_TESTS` is set.
#![allow(clippy::expect_used, clippy::panic)]
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod common;
use common::{browser_opens, env_of, free_port, home, Standin, KEY, WORDS_THEN_CALL};
#[path = "setup_pages/signin.rs"]
mod signin;

const OTHER: &str =
    "# mine\nTENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTES=7\nTENERAL_RUNNER=direct\n";
/// After setup: its exit status and whether line editing and the echo are on.
const AFTER: &str = "echo exit=$? tty=$(stty -a | grep -wo -- '-\\?icanon')/$(stty -a | grep -wo -- '-\\?echo'); sleep 600";

/// `teneralctl setup -d home` in a 100x30 tmux terminal, with `env`.
fn pages(home: &Path, env: &[(&str, String)]) -> common::Tmux {
    pages_of_width(home, env, 100)
}

/// The same, `width` columns wide.
fn pages_of_width(home: &Path, env: &[(&str, String)], width: u16) -> common::Tmux {
    let mut line = String::from("env LANG=C.UTF-8");
    for (name, value) in env {
        line.push_str(&format!(" {name}={value}"));
    }
    line.push_str(&format!(
        " {} setup -d {}; {AFTER}",
        env!("CARGO_BIN_EXE_teneralctl"),
        home.display()
    ));
    let tmux = common::Tmux::start("setup-pages", width, 30, &line);
    let written = tmux.dir.path().join("written");
    let pipe = format!("cat >> {}", written.display());
    assert!(tmux.run(&["pipe-pane", "-o", "-t", "0", &pipe]).status.success());
    tmux
}

/// Waits for setup to end; the screen, which must show the terminal given
/// back (line editing and the echo on, the pages gone).
fn ended(tmux: &common::Tmux, status: i32) -> String {
    let screen = tmux.wait_for("tty=");
    assert!(screen.contains(&format!("exit={status} tty=icanon/echo")), "{screen}");
    assert!(!screen.contains("teneral setup ·"), "the alternate screen is left:\n{screen}");
    screen
}

/// Types an endpoint's address and key on their pages.
fn address_and_key(tmux: &common::Tmux, url: &str, key: &str) {
    tmux.wait_for("Address:");
    tmux.keys(&["C-u"]);
    tmux.type_text(url);
    tmux.keys(&["Enter"]);
    tmux.wait_for("API key: 0 characters typed");
    tmux.type_text(key);
    let screen = tmux.wait_for(&format!("API key: {} characters typed", key.len()));
    assert!(!screen.contains(key), "the key is never shown:\n{screen}");
    tmux.keys(&["Enter"]);
}

#[test]
fn compatible_chosen_with_the_arrows_tested_then_written_after_yes() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let tmux = pages(&home, &[]);
    tmux.wait_for("▸ 1  openai");
    tmux.keys(&["Down"]);
    tmux.wait_for("▸ 2  compatible");
    tmux.keys(&["Enter"]);
    address_and_key(&tmux, &standin.url, KEY);
    tmux.wait_for_all(&["offers these models", "▸   1  standin"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Replace them?");
    assert!(screen.contains("TENERAL_API_KEY=(the key)") && !screen.contains(KEY), "{screen}");
    assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640), "nothing written before yes");
    tmux.keys(&["y"]);
    let screen = tmux.wait_for_all(&[
        "passed: answered in words: \"Hello, owner.\"",
        "passed: called the tool record_word",
        "teneral reads it when it starts next",
    ]);
    assert!(!screen.contains(KEY), "{screen}");
    tmux.keys(&["Enter"]);
    let screen = ended(&tmux, 0);
    assert!(screen.contains("Wrote ") && !screen.contains(KEY), "said on leaving:\n{screen}");
    let expected = format!(
        "# mine\nTENERAL_PROVIDER=compatible\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={KEY}\nTENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=7\nTENERAL_RUNNER=direct\n",
        standin.url
    );
    assert_eq!(env_of(&home), (expected, 0o600));
}

#[test]
fn openai_by_number_into_a_new_env_from_the_example() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(None);
    std::fs::write(home.join(".env.example"), "# example\nTENERAL_CONTEXT_CHARS=250000\n")
        .expect("an example");
    let tmux = pages(&home, &[]);
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("1");
    tmux.wait_for("Address: https://api.openai.com/v1");
    address_and_key(&tmux, &standin.url, KEY);
    tmux.wait_for("▸   1  standin");
    tmux.type_text("1");
    tmux.keys(&["Enter"]);
    // No .env: no question, written once both tests passed.
    tmux.wait_for_all(&["passed: called the tool record_word", "Wrote "]);
    tmux.keys(&["Enter"]);
    ended(&tmux, 0);
    let expected = format!(
        "# example\nTENERAL_CONTEXT_CHARS=250000\n\n# The model provider (written by teneralctl setup).\nTENERAL_PROVIDER=openai\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={KEY}\nTENERAL_MODEL=standin\n",
        standin.url
    );
    assert_eq!(env_of(&home), (expected, 0o600));
}

#[test]
fn standin_for_a_running_kernel_under_systemd_gives_the_restart_line() {
    if !common::system_tests() {
        return;
    }
    let (_dir, home) = home(Some(
        "TENERAL_PROVIDER=compatible\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\nTENERAL_RUNNER=direct\n",
    ));
    let _kernel = teneralctl::lock::acquire(&home).expect("the lock, as a kernel holds it");
    let status = r#"{"pid":1,"generation":null,"status":"resting","since":"2026-11-30T10:00:00.000Z","unit":"teneral.service"}"#;
    std::fs::write(home.join(".teneral/status"), status).expect("the kernel's status");
    let tmux = pages(&home, &[]);
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("3");
    tmux.wait_for_all(&["Replace them?", "TENERAL_PROVIDER=standin"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("systemctl --user restart teneral.service");
    tmux.keys(&["Enter"]);
    let screen = ended(&tmux, 0);
    assert!(screen.contains("\n  systemctl --user restart teneral.service\n"), "{screen}");
    assert_eq!(env_of(&home), ("TENERAL_PROVIDER=standin\nTENERAL_RUNNER=direct\n".into(), 0o600));
}

#[test]
fn a_failing_test_request_shows_the_status_and_message_and_writes_nothing() {
    if !common::system_tests() {
        return;
    }
    let server_error = "{\"error\":{\"status\":500,\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n";
    let words_twice = "{\"reply\":\"Hello.\"}\n{\"reply\":\"ready\"}\n";
    // (script, key, what the tests page says)
    let cases: &[(&str, &str, &[&str])] = &[
        (
            server_error,
            KEY,
            &["failed: the text test request was refused: the provider answered 500: The server had an error"],
        ),
        (WORDS_THEN_CALL, "sk-wrong", &["answered 401: Incorrect API key provided", "check the key"]),
        (words_twice, KEY, &["passed: answered in words", "failed: the model answered the tool test in words"]),
    ];
    for (script, key, said) in cases {
        let standin = common::standin(script, Some(KEY));
        let (_dir, home) = home(Some(OTHER));
        // Wide enough for the provider's message on one line.
        let tmux = pages_of_width(&home, &[], 250);
        tmux.wait_for("▸ 1  openai");
        tmux.type_text("2");
        address_and_key(&tmux, &standin.url, key);
        tmux.wait_for("Or type a number or a name:");
        tmux.type_text("standin");
        tmux.keys(&["Enter"]);
        let mut wants = said.to_vec();
        wants.push("Nothing was written:");
        let screen = tmux.wait_for_all(&wants);
        assert!(!screen.contains(key), "{screen}");
        tmux.keys(&["Enter"]);
        let screen = ended(&tmux, 1);
        assert!(screen.contains("nothing was written"), "said on leaving too:\n{screen}");
        assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640), "{key}: .env untouched");
        let left = std::fs::read_dir(&home).expect("the dir").count();
        assert_eq!(left, 2, "no temporary file left beside .env");
    }
}
