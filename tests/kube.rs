//! What a kernel in a Kubernetes pod leans on (docs/kubernetes.md): its log
//! as JSON lines a cluster's collector reads, and its settings from a
//! further file, where a Secret is mounted.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(240);

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
"#;

/// Where stdout and stderr lead into pipes (a container's log), every line
/// the kernel writes by default (`TENERAL_LOG_FORMAT=auto`) is one JSON
/// object on stdout with the journal's fields, and stderr has none of them;
/// the lines about the generation carry its commit and ordinal, and the
/// individual's directory.
#[test]
fn the_log_as_json_lines_on_stdout_carries_the_journal_fields() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let commit = ind.head()?;
    let (out, err) = run_until_ready(&ind, std::process::Stdio::piped())?;
    let err = err.unwrap_or_default();
    assert!(!err.lines().any(|l| l.starts_with('{')), "a JSON line on stderr:\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 3, "too few lines on stdout:\n{out}\nstderr:\n{err}");
    let dir = ind.path().canonicalize()?.display().to_string();
    let mut about_the_generation = 0;
    for line in &lines {
        let object: Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}\n{out}"))?;
        for field in ["ts", "tag", "message", "priority", "event"] {
            assert!(!object[field].is_null(), "{field} missing: {line}");
        }
        assert!(object["priority"].as_u64().is_some_and(|p| (3..=7).contains(&p)), "{line}");
        assert_eq!(object["individual"], Value::String(dir.clone()), "{line}");
        if object["commit"] == Value::String(commit.clone()) {
            assert_eq!(object["generation"], 1, "{line}");
            about_the_generation += 1;
        }
    }
    assert!(about_the_generation >= 2, "no line names the generation:\n{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#""event":"kernel.stopped""#) || l.contains("supervising")),
        "{out}"
    );
    Ok(())
}

/// Runs `teneral run` on `ind` with stdout a pipe and stderr as given, until
/// its generation is ready, then stops it; what came on stdout, and on
/// stderr when that was a pipe too.
fn run_until_ready(
    ind: &Individual,
    stderr: std::process::Stdio,
) -> Result<(String, Option<String>), Box<dyn std::error::Error>> {
    let mut child = std::process::Command::new(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .env_remove("JOURNAL_STREAM")
        .env_remove("TENERAL_LOG_STDERR_LEADS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()?;
    let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().ok_or("no stdout")?));
    let stderr = child.stderr.take().map(|pipe| read_all(Box::new(pipe)));
    let mut kernel = Kernel { child: Some(child), log: ind.path().join("kernel.log") };
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(Duration::from_secs(60))?, Some(0), "the kernel stopped cleanly");
    let out = stdout.join().map_err(|_| "the reader of stdout panicked")?;
    let err = match stderr {
        Some(reader) => Some(reader.join().map_err(|_| "the reader of stderr panicked")?),
        None => None,
    };
    Ok((out, err))
}

/// Where stdout is a pipe but stderr a file (`teneral run 2>kernel.log | ...`),
/// the launcher writes lines of text to the file, and so does the kernel it
/// starts, though the kernel's own stderr is a pipe to the launcher: no JSON
/// line comes on stdout.
#[test]
fn under_a_launcher_whose_stderr_is_a_file_the_kernel_writes_text_there() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("stderr.log");
    let (out, _) = run_until_ready(&ind, std::fs::File::create(&file)?.into())?;
    let err = std::fs::read_to_string(&file)?;
    assert!(out.trim().is_empty(), "lines on stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.lines().any(|l| l.starts_with("[teneral]") && l.contains("supervising")),
        "the kernel's text lines are not in the file:\n{err}"
    );
    assert!(!err.lines().any(|l| l.starts_with('{')), "a JSON line in the file:\n{err}");
    Ok(())
}

/// `TENERAL_ENV_FILE` names a file outside the individual's directory; the
/// kernel takes its settings from both files (here the log's format), and a setting in both is
/// refused at start with the two lines named.
#[test]
fn settings_come_from_the_file_env_names_too() -> TestResult {
    let secret = tempfile::tempdir()?;
    let file = secret.path().join("settings.env");
    std::fs::write(&file, "TENERAL_LOG_FORMAT=json\n")?;
    let line = format!("TENERAL_ENV_FILE={}", file.display());
    let ind = Individual::new(SCRIPT, &[&line])?;
    let mut kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(Duration::from_secs(60))?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    assert!(
        log.lines().any(|l| l.starts_with("{\"ts\":")),
        "the named file's setting holds:\n{log}"
    );

    std::fs::write(&file, "TENERAL_HEARTBEAT_MINUTES=5\n")?;
    let mut kernel = ind.start()?;
    let status = kernel.wait(Duration::from_secs(60))?;
    let log = ind.kernel_log();
    assert_ne!(status, Some(0), "{log}");
    let said =
        format!("TENERAL_HEARTBEAT_MINUTES is set in both {}", ind.path().join(".env").display());
    assert!(log.contains(&said) && log.contains(&file.display().to_string()), "{log}");
    Ok(())
}

/// A kernel started in a cgroup of 256 MiB and 100 tasks refuses the
/// default limits for bodies (4G, 2048 tasks) at its start, naming the
/// cgroup's file and what to write; with limits that fit it starts.
#[test]
fn limits_above_the_kernels_cgroup_are_refused_at_start() -> TestResult {
    let Some(cgroup) = SubCgroup::make(256 << 20, 100)? else { return Ok(()) };
    let ind = Individual::new(SCRIPT, &[])?;
    let run = |ind: &Individual| -> Result<(Option<i32>, String), Box<dyn std::error::Error>> {
        let log = ind.path().join("kernel.log");
        let _ = std::fs::remove_file(&log);
        let out = cgroup.run(ind.path(), Duration::from_secs(30))?;
        Ok((out, std::fs::read_to_string(&log).unwrap_or_default()))
    };
    let (status, log) = run(&ind)?;
    assert_ne!(status, Some(0), "{log}");
    let memory = cgroup.memory_file().display().to_string();
    assert!(
        log.contains(&format!("TENERAL_MEMORY_MAX=4G is above the memory limit of the cgroup the kernel runs in (256M, set by {memory})")),
        "{log}"
    );
    assert!(log.contains("Write TENERAL_MEMORY_MAX=192M (or less) in .env"), "{log}");

    let env = ind.path().join(".env");
    let mut text = std::fs::read_to_string(&env)?;
    text.push_str("TENERAL_MEMORY_MAX=192M\n");
    std::fs::write(&env, &text)?;
    let (status, log) = run(&ind)?;
    assert_ne!(status, Some(0), "{log}");
    assert!(log.contains("TENERAL_TASKS_MAX=2048 is above the task limit"), "{log}");
    assert!(log.contains("Write TENERAL_TASKS_MAX=36 (or less)"), "{log}");
    assert!(ind.events("kernel.started").is_empty(), "refused before it started");
    Ok(())
}

/// A memory and a pids cgroup of their own (v1, or v2 where it offers
/// both), removed when dropped.
struct SubCgroup {
    dirs: Vec<std::path::PathBuf>,
}

impl SubCgroup {
    /// `None` (after a visible skip) where this test cannot make one.
    fn make(memory: u64, tasks: u64) -> Result<Option<SubCgroup>, Box<dyn std::error::Error>> {
        let name = format!("teneral-ceiling-test-{}", std::process::id());
        let root = std::path::Path::new("/sys/fs/cgroup");
        let v1 = [root.join("memory"), root.join("pids")];
        let (dirs, files) = if v1.iter().all(|d| d.join("cgroup.procs").exists()) {
            (
                vec![v1[0].join(&name), v1[1].join(&name)],
                [("memory.limit_in_bytes", 0usize), ("pids.max", 1)],
            )
        } else if std::fs::read_to_string(root.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.contains("memory") && c.contains("pids"))
        {
            (vec![root.join(&name)], [("memory.max", 0), ("pids.max", 0)])
        } else {
            skip("no memory and pids cgroups this test may make (v1 hierarchies, or v2 with both enabled)");
            return Ok(None);
        };
        let made = SubCgroup { dirs };
        for dir in &made.dirs {
            if let Err(e) = std::fs::create_dir(dir) {
                skip(&format!(
                    "cannot make the cgroup {} ({e}); the test needs root",
                    dir.display()
                ));
                return Ok(None);
            }
        }
        for ((file, at), value) in files.iter().zip([memory, tasks]) {
            std::fs::write(made.dirs[*at].join(file), value.to_string())?;
        }
        Ok(Some(made))
    }

    fn memory_file(&self) -> std::path::PathBuf {
        let name = if self.dirs.len() == 2 { "memory.limit_in_bytes" } else { "memory.max" };
        self.dirs[0].join(name)
    }

    /// Runs `teneral run --dir home` inside, its log in `home/kernel.log`;
    /// its exit status, or an error past `limit`.
    fn run(
        &self,
        home: &std::path::Path,
        limit: Duration,
    ) -> Result<Option<i32>, Box<dyn std::error::Error>> {
        let log = std::fs::File::create(home.join("kernel.log"))?;
        let mut enter = String::new();
        for dir in &self.dirs {
            enter.push_str(&format!("echo $$ > {}/cgroup.procs && ", dir.display()));
        }
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("{enter}exec \"$0\" run --dir \"$1\""))
            .arg(teneral())
            .arg(home)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let end = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.code());
            }
            if std::time::Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the kernel did not end within {limit:?}").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for SubCgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `teneralctl status` as a readiness probe: 0 only while the kernel
/// serves; 4 while a kernel holds the individual but has not said READY
/// (or is stopping); 3 when none runs.
#[test]
fn status_exits_0_only_while_the_kernel_serves() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let status = |ind: &Individual| -> Result<(Option<i32>, String), std::io::Error> {
        let out = std::process::Command::new(teneralctl())
            .args(["status", "--json", "--dir"])
            .arg(ind.path())
            .output()?;
        Ok((out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned()))
    };
    assert_eq!(status(&ind)?.0, Some(3), "nothing runs");
    {
        // A kernel that holds the individual and has said what it does,
        // but not READY: starting.
        let _held = teneral_core::lock::acquire(ind.path())?;
        let file = ind.path().join(teneral_core::status::STATUS_PATH);
        let starting = r#"{"pid":1,"generation":null,"status":"starting","since":"2026-12-07T08:00:00.000Z","serving":false}"#;
        std::fs::write(&file, starting)?;
        let (code, said) = status(&ind)?;
        assert_eq!(code, Some(4), "{said}");
        assert!(said.contains(r#""serving":false"#), "{said}");
        // A status file of a kernel before `serving` was written reads as
        // not serving.
        std::fs::write(&file, starting.replace(r#","serving":false"#, ""))?;
        assert_eq!(status(&ind)?.0, Some(4));
    }
    let mut kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let (code, said) = status(&ind)?;
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains(r#""serving":true"#), "{said}");
    kernel.signal(libc::SIGTERM);
    kernel.wait(Duration::from_secs(60))?;
    let (code, said) = status(&ind)?;
    assert_eq!(code, Some(3), "{said}");
    let file = std::fs::read_to_string(ind.path().join(teneral_core::status::STATUS_PATH))?;
    assert!(file.contains(r#""serving":false"#), "a stopped kernel no longer serves: {file}");
    Ok(())
}

/// `teneralctl fleet`: one serving individual and one that does not run,
/// from their directories and, through a stand-in `kubectl` that answers
/// as a cluster would, from the pods of a namespace.
#[test]
fn the_fleet_lists_each_individual() -> TestResult {
    let script = "{\"reply\": \"Hello. I have just been born.\"}\n{\"reply\": \"Fine.\"}\n";
    let (a, b) = (Individual::new(script, &[])?, Individual::new(SCRIPT, &[])?);
    let _kernel = a.start()?;
    a.wait_for("the birth reply", LONG, |e| e["type"] == "reply")?;
    let fleet = |args: &[&std::ffi::OsStr], path: Option<&std::ffi::OsStr>| {
        let mut command = std::process::Command::new(teneralctl());
        command.arg("fleet").args(args);
        if let Some(path) = path {
            command.env("PATH", path);
        }
        command.output()
    };
    let out = fleet(&["--json".as_ref(), a.path().as_os_str(), b.path().as_os_str()], None)?;
    let said: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stderr)))?;
    assert_eq!(out.status.code(), Some(3), "one does not serve: {said}");
    let head = a.head()?;
    assert_eq!(said[0]["serving"], true, "{said}");
    assert_eq!(said[0]["generation"], Value::String(head), "{said}");
    assert!(said[0]["replies_today"].as_u64() >= Some(1), "{said}");
    assert!(said[0]["generation_since"].is_string(), "{said}");
    assert_eq!(
        (said[1]["running"].clone(), said[1]["replies_today"].clone()),
        (Value::Bool(false), 0.into()),
        "{said}"
    );

    // The namespace: a kubectl that lists two pods and runs each one's
    // `teneralctl fleet --json .` in its individual's directory.
    let bin = tempfile::tempdir()?;
    let shim = bin.path().join("kubectl");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\ncase \"$1 $2\" in\n\"get pods\") echo 'teneral-0 teneral-1' ;;\n\
             \"exec -n\") case \"$4\" in teneral-0) cd '{}' ;; *) cd '{}' ;; esac; shift 8; exec \"{}\" \"$@\" ;;\n\
             *) exit 2 ;;\nesac\n",
            a.path().display(),
            b.path().display(),
            teneralctl().display()
        ),
    )?;
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let out = fleet(&["--kube".as_ref(), "agents".as_ref()], Some(path.as_ref()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        lines[0].starts_with("teneral-0: serving; ") && lines[0].contains("today 1 replies"),
        "{text}"
    );
    assert!(lines[1].starts_with("teneral-1: not running; "), "{text}");
    Ok(())
}
