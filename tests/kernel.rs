//! The kernel end to end: `teneral run` on temporary individuals, with the
//! fixture body (tests/fixtures/body), the stand-in model and `teneralctl talk`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(240);
const SHORT: Duration = Duration::from_secs(20);

/// The birth turn takes the first step; the owner's line the second.
const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
{"expect": "ping", "reply": "pong from the stand-in"}
"#;

#[test]
fn a_line_through_talk_is_answered_and_journaled() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let commit = ind.head()?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth reply", LONG, |e| e["type"] == "reply")?;

    let (status, out, err) = talk(ind.path(), "ping\n", 120)?;
    assert_eq!(
        status,
        Some(0),
        "talk failed; stdout:\n{out}\nstderr:\n{err}\nlog:\n{}",
        ind.kernel_log()
    );
    assert!(out.contains("pong from the stand-in"), "talk printed:\n{out}");

    let line = ind
        .wait_for("the owner line", SHORT, |e| e["type"] == "owner.line" && e["text"] == "ping")?;
    let reply = ind.wait_for("the reply", SHORT, |e| {
        e["type"] == "reply" && e["text"] == "pong from the stand-in"
    })?;
    let ready = ind.wait_for("ready", SHORT, |e| e["type"] == "generation.ready")?;
    for event in [&line, &reply, &ready] {
        assert_eq!(event["commit"], Value::String(commit.clone()), "{event}");
        assert!(event["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{event}");
    }
    assert!(line["seq"].as_u64() < reply["seq"].as_u64());
    let file = line["file"].as_str().unwrap_or_default().to_owned();
    assert!(file.ends_with(".txt"), "{line}");
    assert!(!ind.owner_files().contains(&file), "the owner file is gone once journaled");
    let seqs: Vec<u64> = ind.journal().iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "seq counts up by one");
    Ok(())
}

#[test]
fn a_second_supervisor_is_refused() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let _first = ind.start()?;
    ind.wait_for("kernel.started", LONG, |e| e["type"] == "kernel.started")?;
    let out = std::process::Command::new(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .output_within(SLOW)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("another supervisor (pid "), "{err}");
    assert!(err.contains("is already running the individual in"), "{err}");
    Ok(())
}

#[test]
fn a_torn_last_line_is_tolerated() -> TestResult {
    let ind = Individual::new(r#"{"reply": "still here"}"#, &[])?;
    std::fs::create_dir_all(ind.path().join("memory"))?;
    let old = r#"{"type":"reply","ts":"2026-01-01T00:00:00.000Z","seq":1,"commit":"abc","text":"from before"}"#;
    std::fs::write(ind.path().join("memory/journal.jsonl"), format!("{old}\n{{\"type\":\"repl"))?;
    let _kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    teneral_core::owner::write_line(ind.path(), "hello after a crash")?;
    let reply =
        ind.wait_for("a reply", LONG, |e| e["type"] == "reply" && e["text"] == "still here")?;
    assert!(reply["seq"].as_u64() > Some(1), "numbering goes on after the whole line: {reply}");
    let text = std::fs::read_to_string(ind.path().join("memory/journal.jsonl"))?;
    assert!(
        text.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "every line whole:\n{text}"
    );
    let aside = std::fs::read_dir(ind.path().join("memory"))?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains("torn"));
    assert!(aside, "the torn bytes were kept aside");
    Ok(())
}

#[test]
fn a_body_that_keeps_crashing_is_stopped_by_the_rules() -> TestResult {
    let ind = Individual::with_mode("crash", "", &[])?;
    let mut kernel = ind.start()?;
    let status = kernel.wait(LONG)?;
    assert_eq!(status, Some(3), "gave up; log:\n{}", ind.kernel_log());
    let exits = ind.events("generation.exited");
    assert_eq!(exits.len(), 3, "three crashes, then it stopped: {exits:?}");
    assert!(exits.iter().all(|e| e["status"] == "exit status 7"), "{exits:?}");
    let stopped = ind.events("kernel.stopped");
    let reason = stopped.last().and_then(|e| e["reason"].as_str()).unwrap_or_default().to_owned();
    assert!(reason.contains("three crashes in a row without a reply"), "{reason}");
    let notice = ind.events("kernel.notice");
    assert!(
        notice
            .iter()
            .any(|e| e["text"].as_str().is_some_and(|t| t.contains("crashing on purpose"))),
        "the end of its stderr is journaled: {notice:?}"
    );
    let state: Value =
        serde_json::from_slice(&std::fs::read(ind.path().join(".teneral/state.json"))?)?;
    assert!(
        state["stopped"]["reason"].as_str().is_some_and(|r| r.contains("three crashes")),
        "{state}"
    );
    Ok(())
}

#[test]
fn a_line_written_while_down_is_answered_after_the_start() -> TestResult {
    let ind = Individual::new(r#"{"reply": "born"}"#, &[])?;
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    kernel.signal(15);
    assert_eq!(kernel.wait(SHORT)?, Some(0));
    // Each start serves the script from its first step.
    std::fs::write(
        ind.path().join("script.jsonl"),
        r#"{"expect": "are you there", "reply": "yes, I am back"}"#,
    )?;
    let name = teneral_core::owner::write_line(ind.path(), "are you there")?;
    std::thread::sleep(Duration::from_millis(300));
    assert!(ind.owner_files().contains(&name), "nobody takes it in while the kernel is down");
    let _kernel = ind.start()?;
    let line = ind.wait_for("the waiting line", LONG, |e| e["type"] == "owner.line")?;
    assert_eq!(line["file"], Value::String(name.clone()));
    ind.wait_for("its answer", SHORT, |e| e["type"] == "reply" && e["text"] == "yes, I am back")?;
    assert!(!ind.owner_files().contains(&name));
    Ok(())
}

#[test]
fn sigterm_stops_body_and_kernel_promptly_and_nothing_is_lost() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let mut kernel = ind.start()?;
    let started = ind.wait_for("the body", LONG, |e| e["type"] == "generation.ready")?;
    let body_pid =
        ind.events("generation.started").last().and_then(|e| e["pid"].as_u64()).unwrap_or(0) as u32;
    assert!(alive(body_pid), "body {body_pid} runs: {started}");
    let before = ind.journal().len();
    kernel.signal(15);
    let status = kernel.wait(Duration::from_secs(8))?;
    assert_eq!(status, Some(0));
    assert!(!alive(body_pid), "the body is gone with the kernel");
    let journal = ind.journal();
    assert!(journal.len() > before);
    assert_eq!(journal.last().map(|e| e["type"].clone()), Some(Value::from("kernel.stopped")));
    Ok(())
}

/// A kernel stopped by SIGTERM while the gate checks a mutation ends the
/// check with its process group; at its end it does not speak of a killed
/// kernel, and does not count as left running what had already ended or
/// was ending (with the fixture body, which ends when asked, nothing is
/// left). Stopped alone, and stopped as a service manager stops a unit:
/// SIGTERM to the kernel and every process of its children's groups at once.
#[test]
fn a_kernel_stopped_by_sigterm_during_a_check_speaks_of_no_killed_kernel() -> TestResult {
    for whole_unit in [false, true] {
        stopped_during_a_check(whole_unit)?;
    }
    Ok(())
}

/// The same for a kernel stopped while it builds the body, as an owner may
/// stop the first start: the build is ended with its group, and nothing of
/// it is counted as left running by a killed kernel.
#[test]
fn a_kernel_stopped_by_sigterm_during_the_build_speaks_of_no_killed_kernel() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let home = ind.path();
    // Its own build cache, so that the body is compiled, not found built.
    std::fs::remove_file(home.join(".teneral/target"))?;
    let mut kernel = ind.start()?;
    let status = home.join(".teneral/status");
    let end = std::time::Instant::now() + LONG;
    while !std::fs::read_to_string(&status).unwrap_or_default().contains("building the body") {
        assert!(std::time::Instant::now() < end, "no build began:\n{}", ind.kernel_log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(SHORT)?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    assert!(!log.contains("killed kernel"), "a stop by SIGTERM speaks of a killed kernel:\n{log}");
    assert!(!log.contains("left running"), "a stop counted processes it had ended:\n{log}");
    Ok(())
}

fn stopped_during_a_check(whole_unit: bool) -> TestResult {
    let script = "{\"reply\": \"Hello.\"}\n";
    let ind = Individual::with_mode("mutate", script, &[])?;
    let home = ind.path();
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let to = crate::replay::candidate(home, "tool-first")?;
    teneral_core::owner::write_line(home, &to)?;
    ind.wait_for("the request", LONG, |e| e["type"] == "mutation.requested")?;
    // A step of the gate under way, with processes of its own.
    let status = home.join(".teneral/status");
    let end = std::time::Instant::now() + LONG;
    while !std::fs::read_to_string(&status).unwrap_or_default().contains("checking mutation") {
        assert!(std::time::Instant::now() < end, "no check began:\n{}", ind.kernel_log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let groups: Vec<u32> = std::fs::read_to_string(home.join(teneral::spawn::CHILDREN_PATH))?
        .lines()
        .skip(1)
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert!(!groups.is_empty(), "the kernel lists no child's group during a check");
    kernel.signal(libc::SIGTERM);
    if whole_unit {
        for group in groups {
            if let Some(g) = rustix::process::Pid::from_raw(group as i32) {
                let _ = rustix::process::kill_process_group(g, rustix::process::Signal::TERM);
            }
        }
    }
    assert_eq!(kernel.wait(SHORT)?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    let how = if whole_unit { "with its children's groups" } else { "alone" };
    assert!(log.contains("kernel.stopped"), "{how}: {log}");
    assert!(!log.contains("killed kernel"), "stopped {how}, it speaks of a killed kernel:\n{log}");
    assert!(!log.contains("left running"), "stopped {how}, it counted processes ended:\n{log}");
    Ok(())
}

/// The same for a kernel stopped while the gate warms up (the checks of the
/// running tree, run in the background once its body has started; the
/// kernel's take minutes on a real kernel): the warm-up is stopped, not
/// counted as left running.
#[test]
fn a_kernel_stopped_by_sigterm_during_the_warm_up_speaks_of_no_killed_kernel() -> TestResult {
    let ind = Individual::new(SCRIPT, &["TENERAL_WARM_GATE=on"])?;
    let home = ind.path();
    std::fs::write(
        home.join("src/lib.rs"),
        "//! A kernel whose tests take long.\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    \
         fn it_takes_long() {\n        std::thread::sleep(std::time::Duration::from_secs(300));\n    \
         }\n}\n",
    )?;
    commit_all(home, "a kernel whose tests take long")?;
    let mut kernel = ind.start()?;
    let end = std::time::Instant::now() + LONG;
    while !ind.kernel_log().contains("running 1 test") {
        assert!(
            std::time::Instant::now() < end,
            "no test of the warm-up began:\n{}",
            ind.kernel_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(SHORT)?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    assert!(log.contains("stopped the gate's warm-up"), "the stop does not say so:\n{log}");
    assert!(!log.contains("killed kernel"), "a stop by SIGTERM speaks of a killed kernel:\n{log}");
    assert!(!log.contains("left running"), "a stop counted the warm-up as left running:\n{log}");
    Ok(())
}

#[test]
fn a_killed_kernel_leaves_no_body_and_the_next_one_starts() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let mut kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let body_pid =
        ind.events("generation.started").last().and_then(|e| e["pid"].as_u64()).unwrap_or(0) as u32;
    kernel.signal(9);
    kernel.wait(SHORT)?;
    let end = std::time::Instant::now() + SHORT;
    while alive(body_pid) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(body_pid), "the body does not outlive a killed kernel");
    let _next = ind.start()?;
    ind.wait_for("a second start", LONG, |e| {
        e["type"] == "generation.started" && e["pid"] != body_pid
    })?;
    Ok(())
}

#[test]
fn an_owner_line_is_journaled_only_as_the_owner_wrote_it() -> TestResult {
    let dir = tempfile::Builder::new().prefix("tnl").tempdir()?;
    let home = dir.path();
    let socket = home.join("ev.sock");
    let mut server = std::process::Command::new(teneral())
        .args(["serve-events", "--commit", "c0ffee0000000000000000000000000000000000"])
        .arg("--socket")
        .arg(&socket)
        .arg("--home")
        .arg(home)
        .spawn()?;
    let end = std::time::Instant::now() + SHORT;
    while !socket.exists() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let name = teneral_core::owner::write_line(home, "the owner's words")?;
    let ask = |line: String| -> Result<Value, Box<dyn std::error::Error>> {
        let mut stream = UnixStream::connect(&socket)?;
        stream.set_read_timeout(Some(SHORT))?;
        stream.write_all(format!("{line}\n").as_bytes())?;
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer)?;
        Ok(serde_json::from_str(&answer)?)
    };
    let forged = serde_json::json!({"type": "owner.line", "file": name, "text": "other words"});
    let answer = ask(forged.to_string())?;
    assert_eq!(answer["ok"], false);
    assert!(
        answer["error"].as_str().unwrap_or_default().contains("not what the owner wrote"),
        "{answer}"
    );
    assert!(home.join(".teneral/owner").join(&name).exists(), "a refused line stays for the owner");
    let honest =
        serde_json::json!({"type": "owner.line", "file": name, "text": "the owner's words"});
    let answer = ask(honest.to_string())?;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["seq"], 1);
    assert!(!home.join(".teneral/owner").join(&name).exists(), "removed once journaled");
    let again = ask(honest.to_string())?;
    assert!(
        again["error"].as_str().unwrap_or_default().contains("already taken in"),
        "never twice: {again}"
    );
    let journal = std::fs::read_to_string(home.join("memory/journal.jsonl"))?;
    assert_eq!(journal.lines().count(), 1);
    assert!(
        journal.contains(r#""commit":"c0ffee0000000000000000000000000000000000""#),
        "{journal}"
    );
    let _ = server.kill();
    let _ = server.wait();
    Ok(())
}

/// The full client, in a real terminal (tmux), against a running kernel:
/// the line typed reaches the body through the kernel, and the model's
/// answer comes back onto the screen, under the panel, marked as the
/// owner's line and the agent's reply. A system test (it needs tmux).
#[test]
fn the_full_client_in_a_terminal_talks_with_a_running_kernel() -> TestResult {
    if !system_tests() {
        return Ok(());
    }
    let ind = Individual::new(SCRIPT, &[])?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth reply", LONG, |e| e["type"] == "reply")?;

    let client = format!(
        "env LANG=C.UTF-8 LC_ALL= {} talk -d {}; sleep 600",
        teneralctl().display(),
        ind.path().display()
    );
    let tmux = teneral_testkit::tmux::Tmux::start("kernel-talk", 100, 30, &client);
    let screen = || tmux.screen(false);
    let wait_for = |text: &str| -> Result<String, String> {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let now = screen();
            if now.contains(text) {
                return Ok(now);
            }
            if std::time::Instant::now() > until {
                return Err(format!("{text:?} never came on screen:\n{now}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let result = (|| -> TestResult {
        wait_for("Hello. I have just been born.")?;
        tmux.enter("ping");
        let shown = wait_for("pong from the stand-in")?;
        let ping = shown.find("ping").ok_or("the typed line is not on screen")?;
        let pong = shown.find("pong from the stand-in").ok_or("no reply")?;
        assert!(ping < pong, "the reply came before the line:\n{shown}");
        ind.wait_for("the owner line", SHORT, |e| {
            e["type"] == "owner.line" && e["text"] == "ping"
        })?;
        Ok(())
    })();
    drop(tmux);
    result.map_err(|e| format!("{e}\nkernel log:\n{}", ind.kernel_log()).into())
}
