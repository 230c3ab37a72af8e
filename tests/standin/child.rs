//! The stand-in as the kernel runs it: a child process of its own in the
//! cage's `model` profile, reached through the kernel's proxy, gone with the
//! kernel; and the profile's rules, each proven by a deliberate violation.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use teneral::confine::{self, Profile};

use crate::cage::require_cage;
use crate::common::*;

const LONG: Duration = Duration::from_secs(240);
const SHORT: Duration = Duration::from_secs(20);

/// The descendants of `ancestor` (its children, theirs, and so on) whose
/// command line holds `word`. Through the executed helper, the kernel's
/// child is the helper, whose command line names the program; through the
/// cage's zygote, the kernel's child is the zygote's fork; either way the
/// stand-in itself is a descendant further down.
fn descendants_running(ancestor: u32, word: &str) -> Vec<u32> {
    let mut parent_of = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let ppid = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(1));
        if let Some(ppid) = ppid.and_then(|p| p.parse::<u32>().ok()) {
            parent_of.insert(pid, ppid);
        }
    }
    let descends = |mut pid: u32| {
        while let Some(&parent) = parent_of.get(&pid) {
            if parent == ancestor {
                return true;
            }
            if parent <= 1 {
                return false;
            }
            pid = parent;
        }
        false
    };
    let mut found: Vec<u32> = parent_of
        .keys()
        .copied()
        .filter(|&pid| descends(pid))
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).any(|arg| arg == word.as_bytes())
        })
        .collect();
    found.sort();
    found
}

fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

#[test]
fn the_kernel_runs_the_stand_in_as_a_caged_child_that_dies_with_it() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let script = "{\"reply\": \"Hello from a child.\"}\n";
    let ind = Individual::new(script, &["TENERAL_STANDIN_LOG=standin.jsonl"])?;
    let mut kernel = ind.start()?;
    // The birth turn went body -> the kernel's proxy -> the stand-in child.
    ind.wait_for("the birth reply", LONG, |e| {
        e["type"] == "reply" && e["text"] == "Hello from a child."
    })?;
    let log = std::fs::read_to_string(ind.path().join("standin.jsonl"))?;
    assert!(log.contains("/v1/"), "the child logged the request it served:\n{log}");

    // By default (the direct runner) the cage's zygote forks it.
    let log = ind.kernel_log();
    assert!(log.contains("confined launches are forked by the cage's zygote"), "{log}");
    // The helper (when it is executed) and the stand-in: each confined.
    let found = descendants_running(kernel.pid(), "standin");
    // Exactly one of them is the stand-in program itself (`teneral standin
    // ...`); an executed helper names it only after its own `confine`.
    let programs: Vec<u32> = found
        .iter()
        .copied()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).nth(1) == Some(b"standin".as_slice())
        })
        .collect();
    assert_eq!(programs.len(), 1, "one stand-in runs below the kernel: {found:?}");
    for &pid in &found {
        assert_ne!(pid, kernel.pid());
        assert_eq!(status_field(pid, "NoNewPrivs"), "1", "no_new_privs is set on {pid}");
        assert_eq!(status_field(pid, "Seccomp"), "2", "a seccomp filter holds {pid}");
        assert_eq!(status_field(pid, "CapEff"), "0000000000000000", "{pid} has no capability");
        let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline"))?)
            .replace('\0', " ");
        assert!(
            !cmdline.contains("--key") && !cmdline.contains("tnl-"),
            "its key is not on its command line, which every process can read: {cmdline}"
        );
    }

    // Killed without a word, the kernel takes the stand-in with it.
    kernel.signal(9);
    kernel.wait(SHORT)?;
    let end = Instant::now() + SHORT;
    while found.iter().any(|&pid| alive(pid)) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in found {
        assert!(!alive(pid), "the stand-in's process {pid} does not outlive a killed kernel");
    }
    Ok(())
}

#[test]
fn the_stand_in_ends_when_nothing_reads_its_stdout() -> TestResult {
    let mut child = Command::new(teneral())
        .args(["standin", "--listen", "127.0.0.1:0", "--end-with-stdout"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the stand-in's stdout is piped")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
    // The reader was dropped with the BufReader: the kernel is gone.
    let end = Instant::now() + SHORT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.and_then(|s| s.code()), Some(0), "it ended by itself, at once");
    Ok(())
}

/// `sh -c script` in the model profile for `home`, as the kernel starts the
/// stand-in; the helper is the built `teneral`.
fn in_model_profile(home: &Path, script: &str) -> std::io::Result<Output> {
    let profile = Profile::Model {
        individual: home.to_owned(),
        program: teneral(),
        readable: vec![home.join("script.jsonl")],
        writable: vec![home.join("standin.jsonl")],
    };
    let options = confine::Options { exe: Some(teneral()), ..Default::default() };
    let argv =
        confine::wrap_with(&profile, &options, vec!["/bin/sh".into(), "-c".into(), script.into()])?;
    let mut caged = Command::new(&argv[0]);
    caged.args(&argv[1..]).current_dir("/").env_clear();
    run_within(&mut caged, QUICK, "a shell in the model's cage").map_err(std::io::Error::other)
}

#[test]
fn the_model_profile_grants_its_script_and_log_and_refuses_the_rest() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let home = dir.path().canonicalize()?;
    std::fs::write(home.join(".env"), "TENERAL_API_KEY=sk-model-profile-secret\n")?;
    std::fs::write(home.join("script.jsonl"), "{\"reply\": \"scripted\"}\n")?;
    std::fs::write(home.join("standin.jsonl"), "")?;
    std::fs::create_dir_all(home.join("memory"))?;
    std::fs::write(home.join("memory/notes.md"), "private\n")?;
    let text = |out: &Output| {
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let table: &[(&str, bool, &str)] = &[
        ("cat script.jsonl", true, "scripted"),
        ("echo line >> standin.jsonl && cat standin.jsonl", true, "line"),
        // Not granted, not there: the cage's new root holds only grants.
        ("cat .env", false, "No such file or directory"),
        ("cat memory/notes.md", false, "No such file or directory"),
        ("ls .", false, "Permission denied"),
        ("echo x > new-file", false, "Read-only file system"),
        ("rm standin.jsonl", false, "Read-only file system"),
    ];
    let mut wrong = Vec::new();
    for (command, passes, says) in table {
        let out = in_model_profile(&home, &format!("cd {} && {command}", home.display()))?;
        let all = text(&out);
        if out.status.success() != *passes || !all.contains(says) {
            wrong.push(format!(
                "{command}: wanted success {passes} saying {says:?}; got {}: {all}",
                out.status
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(!home.join("new-file").exists());
    // The host's network as it is: a stand-in listening on the host's
    // loopback inside the profile is reached from outside it.
    let out = in_model_profile(&home, "cat /proc/self/status")?;
    let all = text(&out);
    assert!(all.contains("NoNewPrivs:\t1") && all.contains("Seccomp:\t2"), "{all}");
    let host_net = std::fs::read_link("/proc/self/ns/net")?;
    let out = in_model_profile(&home, "readlink /proc/self/ns/net")?;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        host_net.to_string_lossy(),
        "the model profile keeps the host's network namespace"
    );
    Ok(())
}
