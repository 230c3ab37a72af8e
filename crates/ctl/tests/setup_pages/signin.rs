//! The ChatGPT sign-in page of `teneralctl setup`: the browser's round
//! trip to the stand-in's sign-in server, and the ways it can fail without
//! writing anything.

use super::*;

#[test]
fn chatgpt_signs_in_on_its_page_and_writes_the_tokens_and_env() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let port = free_port();
    let tmux = pages(&home, &chatgpt_env(&standin, port));
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("4");
    let address = signin_address(&tmux, &standin);
    let to = browser_opens(&address);
    let back = reqwest::blocking::get(&to).expect("the callback answers");
    assert_eq!(back.status().as_u16(), 200);
    let screen = tmux.wait_for_all(&["/backend-api/codex offers these models", "▸   1  standin"]);
    assert!(!screen.contains("/oauth/authorize"), "the address is gone with its page:\n{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Replace them?");
    tmux.keys(&["y"]);
    tmux.wait_for_all(&["passed: called the tool record_word", "Wrote the sign-in's tokens"]);
    tmux.keys(&["Enter"]);
    ended(&tmux, 0);
    let expected = format!(
        "# mine\nTENERAL_PROVIDER=chatgpt\nTENERAL_BASE_URL={}/backend-api/codex\nTENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=7\nTENERAL_RUNNER=direct\n",
        standin.root()
    );
    assert_eq!(env_of(&home), (expected, 0o600));
    let path = home.join(".teneral/auth/chatgpt.json");
    let mode = std::fs::metadata(&path).expect("the token file").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let tokens = teneral_core::chatgpt::read(&path).expect("the tokens read back");
    assert_eq!(tokens.account_id, "acc-standin-0001");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the port is closed");
}

#[test]
fn esc_on_the_first_page_during_the_sign_in_and_ctrl_c_write_nothing() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let tmux = pages(&home, &[]);
    tmux.wait_for("▸ 1  openai");
    tmux.keys(&["Escape"]);
    let screen = ended(&tmux, 0);
    assert!(screen.contains("Left setup; nothing was written."), "{screen}");
    drop(tmux);

    let port = free_port();
    let tmux = pages(&home, &chatgpt_env(&standin, port));
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("4");
    signin_address(&tmux, &standin);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "listening while it waits");
    tmux.keys(&["Escape"]);
    let screen = ended(&tmux, 1);
    assert!(
        screen.contains("you gave up waiting for the sign-in; nothing was written"),
        "{screen}"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the port is closed");
    drop(tmux);

    let tmux = pages(&home, &[]);
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("2");
    tmux.wait_for("Address:");
    tmux.type_text("http://half-typed");
    tmux.keys(&["C-c"]);
    let screen = ended(&tmux, 1);
    assert!(
        screen.contains("you gave up (Ctrl-C) at the address; nothing was written"),
        "{screen}"
    );
    assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640));
    assert!(!home.join(".teneral/auth/chatgpt.json").exists());
}

fn chatgpt_env(standin: &Standin, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("TENERAL_CHATGPT_ISSUER", standin.root().to_owned()),
        ("TENERAL_CHATGPT_URL", format!("{}/backend-api/codex", standin.root())),
        ("TENERAL_CALLBACK_PORT", port.to_string()),
    ]
}

/// The sign-in page's address: written to the terminal as one OSC 8 link
/// (seen through tmux's pipe-pane), and on the screen whole on one line once
/// the terminal's wrapping is joined (`capture-pane -J`).
fn signin_address(tmux: &common::Tmux, standin: &Standin) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let start = format!("\x1b]8;;{}/oauth/authorize?", standin.root());
    let link = loop {
        let written = std::fs::read(tmux.dir.path().join("written")).unwrap_or_default();
        let written = String::from_utf8_lossy(&written).into_owned();
        let link = written.find(&start).and_then(|at| {
            let rest = &written[at + 5..];
            let end = rest.find("\x1b\\")?;
            let address = &rest[..end];
            let whole = format!("{address}\x1b\\{address}\x1b]8;;\x1b\\");
            rest.starts_with(&whole).then(|| address.to_owned())
        });
        if let Some(link) = link {
            break link;
        }
        assert!(std::time::Instant::now() < deadline, "no OSC 8 link was written: {written:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(link.contains("&state="), "{link}");
    loop {
        let joined = tmux.run(&["capture-pane", "-p", "-J", "-t", "0"]);
        let joined = String::from_utf8_lossy(&joined.stdout).into_owned();
        if joined.lines().any(|l| l.trim() == link) && joined.contains("Waiting for your browser") {
            return link;
        }
        assert!(std::time::Instant::now() < deadline, "{link} is not whole on one line:\n{joined}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_taken_port_or_a_refused_sign_in_ends_on_the_last_page_writing_nothing() {
    if !common::system_tests() {
        return;
    }
    let standin = common::standin(WORDS_THEN_CALL, Some(KEY));
    let (_dir, home) = home(Some(OTHER));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to take");
    let port = taken.local_addr().expect("its address").port();
    let tmux = pages_of_width(&home, &chatgpt_env(&standin, port), 250);
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("4");
    tmux.wait_for_all(&[&format!("port {port} on 127.0.0.1 is taken"), "TENERAL_CALLBACK_PORT="]);
    tmux.keys(&["Enter"]);
    ended(&tmux, 1);
    drop(tmux);

    let port = free_port();
    let tmux = pages_of_width(&home, &chatgpt_env(&standin, port), 250);
    tmux.wait_for("▸ 1  openai");
    tmux.type_text("4");
    let address = signin_address(&tmux, &standin);
    let to = browser_opens(&format!("{address}&standin_decision=deny"));
    assert!(to.contains("error=access_denied"), "{to}");
    let _ = reqwest::blocking::get(&to);
    tmux.wait_for("Nothing was written: the sign-in was refused: access_denied");
    tmux.keys(&["Enter"]);
    ended(&tmux, 1);
    assert_eq!(env_of(&home), (OTHER.to_owned(), 0o640));
    assert!(!home.join(".teneral/auth/chatgpt.json").exists());
}
