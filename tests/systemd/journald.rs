//! Journald under a real journald (`scripts/with-systemd`): its socket is
//! there for the kernel, and not there (ENOENT) for a body in the cage,
//! whose new root holds no `/run/systemd/journal`; and every entry the
//! kernel sends names its individual, generation, commit and event, with
//! the priority of its level, read back with `journalctl -o json`.

use std::process::Command;

use serde_json::Value;

use super::{install_units, instance, journal_entries, run, systemctl, text, LONG, SCRIPT};
use crate::common::*;

/// Connects a datagram socket to journald's and sends one entry; prints
/// `SENT` or `ERRNO <n>`.
const PROBE: &str = r#"
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.connect("/run/systemd/journal/socket")
    s.send(b"MESSAGE=teneral journald door probe\nPRIORITY=6\n")
    print("SENT")
except OSError as e:
    print("ERRNO", e.errno)
"#;

#[test]
fn a_body_cannot_write_to_journald() -> TestResult {
    if user_manager().is_none() {
        return Ok(());
    }
    let socket = std::path::Path::new("/run/systemd/journal/socket");
    if !socket.exists() {
        crate::common::skip(&format!(
            "no journald socket at {}; run through scripts/with-systemd",
            socket.display()
        ));
        return Ok(());
    }
    let mut probe = Command::new("/usr/bin/python3");
    probe.args(["-c", PROBE]);
    let outside = run_within(&mut probe, QUICK, "probing journald's socket")?;
    let outside = String::from_utf8_lossy(&outside.stdout).into_owned();
    assert_eq!(outside.trim(), "SENT", "journald takes the kernel's entries");
    let dir = tempfile::Builder::new().prefix("tnl-journald").tempdir()?;
    let profile =
        teneral::confine::Profile::Gate { checkout: dir.path().to_owned(), writable: vec![] };
    let options = teneral::confine::Options { exe: Some(teneral()), ..Default::default() };
    let argv = teneral::confine::wrap_with(
        &profile,
        &options,
        vec!["/usr/bin/python3".into(), "-c".into(), PROBE.into()],
    )?;
    let mut caged = Command::new(&argv[0]);
    caged.args(&argv[1..]).current_dir(dir.path());
    let out = run_within(&mut caged, QUICK, "probing journald's socket from a cage")?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), "ERRNO 2", "journald's socket is not there for a body: {text}");
    Ok(())
}

/// Every entry the kernel of an instance sends carries the individual, the
/// generation (its ordinal) and commit, the event and a priority; a
/// generation that ended is a warning, so `journalctl TENERAL_INDIVIDUAL=...
/// -p warning` finds it and nothing quieter; `teneralctl status` names the
/// instance to start again.
#[test]
fn every_kernel_entry_names_its_individual_and_generation() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let ind = Individual::seed(SCRIPT, &["TENERAL_RUNNER=systemd"])?;
    install_units(&runtime, ind.path(), true)?;
    systemctl(&["daemon-reload"])?;
    let unit = instance(ind.path());
    let dir = ind.path().canonicalize()?.display().to_string();
    let commit = ind.head()?;
    let out = run("systemctl", &["--user", "start", &unit])?;
    assert!(out.status.success(), "start {unit}: {}", text(&out));
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let (code, said, err) = talk(ind.path(), "ping\n", 120)?;
    assert_eq!(code, Some(0), "talk: {said}\n{err}");

    // A generation that ends is a warning: kill the body's unit.
    let gen = format!("teneral-gen-{}.service", &commit[..7]);
    let out = run("systemctl", &["--user", "kill", "--signal=KILL", &gen])?;
    assert!(out.status.success(), "kill {gen}: {}", text(&out));
    ind.wait_for("exited", LONG, |e| e["type"] == "generation.exited")?;
    let individual = format!("TENERAL_INDIVIDUAL={dir}");
    let exited = journal_entries(&[&individual, "-p", "warning"], |e| {
        e["TENERAL_EVENT"] == "generation.exited"
    })?;
    assert_eq!(exited["PRIORITY"], "4", "{exited}");
    let loud = run("journalctl", &["--no-pager", "-o", "json", &individual, "-p", "warning"])?;
    for entry in String::from_utf8_lossy(&loud.stdout).lines() {
        let entry: Value = serde_json::from_str(entry)?;
        let priority = entry["PRIORITY"].as_str().and_then(|p| p.parse::<u8>().ok());
        assert!(priority.is_some_and(|p| p <= 4), "only warnings and worse: {entry}");
    }

    // Every entry the kernel sent itself (the native protocol) has them all.
    journal_entries(&[&format!("_SYSTEMD_USER_UNIT={unit}"), "TENERAL_EVENT=reply"], |_| true)?;
    let sent = run(
        "journalctl",
        &["--no-pager", "-o", "json", &format!("_SYSTEMD_USER_UNIT={unit}"), "_TRANSPORT=journal"],
    )?;
    let entries: Vec<Value> = String::from_utf8_lossy(&sent.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(entries.len() >= 5, "the kernel's entries: {entries:?}");
    let levels = ["3", "4", "5", "6", "7"];
    for entry in &entries {
        assert_eq!(entry["TENERAL_INDIVIDUAL"], dir.as_str(), "{entry}");
        assert_eq!(entry["TENERAL_COMMIT"], commit.as_str(), "{entry}");
        assert_eq!(entry["TENERAL_GENERATION"], "1", "the birth generation: {entry}");
        assert!(entry["TENERAL_EVENT"].as_str().is_some_and(|e| !e.is_empty()), "{entry}");
        assert!(levels.contains(&entry["PRIORITY"].as_str().unwrap_or("")), "{entry}");
    }
    for (event, priority) in [("kernel.started", "5"), ("reply", "6"), ("generation.exited", "4")] {
        assert!(
            entries.iter().any(|e| e["TENERAL_EVENT"] == event && e["PRIORITY"] == priority),
            "{event} at priority {priority}"
        );
    }

    // Stopped, the owner is told to start that instance again.
    let out = run("systemctl", &["--user", "stop", &unit])?;
    assert!(out.status.success(), "stop: {}", text(&out));
    let out = Command::new(teneralctl())
        .args(["status", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert!(report.contains(&format!("start it with: systemctl --user start {unit}")), "{report}");
    let _ = systemctl(&["reset-failed", &unit]);
    Ok(())
}
