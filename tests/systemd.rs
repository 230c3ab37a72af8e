//! System tests under a real `systemd --user` and journald: the units, the
//! generation as a transient unit with its limits, journald's fields, the
//! owner's commands. They run when `scripts/with-systemd` started a user
//! manager for them (it sets `TENERAL_TEST_SYSTEMD=1`; `scripts/test` runs
//! them that way); anywhere else each says why it skips.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

mod journald;
mod leftover;
mod runner;
mod scope;

const LONG: Duration = Duration::from_secs(240);
pub(super) const SHORT: Duration = Duration::from_secs(30);

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
{"expect": "ping", "reply": "pong from the stand-in"}
"#;

/// `program` with `args`, within [`QUICK`]: a command that hangs fails
/// naming itself.
pub(super) fn run(program: &str, args: &[&str]) -> std::io::Result<Output> {
    run_within(Command::new(program).args(args), QUICK, "a step of a system test")
        .map_err(std::io::Error::other)
}

pub(super) fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

pub(super) fn systemctl(args: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
    let mut all = vec!["--user", "--no-pager"];
    all.extend_from_slice(args);
    let out = run("systemctl", &all)?;
    Ok(text(&out))
}

/// Installs the units (both, or the template alone) for `dir` with this
/// build's `teneral`, into the manager's runtime unit directory.
fn install_units(runtime: &str, dir: &Path, template_only: bool) -> TestResult {
    let script = repo_root().join("scripts/install-units");
    let mut cmd = Command::new(script);
    cmd.arg("--dir").arg(dir).arg("--bin").arg(teneral());
    cmd.arg("--unit-dir").arg(format!("{runtime}/systemd/user"));
    if template_only {
        cmd.arg("--template-only");
    }
    let out = run_within(&mut cmd, QUICK, "installing the units")?;
    assert!(out.status.success(), "install-units: {}", text(&out));
    Ok(())
}

/// The instance of `teneral@.service` for `dir`.
fn instance(dir: &Path) -> String {
    format!("teneral@{}.service", teneral::runner::systemd::instance_for(dir))
}

/// Waits until `systemctl --user <args>` prints something `pred` accepts.
fn wait_systemctl(args: &[&str], pred: impl Fn(&str) -> bool) -> Result<String, String> {
    let end = Instant::now() + LONG;
    loop {
        let out = systemctl(args).map_err(|e| e.to_string())?;
        if pred(&out) {
            return Ok(out);
        }
        if Instant::now() > end {
            return Err(format!("systemctl --user {args:?} never matched; last:\n{out}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// journald's entries matching `matches`, as JSON objects (waits for one).
fn journal_entries(matches: &[&str], want: impl Fn(&Value) -> bool) -> Result<Value, String> {
    let end = Instant::now() + SHORT;
    loop {
        let mut args = vec!["--no-pager", "-o", "json"];
        args.extend_from_slice(matches);
        let out = run("journalctl", &args).map_err(|e| e.to_string())?;
        let lines = String::from_utf8_lossy(&out.stdout).into_owned();
        let found = lines.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(&want);
        if let Some(entry) = found {
            return Ok(entry);
        }
        if Instant::now() > end {
            return Err(format!("journalctl {matches:?}: nothing matched in\n{lines}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn systemctl_starts_talks_to_and_stops_teneral() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::seed(
        SCRIPT,
        &["TENERAL_RUNNER=systemd", "TENERAL_MEMORY_MAX=512M", "TENERAL_TASKS_MAX=200"],
    )?;
    install_units(&runtime, ind.path(), false)?;
    systemctl(&["daemon-reload"])?;
    let commit = ind.head()?;
    let short = &commit[..7];

    let out = run("systemctl", &["--user", "start", "teneral"])?;
    assert!(out.status.success(), "start: {}", text(&out));
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let status = wait_systemctl(&["status", "teneral"], |s| s.contains("resting"))?;
    assert!(status.contains(&format!("Status: \"generation {short}: resting\"")), "{status}");

    // The body is a transient unit of its own, with the owner's limits.
    let gen = format!("teneral-gen-{short}.service");
    let shown = systemctl(&["show", &gen, "-p", "ActiveState,MemoryMax,TasksMax,KillMode"])?;
    for want in
        ["ActiveState=active", "MemoryMax=536870912", "TasksMax=200", "KillMode=control-group"]
    {
        assert!(shown.contains(want), "{want} in:\n{shown}");
    }
    let body_pid =
        ind.events("generation.started").last().and_then(|e| e["pid"].as_u64()).unwrap_or(0) as u32;
    let main_pid = systemctl(&["show", &gen, "-p", "MainPID", "--value"])?;
    assert_eq!(main_pid.trim(), body_pid.to_string(), "the journaled pid is the unit's");

    let (code, said, err) = talk(ind.path(), "ping\n", 120)?;
    assert_eq!(code, Some(0), "talk: {said}\n{err}");
    assert!(said.contains("pong from the stand-in"), "{said}");

    let out = Command::new(teneralctl())
        .args(["status", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("running (kernel pid"), "{report}");
    assert!(report.contains(&format!("generation: {short}")), "{report}");
    assert!(report.contains(&format!("body: {gen}")), "{report}");

    // The kernel's lines are in journald with their fields.
    let reply =
        journal_entries(&["_SYSTEMD_USER_UNIT=teneral.service", "TENERAL_EVENT=reply"], |e| {
            e["MESSAGE"].as_str().is_some_and(|m| m.contains("pong from the stand-in"))
        })?;
    assert_eq!(reply["TENERAL_COMMIT"], Value::from(commit.clone()), "{reply}");
    assert_eq!(reply["PRIORITY"], "6", "{reply}");
    assert_eq!(reply["SYSLOG_IDENTIFIER"], "teneral", "{reply}");
    journal_entries(
        &["_SYSTEMD_USER_UNIT=teneral.service", "TENERAL_EVENT=generation.started"],
        |e| e["MESSAGE"].as_str().is_some_and(|m| m.contains(&gen)),
    )?;

    let began = Instant::now();
    let out = run("systemctl", &["--user", "stop", "teneral"])?;
    assert!(out.status.success(), "stop: {}", text(&out));
    assert!(began.elapsed() < Duration::from_secs(15), "stopped in {:?}", began.elapsed());
    assert!(!alive(body_pid), "the body ended with the kernel");
    let gone = systemctl(&["show", &gen, "-p", "ActiveState", "--value"])?;
    assert!(gone.trim() == "inactive" || gone.trim().is_empty(), "{gen}: {gone}");
    let journal = ind.journal();
    assert_eq!(journal.last().map(|e| e["type"].clone()), Some(Value::from("kernel.stopped")));
    assert!(
        ind.events("generation.exited").is_empty(),
        "the kernel stopped its body itself; systemd did not end it first"
    );
    assert!(
        journal.iter().any(|e| e["type"] == "reply" && e["text"] == "pong from the stand-in"),
        "nothing lost"
    );
    let out = Command::new(teneralctl())
        .args(["status", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("not running"), "{}", text(&out));
    Ok(())
}

/// A body crate whose `main` is `main_rs`.
fn body_of(main_rs: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("body/Cargo.toml", "[package]\nname = \"teneral-body\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
        (
            "body/Cargo.lock",
            "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"teneral-body\"\nversion = \"0.1.0\"\n",
        ),
        ("body/src/main.rs", main_rs),
    ]
}

/// Starts the individual as its `teneral@` instance and waits until the
/// kernel gave up on it (the instance failed with status 3).
fn run_until_it_gives_up(runtime: &str, ind: &Individual) -> TestResult {
    install_units(runtime, ind.path(), true)?;
    systemctl(&["daemon-reload"])?;
    let unit = instance(ind.path());
    let out = run("systemctl", &["--user", "start", &unit])?;
    assert!(out.status.success(), "start {unit}: {}", text(&out));
    wait_systemctl(&["show", &unit, "-p", "ActiveState", "--value"], |s| {
        s.trim() == "failed" || s.trim() == "inactive"
    })?;
    let status = systemctl(&["show", &unit, "-p", "ExecMainStatus", "--value"])?;
    assert_eq!(status.trim(), "3", "the kernel gave up: {}", systemctl(&["status", &unit])?);
    let _ = systemctl(&["reset-failed", &unit]);
    Ok(())
}

const ALLOCATE: &str = r#"fn main() {
    eprintln!("allocating past any sane limit");
    let mut kept: Vec<Vec<u8>> = Vec::new();
    for _ in 0..4096 {
        kept.push(vec![7u8; 1 << 20]);
    }
    eprintln!("still alive with {} MiB", kept.len());
}
"#;

#[test]
fn a_body_past_its_memory_limit_is_killed_and_the_rules_apply() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::with_body(
        &body_of(ALLOCATE),
        "",
        &["TENERAL_RUNNER=systemd", "TENERAL_MEMORY_MAX=64M"],
    )?;
    run_until_it_gives_up(&runtime, &ind)?;
    let exits = ind.events("generation.exited");
    assert_eq!(exits.len(), 3, "three kills, then the rules gave up: {exits:?}");
    for e in &exits {
        assert_eq!(e["status"], "killed by signal 9", "{e}");
        assert!(e["result"] == "signal" || e["result"] == "oom-kill", "{e}");
    }
    // The body's own output is found by its unit.
    let gen = format!("teneral-gen-{}.service", &ind.head()?[..7]);
    let line = journal_entries(&["--user-unit", &gen], |e| {
        e["MESSAGE"].as_str().is_some_and(|m| m.contains("allocating past any sane limit"))
    })?;
    assert_eq!(line["TENERAL_EVENT"], "output", "{line}");
    let report = Command::new(teneralctl())
        .args(["status", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    let report = text(&report);
    assert!(report.contains("stopped by itself"), "{report}");
    assert!(report.contains("with status 3: generation"), "{report}");
    assert!(report.contains("three crashes in a row"), "{report}");
    let (_, _, said) = talk(ind.path(), "", 5)?;
    assert!(said.contains("teneral is not running"), "{said}");
    assert!(said.contains("it stopped by itself at"), "talk says why: {said}");

    // The next start says once more why the last one stopped.
    run_until_it_gives_up(&runtime, &ind)?;
    journal_entries(&["SYSLOG_IDENTIFIER=teneral", "PRIORITY=5"], |e| {
        e["MESSAGE"].as_str().is_some_and(|m| {
            m.contains("last time the kernel stopped by itself")
                && m.contains("three crashes")
                && e["_SYSTEMD_USER_UNIT"] == instance(ind.path()).as_str()
        })
    })?;
    Ok(())
}

const FORK_BOMB: &str = r#"fn main() {
    let mut children = Vec::new();
    loop {
        match std::process::Command::new("sleep").arg("3131").spawn() {
            Ok(child) => children.push(child),
            Err(e) => {
                eprintln!("fork refused after {} children: {e}", children.len());
                std::process::exit(9);
            }
        }
        if children.len() > 10_000 {
            eprintln!("never refused");
            std::process::exit(0);
        }
    }
}
"#;

/// Processes running `sleep 3131` (the fork bomb's children).
fn bomb_children() -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.starts_with(b"sleep\0") && c.ends_with(b"3131\0"))
        })
        .count()
}

#[test]
fn a_fork_bomb_is_stopped_by_tasks_max() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::with_body(
        &body_of(FORK_BOMB),
        "",
        &["TENERAL_RUNNER=systemd", "TENERAL_TASKS_MAX=16"],
    )?;
    run_until_it_gives_up(&runtime, &ind)?;
    let notice = ind.events("kernel.notice");
    let said = notice.iter().filter_map(|e| e["text"].as_str()).collect::<Vec<_>>().join("\n");
    assert!(said.contains("fork refused after"), "{said}");
    assert!(said.contains("Resource temporarily unavailable"), "EAGAIN from the cgroup: {said}");
    let refused_after: usize = said
        .split("fork refused after ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    assert!(refused_after < 16, "capped below TasksMax: {refused_after}");
    let end = Instant::now() + SHORT;
    while bomb_children() > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(bomb_children(), 0, "every child went with its unit");
    Ok(())
}

#[test]
fn a_killed_kernel_takes_its_generation_unit_with_it() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::seed(SCRIPT, &["TENERAL_RUNNER=systemd"])?;
    install_units(&runtime, ind.path(), true)?;
    systemctl(&["daemon-reload"])?;
    let unit = instance(ind.path());
    let out = run("systemctl", &["--user", "start", &unit])?;
    assert!(out.status.success(), "start {unit}: {}", text(&out));
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let gen = format!("teneral-gen-{}.service", &ind.head()?[..7]);
    let bound = systemctl(&["show", &gen, "-p", "BindsTo", "--value"])?;
    assert_eq!(bound.trim(), unit, "the body's unit is bound to the kernel's");
    let body_pid =
        ind.events("generation.started").last().and_then(|e| e["pid"].as_u64()).unwrap_or(0) as u32;
    let out = run("systemctl", &["--user", "kill", "--signal=KILL", "--kill-whom=main", &unit])?;
    assert!(out.status.success(), "kill: {}", text(&out));
    wait_systemctl(&["show", &gen, "-p", "ActiveState", "--value"], |s| {
        s.trim() == "inactive" || s.trim() == "failed" || s.trim().is_empty()
    })?;
    let end = Instant::now() + SHORT;
    while alive(body_pid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(body_pid), "the body does not outlive a killed kernel");
    let _ = systemctl(&["reset-failed", &unit]);
    Ok(())
}

#[test]
fn runner_systemd_without_a_manager_refuses_to_start_and_says_why() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::seed(SCRIPT, &["TENERAL_RUNNER=systemd"])?;
    let out = Command::new(teneral())
        .args(["run", "--dir"])
        .arg(ind.path())
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("XDG_RUNTIME_DIR", ind.path().join("no-runtime-dir"))
        .output_within(SLOW)?;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("TENERAL_RUNNER=systemd, but no user manager"), "{said}");
    assert!(said.contains("TENERAL_RUNNER=auto"), "says what to do: {said}");
    Ok(())
}
