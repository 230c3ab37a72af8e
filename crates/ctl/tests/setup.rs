//! `teneralctl setup --plain` through a pipe, against the stand-in model
//! (`teneral standin`, the kernel's binary beside this one: `cargo build
//! --bin teneral` first, as `cargo test --workspace` does), for each
//! provider and each way the tests fail. Every failure must leave `.env` as
//! it was, byte for byte and mode.
#![allow(clippy::expect_used, clippy::panic)]
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{env_of, home, KEY, WORDS_THEN_CALL};
use teneral_testkit::{Within, SLOW};

const OTHER: &str =
    "# mine\nTENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTES=7\nTENERAL_RUNNER=direct\n";

fn setup(home: &Path, args: &[&str], answers: &str) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_teneralctl"));
    cmd.arg("setup").arg("-d").arg(home).args(args);
    // A setup that refuses before its first question never reads them: the
    // answers are fed aside, and a closed pipe is no failure.
    let out = teneral_testkit::run_fed_within(&mut cmd, Some(answers.as_bytes()), SLOW, "setup")
        .expect("teneralctl setup ends within its limit");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

#[test]
fn compatible_is_tested_then_written_with_the_other_settings_kept() {
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let answers = format!("y\ncompatible\n{}\n{KEY}\n1\n", standin.url);
    let (out, text) = setup(&home, &["--plain"], &answers);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("offers these models") && text.contains("1) standin"), "{text}");
    assert!(text.contains("answered in words: \"Hello, owner.\""), "{text}");
    assert!(text.contains("called the tool record_word"), "{text}");
    assert!(text.contains("teneral reads it when it starts next"), "{text}");
    assert!(!text.contains(KEY), "the key is never shown: {text}");
    let expected = format!(
        "# mine\nTENERAL_PROVIDER=compatible\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={KEY}\nTENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=7\nTENERAL_RUNNER=direct\n",
        standin.url
    );
    assert_eq!(env_of(&home), (expected, 0o600));
}

#[test]
fn a_running_kernel_under_systemd_gets_the_restart_line() {
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let _kernel = teneralctl::lock::acquire(&home).expect("the lock, as a kernel holds it");
    let status = r#"{"pid":1,"generation":null,"status":"resting","since":"2026-11-30T10:00:00.000Z","unit":"teneral.service"}"#;
    std::fs::write(home.join(".teneral/status"), status).expect("the kernel's status");
    let answers = format!("y\ncompatible\n{}\n{KEY}\nstandin\n", standin.url);
    let (out, text) = setup(&home, &["--plain"], &answers);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("The running kernel keeps its configuration until it is restarted"),
        "{text}"
    );
    assert!(text.contains("\n  systemctl --user restart teneral.service\n"), "{text}");
}

#[test]
fn openai_speaks_the_responses_api_and_a_new_env_starts_from_the_example() {
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(None);
    std::fs::write(
        home.join(".env.example"),
        "# example\nTENERAL_PROVIDER=standin\nTENERAL_CONTEXT_CHARS=250000\n",
    )
    .expect("an example");
    let answers = format!("openai\n{}\n{KEY}\nstandin\n", standin.url);
    let (out, text) = setup(&home, &["--plain"], &answers);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("exists"), "no .env, no question: {text}");
    let expected = format!(
        "# example\nTENERAL_PROVIDER=openai\nTENERAL_BASE_URL={}\nTENERAL_API_KEY={KEY}\nTENERAL_MODEL=standin\nTENERAL_CONTEXT_CHARS=250000\n",
        standin.url
    );
    assert_eq!(env_of(&home), (expected, 0o600));
}

#[test]
fn standin_needs_no_address_key_or_tests() {
    let (_dir, home) = home(Some(
        "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL=http://x/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\nTENERAL_RUNNER=direct\n",
    ));
    let (out, text) = setup(&home, &["--plain"], "y\n3\n");
    assert!(out.status.success(), "{text}");
    assert_eq!(
        env_of(&home),
        ("TENERAL_PROVIDER=standin\nTENERAL_RUNNER=direct\n".to_owned(), 0o600)
    );
}

#[test]
fn each_failure_writes_nothing_and_says_why() {
    let words_twice = "{\"reply\":\"Hello.\"}\n{\"reply\":\"ready\"}\n";
    let server_error = "{\"error\":{\"status\":500,\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n";
    // (script, key, url override, what the output must say)
    let cases: &[(&str, &str, Option<&str>, &[&str])] = &[
        (
            server_error,
            KEY,
            None,
            &["text test request was refused", "500", "The server had an error"],
        ),
        (words_twice, KEY, None, &["answered the tool test in words", "\"ready\"", "tool calls"]),
        (
            WORDS_THEN_CALL,
            "sk-wrong",
            None,
            &["401", "Incorrect API key provided", "check the key"],
        ),
        (
            WORDS_THEN_CALL,
            KEY,
            Some("http://127.0.0.1:9/v1"),
            &["cannot reach http://127.0.0.1:9/v1", "Connection refused"],
        ),
    ];
    for (script, key, url, said) in cases {
        for provider in ["compatible", "openai"] {
            let standin = common::standin(script, Some(KEY));
            let url = url.map_or(standin.url.clone(), |url| url.to_owned());
            let (_dir, home) = home(Some(OTHER));
            let answers = format!("y\n{provider}\n{url}\n{key}\nstandin\n");
            let (out, text) = setup(&home, &["--plain"], &answers);
            assert_eq!(out.status.code(), Some(1), "{provider}: {text}");
            for part in *said {
                assert!(text.contains(part), "{provider}: {part:?} missing from {text}");
            }
            assert!(text.contains("nothing was written"), "{text}");
            assert!(!text.contains(key), "the key is never shown: {text}");
            assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640), "{provider}: .env untouched");
            let left: Vec<_> = std::fs::read_dir(&home).expect("the dir").collect();
            assert_eq!(left.len(), 2, "no temporary file left beside .env");
        }
    }
}

#[test]
fn without_a_terminal_or_plain_it_says_what_is_missing() {
    let (_dir, home) = home(Some(OTHER));
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(["setup", "-d"])
        .arg(&home)
        .stdin(Stdio::null())
        .output_within(SLOW)
        .expect("teneralctl runs");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    for part in
        ["not a terminal", "--plain", "the provider (openai, compatible, standin or chatgpt)"]
    {
        assert!(said.contains(part), "{part:?} missing from {said}");
    }
    assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640));
}

#[test]
fn declining_or_running_out_of_answers_writes_nothing() {
    let (_dir, home) = home(Some(OTHER));
    let (out, text) = setup(&home, &["--plain"], "n\n");
    assert!(out.status.success(), "{text}");
    assert!(text.contains(".env is as it was"), "{text}");
    let (out, text) = setup(&home, &["--plain"], "y\ncompatible\n");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("the input ended before the address was given"), "{text}");
    assert!(text.contains("With --plain give one answer a line"), "{text}");
    assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640));
    let elsewhere = tempfile::tempdir().expect("a temp dir");
    let (out, text) = setup(elsewhere.path(), &["--plain"], "standin\n");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("is not a teneral individual or checkout"), "{text}");
    assert!(!elsewhere.path().join(".env").exists());
}

/// `--plain` at a terminal: the line questions, the key still read unseen.
#[test]
fn at_a_terminal_the_key_is_typed_unseen() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let line = format!(
        "env LANG=C.UTF-8 {} setup --plain -d {}; echo exit=$?; sleep 600",
        env!("CARGO_BIN_EXE_teneralctl"),
        home.display()
    );
    let tmux = common::Tmux::start("setup-test", 100, 40, &line);
    tmux.wait_for("Go on? [y/N]");
    tmux.type_text("y");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["1) openai", "2) compatible", "3) standin", "Provider (number or name):"]);
    tmux.type_text("2");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Address:");
    tmux.type_text(&standin.url);
    tmux.keys(&["Enter"]);
    tmux.wait_for("API key:");
    tmux.type_text(KEY);
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["(typed, not shown)", "1) standin", "Model (number or name):"]);
    tmux.type_text("1");
    tmux.keys(&["Enter"]);
    let screen =
        tmux.wait_for_all(&["Test 2 of 2", "called the tool record_word", "Wrote ", "exit=0"]);
    assert!(!screen.contains(KEY), "the key never shows:\n{screen}");
    let (text, mode) = env_of(&home);
    assert!(text.contains(&format!("TENERAL_API_KEY={KEY}\n")), "{text}");
    assert_eq!(mode, 0o600);

    // Ctrl-C at the key gives up, writes nothing and leaves the echo on.
    let (_dir, again) = self::home(Some(OTHER));
    let line = format!(
        "env LANG=C.UTF-8 {} setup --plain -d {}; echo exit=$? tty=$(stty -a | grep -o -- '-\\?echo ' | head -1); sleep 600",
        env!("CARGO_BIN_EXE_teneralctl"),
        again.display()
    );
    let out = tmux.run(&["new-window", "-t", ":1", &line]);
    assert!(out.status.success(), "a second window: {out:?}");
    let keys = |keys: &[&str]| {
        let mut args = vec!["send-keys", "-t", ":1"];
        args.extend_from_slice(keys);
        assert!(tmux.run(&args).status.success());
    };
    let screen_of = || {
        let out = tmux.run(&["capture-pane", "-p", "-t", ":1"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wait = |text: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let screen = screen_of();
            if screen.contains(text) {
                return screen;
            }
            assert!(std::time::Instant::now() < deadline, "{text:?} never showed:\n{screen}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait("Go on? [y/N]");
    keys(&["y", "Enter"]);
    wait("Provider (number or name):");
    keys(&["2", "Enter"]);
    wait("Address:");
    keys(&["-l", &standin.url]);
    keys(&["Enter"]);
    wait("API key:");
    keys(&["-l", "half-typed"]);
    keys(&["C-c", "Enter"]);
    let screen = wait("exit=1 tty=");
    assert!(screen.contains("you gave up (Ctrl-C) at the key; nothing was written"), "{screen}");
    assert!(!screen.contains("half-typed"), "{screen}");
    assert!(screen.contains("exit=1 tty=echo\n"), "the echo is back on:\n{screen}");
    assert_eq!(env_of(&again), (OTHER.to_owned(), 0o640));
}
