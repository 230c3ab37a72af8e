//! `teneralctl setup --plain` for the `chatgpt` provider through a pipe,
//! against the sign-in stand-in of `teneral standin` (build it first:
//! `cargo build --bin teneral`). The test is the owner's browser: it opens
//! the address setup prints (an HTTP GET to the stand-in's authorize
//! endpoint, which answers with a redirect) and follows the redirect to
//! setup's callback. Every failure must leave `.env` and the token file as
//! they were.
#![allow(clippy::expect_used, clippy::panic)]
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

mod common;
use common::{browser_opens, free_port, home, Standin, WORDS_THEN_CALL};

const OTHER: &str =
    "# mine\nTENERAL_PROVIDER=openai\nTENERAL_API_KEY=sk-old\nTENERAL_RUNNER=direct\n";

/// Setup running, its stdin open for answers given later.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    seen: String,
}

fn start(home: &Path, standin: &Standin, port: u16) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(["setup", "--plain", "-d"])
        .arg(home)
        .env("TENERAL_CHATGPT_ISSUER", standin.root())
        .env("TENERAL_CHATGPT_URL", format!("{}/backend-api/codex", standin.root()))
        .env("TENERAL_CALLBACK_PORT", port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("teneralctl runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"y\nchatgpt\n").expect("the first answers");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    Running { child, stdin: Some(stdin), out, seen: String::new() }
}

impl Running {
    /// The sign-in address setup printed (read up to the line after it).
    fn address(&mut self) -> String {
        loop {
            let mut line = String::new();
            let n = self.out.read_line(&mut line).expect("setup's output");
            assert!(n > 0, "setup ended before the address: {}", self.seen);
            self.seen.push_str(&line);
            if line.starts_with("http") {
                return line.trim().to_owned();
            }
        }
    }

    /// Gives the remaining answers, closes stdin and waits; (exit code, all output).
    fn finish(mut self, answers: &str) -> (Option<i32>, String) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(answers.as_bytes());
        }
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).expect("the rest of stdout");
        let mut err = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            stderr.read_to_string(&mut err).expect("stderr");
        }
        let status = self.child.wait().expect("it ends");
        (status.code(), format!("{}{rest}{err}", self.seen))
    }
}

/// The browser follows the redirect to setup's callback; its status.
fn come_back(to: &str) -> u16 {
    reqwest::blocking::get(to).expect("the callback answers").status().as_u16()
}

fn unchanged(home: &Path, text: &str) {
    let env = std::fs::read_to_string(home.join(".env")).expect(".env");
    let mode = std::fs::metadata(home.join(".env")).expect(".env").permissions().mode() & 0o777;
    assert_eq!((env.as_str(), mode), (OTHER, 0o640), ".env untouched: {text}");
    assert!(!home.join(".teneral/auth/chatgpt.json").exists(), "no tokens: {text}");
    assert!(text.contains("nothing was written"), "{text}");
}

#[test]
fn signs_in_tests_through_the_plan_and_writes_tokens_and_env() {
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let port = free_port();
    let mut setup = start(&home, &standin, port);
    let address = setup.address();
    assert!(address.starts_with(&format!("{}/oauth/authorize?", standin.root())), "{address}");
    assert!(
        address
            .contains(&format!("redirect_uri=http%3A%2F%2Flocalhost%3A{port}%2Fauth%2Fcallback")),
        "{address}"
    );
    let to = browser_opens(&address);
    assert_eq!(come_back(&to), 200);
    let (code, text) = setup.finish("1\n");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("answered in words: \"Hello, owner.\""), "{text}");
    assert!(text.contains("called the tool record_word"), "{text}");
    let expected = format!(
        "# mine\nTENERAL_PROVIDER=chatgpt\nTENERAL_BASE_URL={}/backend-api/codex\nTENERAL_MODEL=standin\nTENERAL_RUNNER=direct\n",
        standin.root()
    );
    let env = std::fs::read_to_string(home.join(".env")).expect(".env");
    assert_eq!(env, expected, "no key for chatgpt, the other lines kept");
    let path = home.join(".teneral/auth/chatgpt.json");
    let mode = std::fs::metadata(&path).expect("the token file").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let tokens = teneral_core::chatgpt::read(&path).expect("the tokens read back");
    assert_eq!(tokens.account_id, "acc-standin-0001");
    assert_eq!(tokens.issuer, standin.root());
    assert!(
        !text.contains(&tokens.access_token) && !text.contains(&tokens.refresh_token),
        "{text}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the callback port is closed again"
    );
}

#[test]
fn a_refused_sign_in_writes_nothing() {
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let mut setup = start(&home, &standin, free_port());
    let to = browser_opens(&format!("{}&standin_decision=deny", setup.address()));
    assert!(to.contains("error=access_denied"), "{to}");
    come_back(&to);
    let (code, text) = setup.finish("");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("the sign-in was refused: access_denied"), "{text}");
    unchanged(&home, &text);
}

#[test]
fn a_wrong_state_is_not_believed() {
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let mut setup = start(&home, &standin, free_port());
    let to = browser_opens(&setup.address());
    let url = reqwest::Url::parse(&to).expect("the callback address");
    let mut forged = url.clone();
    forged.query_pairs_mut().clear().extend_pairs(url.query_pairs().map(|(n, v)| {
        if n == "state" {
            (n, "forged".into())
        } else {
            (n, v)
        }
    }));
    assert_eq!(come_back(forged.as_str()), 400);
    let (code, text) = setup.finish("");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("a state that is not this sign-in's"), "{text}");
    unchanged(&home, &text);
}

#[test]
fn a_line_while_waiting_gives_up() {
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let port = free_port();
    let mut setup = start(&home, &standin, port);
    setup.address();
    let (code, text) = setup.finish("\n");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("you gave up waiting for the sign-in"), "{text}");
    unchanged(&home, &text);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the port is closed");
}

#[test]
fn a_taken_port_names_the_variable() {
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to take");
    let port = taken.local_addr().expect("its address").port();
    let setup = start(&home, &standin, port);
    let (code, text) = setup.finish("");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(&format!("port {port} on 127.0.0.1 is taken")), "{text}");
    assert!(text.contains("TENERAL_CALLBACK_PORT="), "{text}");
    unchanged(&home, &text);
}

/// `--plain` at a terminal: Esc still gives up the wait.
#[test]
fn at_a_terminal_esc_gives_up_and_the_terminal_is_restored() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, None);
    let (_dir, home) = home(Some(OTHER));
    let port = free_port();
    let line = format!(
        "env LANG=C.UTF-8 TENERAL_CHATGPT_ISSUER={} TENERAL_CALLBACK_PORT={port} {} setup --plain -d {}; \
         echo exit=$? tty=$(stty -a | grep -o -- '-\\?icanon' | head -1); sleep 600",
        standin.root(),
        env!("CARGO_BIN_EXE_teneralctl"),
        home.display()
    );
    let tmux = common::Tmux::start("setup-chatgpt", 300, 40, &line);
    tmux.wait_for("Go on? [y/N]");
    tmux.type_text("y");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["4) chatgpt", "Provider (number or name):"]);
    tmux.type_text("chatgpt");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&["/oauth/authorize?", "Esc gives up"]);
    // The terminal wraps the address; joined, it is one line, whole.
    let joined = tmux.run(&["capture-pane", "-p", "-J"]);
    let joined = String::from_utf8_lossy(&joined.stdout).into_owned();
    let shown: Vec<&str> = joined.lines().filter(|l| l.contains("/oauth/authorize?")).collect();
    assert_eq!(shown.len(), 1, "the address on one line:\n{joined}");
    let address = shown[0].trim();
    assert!(address.starts_with(standin.root()) && address.contains("&state="), "{joined}");
    assert!(joined.contains("(or click here to open it)"), "the OSC 8 link's text:\n{joined}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "listening while it waits");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("exit=1 tty=");
    assert!(
        screen.contains("you gave up waiting for the sign-in; nothing was written"),
        "{screen}"
    );
    assert!(screen.contains("exit=1 tty=icanon"), "line editing is back:\n{screen}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the port is closed");
    let env = std::fs::read_to_string(home.join(".env")).expect(".env");
    assert_eq!(env, OTHER);
    assert!(!home.join(".teneral/auth/chatgpt.json").exists());
}
