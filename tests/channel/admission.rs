//! Who the channel admits: the body and the processes it starts, also when
//! they connect before the kernel has named the body (they wait for it); a
//! foreign process is refused and closed, by a channel served in the test
//! and by a real kernel; a connection no body claims in time is refused.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use teneral::events::{Admit, Bounds, Channel};
use teneral_core::commit::Commit;

use super::{answer, ask, closed, error_of, SHORT};
use crate::common::*;

/// A client process for [`only_the_body_and_what_it_starts_are_admitted`]:
/// when the test runs it, it connects to the socket it is given, sends one
/// line and prints the answer. Run alone (without the variables), it does
/// nothing.
#[test]
fn client_process_for_the_admission_test() -> TestResult {
    let Some(socket) = std::env::var_os("TENERAL_TEST_CHANNEL_SOCKET") else { return Ok(()) };
    let mut stream = UnixStream::connect(socket)?;
    println!("CONNECTED");
    stream.set_read_timeout(Some(SHORT))?;
    let got = ask(&mut stream, r#"{"type":"note","kind":"from-the-body","data":1}"#)?;
    println!("ANSWER {got}");
    Ok(())
}

/// Serves a channel in this process with `admit` within `limits`, on a
/// thread of its own.
fn serve_here(
    home: &Path,
    admit: Admit,
    limits: Bounds,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(home.join("memory"))?;
    let commit = Commit::parse("0123456789abcdef0123456789abcdef01234567")?;
    let socket = teneral::events::socket_path(home, &commit, "here")?;
    let journal = teneral_core::journal::writer::Journal::open(&home.join("memory/journal.jsonl"))?;
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (path, home) = (socket.clone(), home.to_owned());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(rt) = rt else { return };
        rt.block_on(async move {
            let (seen, mut drain) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move { while drain.recv().await.is_some() {} });
            let channel = Channel { home, commit, journal: Arc::new(Mutex::new(journal)), seen };
            match teneral::events::bind(&path) {
                Ok(listener) => {
                    let _ = ready_tx.send(());
                    channel.serve_within(listener, admit, limits).await;
                }
                Err(e) => eprintln!("cannot bind {}: {e}", path.display()),
            }
        });
    });
    ready.recv_timeout(SHORT)?;
    Ok(socket)
}

#[test]
fn only_the_body_and_what_it_starts_are_admitted() -> TestResult {
    let home = tempfile::Builder::new().prefix("tnl-ad").tempdir()?;
    let admit = Admit::new();
    let socket = serve_here(home.path(), admit.clone(), Bounds::CHANNEL)?;

    // Made before the body is named, this one waits, then is judged foreign.
    let mut early = UnixStream::connect(&socket)?;
    early.set_read_timeout(Some(SHORT))?;

    // The body: a shell that waits for a word, then runs a client as its child.
    let exe = std::env::current_exe()?;
    let mut body = Command::new("sh")
        .arg("-c")
        .arg(r#"read go; "$0" "$@""#)
        .arg(exe)
        .args([
            "channel::admission::client_process_for_the_admission_test",
            "--exact",
            "--nocapture",
        ])
        .env("TENERAL_TEST_CHANNEL_SOCKET", &socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    admit.set_body(body.id(), None);
    let error = error_of(&answer(&early)?);
    let me = std::process::id();
    assert!(error.contains(&format!("refused: process {me} (uid ")), "{error}");
    assert!(closed(&mut early));

    let mut foreign = UnixStream::connect(&socket)?;
    foreign.set_read_timeout(Some(SHORT))?;
    let error = error_of(&answer(&foreign)?);
    let want = format!("refused: process {me} (uid ");
    assert!(error.contains(&want), "{error}");
    assert!(
        error.contains(&format!("is not this generation's body (pid {})", body.id())),
        "{error}"
    );
    assert!(closed(&mut foreign));

    body.stdin.take().ok_or("no stdin")?.write_all(b"go\n")?;
    let out = body.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#"ANSWER {"ok":true,"seq":1}"#),
        "the body's child was served:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The client process, started as the body, connects at once; only then is
/// the body named, as a kernel names it once its starter returns.
#[test]
fn a_body_that_connects_before_it_is_named_is_served_once_named() -> TestResult {
    let home = tempfile::Builder::new().prefix("tnl-ad").tempdir()?;
    let admit = Admit::new();
    let socket = serve_here(home.path(), admit.clone(), Bounds::CHANNEL)?;
    let mut body = Command::new(std::env::current_exe()?)
        .args([
            "channel::admission::client_process_for_the_admission_test",
            "--exact",
            "--nocapture",
        ])
        .env("TENERAL_TEST_CHANNEL_SOCKET", &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut out = std::io::BufReader::new(body.stdout.take().ok_or("no stdout")?);
    let mut seen = String::new();
    while !seen.contains("CONNECTED") {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut out, &mut line)? == 0 {
            return Err(format!("the client ended before connecting:\n{seen}").into());
        }
        seen.push_str(&line);
    }
    admit.set_body(body.id(), None);
    std::io::Read::read_to_string(&mut out, &mut seen)?;
    let status = body.wait()?;
    assert!(
        seen.contains(r#"ANSWER {"ok":true,"seq":1}"#),
        "the early body was served ({status}):\n{seen}"
    );
    Ok(())
}

#[test]
fn a_connection_no_body_claims_in_time_is_refused_as_not_started() -> TestResult {
    let home = tempfile::Builder::new().prefix("tnl-ad").tempdir()?;
    let limits = Bounds { unnamed: Duration::from_millis(200), ..Bounds::CHANNEL };
    let socket = serve_here(home.path(), Admit::new(), limits)?;
    let mut early = UnixStream::connect(&socket)?;
    early.set_read_timeout(Some(SHORT))?;
    let error = error_of(&answer(&early)?);
    assert!(error.contains("body has not started yet"), "{error}");
    assert!(closed(&mut early));
    Ok(())
}

#[test]
fn a_foreign_process_is_refused_by_a_real_kernel() -> TestResult {
    let ind = Individual::new(r#"{"reply": "Hello."}"#, &[])?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", Duration::from_secs(240), |e| e["type"] == "turn.ended")?;
    let started = ind.events("generation.started");
    let socket = started.last().and_then(|e| e["events"].as_str()).ok_or("no socket")?;
    let before = std::fs::read(ind.path().join("memory/journal.jsonl"))?;

    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(SHORT))?;
    // The refusal comes before anything is read; the line sent is never taken.
    let _ = stream.write_all(b"{\"type\":\"reply\",\"text\":\"forged\"}\n");
    let error = error_of(&answer(&stream)?);
    let me = std::process::id();
    assert!(error.contains(&format!("refused: process {me} (uid ")), "{error}");
    assert!(error.contains("is not this generation's body"), "{error}");
    assert!(closed(&mut stream));
    let log = ind.kernel_log();
    assert!(log.contains(&format!("a connection from pid {me} uid ")), "{log}");
    assert!(log.contains("refused: process"), "{log}");
    let after = std::fs::read(ind.path().join("memory/journal.jsonl"))?;
    assert_eq!(after, before, "nothing was journaled");
    Ok(())
}
