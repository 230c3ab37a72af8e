//! Gate checks the cage's zygote forks, adopted by transient scope units of
//! a real user manager: the check runs in the scope's cgroup (the program
//! inside the cage's PID namespace as well as the helper the manager was
//! given), the scope's MemoryMax and TasksMax hold, the check's output
//! reaches journald under the scope with the individual's and generation's
//! fields, and a killed kernel leaves no scope behind.
//!
//! The kernel of this test is the test binary itself, started as a unit of
//! the manager (so its stderr is journald's stream) running
//! [`scope_kernel`]; the test reads what
//! it wrote, looks at its scopes from outside, and kills it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{journal_entries, run, systemctl, text, SHORT};
use crate::cage::require_cage;
use crate::common::*;

/// Where the test tells its kernel to write (the individual's directory).
const DIR_VARIABLE: &str = "TENERAL_TEST_SCOPE_DIR";

/// The check left running when the kernel is killed.
const HELD: &str = "teneral-gate-scopetest-held.service";
const MEMORY: &str = "teneral-gate-scopetest-memory.service";
const TASKS: &str = "teneral-gate-scopetest-tasks.service";
/// A check whose cage cannot be made: its checkout is reached through a
/// link the cage's identity owns, which no grant follows.
const GONE: &str = "teneral-gate-scopetest-gone.service";
/// Checks that read their own cgroup first thing, one after another under
/// one name.
const FIRST: &str = "teneral-gate-scopetest-first.service";
/// How many times.
const FIRSTS: usize = 8;

fn scope_of(unit: &str) -> String {
    teneral::runner::systemd::scope_name(unit)
}

/// Processes whose cgroup, in any hierarchy, is `scope`, with their command
/// lines.
fn processes_in(scope: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if cgroup.lines().any(|l| l.ends_with(&format!("/{scope}"))) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

fn wait_for_file(path: &Path, within: Duration) -> Result<String, String> {
    let end = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return Ok(text);
            }
        }
        if Instant::now() > end {
            return Err(format!("{} was not written within {within:?}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_gate_check_the_zygote_forks_is_adopted_by_a_scope_with_its_limits() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    if !require_cage()? {
        return Ok(());
    }
    let home = tempfile::Builder::new().prefix("tnl-scope").tempdir()?;
    let dir = home.path().canonicalize()?;
    // Not an instance of teneral@.service (another test may have installed
    // that template): no unit the checks are bound to, so what ends them is
    // the kernel's death itself.
    let kernel = format!("teneral-scopetest-{}.service", std::process::id());
    let exe = std::env::current_exe()?;
    let bus = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .unwrap_or_else(|_| format!("unix:path={runtime}/bus"));
    let mut args: Vec<String> = vec!["--user".into(), "--collect".into(), "--quiet".into()];
    args.push(format!("--unit={kernel}"));
    for (key, value) in [
        (DIR_VARIABLE, dir.display().to_string()),
        ("TENERAL_TEST_SYSTEMD", "1".to_owned()),
        ("XDG_RUNTIME_DIR", runtime.clone()),
        ("DBUS_SESSION_BUS_ADDRESS", bus),
        ("PATH", "/usr/bin:/bin".to_owned()),
    ] {
        args.push(format!("--setenv={key}={value}"));
    }
    args.push(exe.display().to_string());
    for arg in ["--ignored", "--exact", "systemd::scope::scope_kernel", "--nocapture"] {
        args.push(arg.to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run("systemd-run", &args)?;
    assert!(out.status.success(), "systemd-run: {}", text(&out));

    let outcome = (|| -> TestResult {
        let done = wait_for_file(&dir.join("checks"), Duration::from_secs(240));
        let said = std::fs::read_to_string(dir.join("said")).unwrap_or_default();
        let checks = done.map_err(|e| format!("{e}; the kernel said:\n{said}"))?;
        let checks: Vec<Value> =
            checks.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        let find = |unit: &str| {
            checks
                .iter()
                .find(|c| c["unit"] == scope_of(unit).as_str())
                .cloned()
                .unwrap_or_default()
        };
        // The first thing each check does, it does in its scope; the name
        // is free again for the next as soon as the last has ended.
        let firsts = std::fs::read_to_string(dir.join("firsts"))?;
        let firsts: Vec<&str> = firsts.split_terminator("\0").collect();
        assert_eq!(firsts.len(), FIRSTS, "{firsts:?}");
        let scope = scope_of(FIRST);
        for cgroups in &firsts {
            // The hierarchies the scope holds the check by: the unified
            // one, and systemd's own, memory and pids of a v1 tree.
            let held: Vec<&str> = cgroups
                .lines()
                .filter(|l| {
                    let controllers = l.split(':').nth(1).unwrap_or("");
                    l.starts_with("0::")
                        || controllers
                            .split(',')
                            .any(|c| ["name=systemd", "memory", "pids"].contains(&c))
                })
                .collect();
            assert!(!held.is_empty(), "{cgroups}");
            for line in held {
                assert!(line.ends_with(&format!("/{scope}")), "{line} in:\n{cgroups}");
            }
        }
        // Past MemoryMax: the check is killed.
        let memory = find(MEMORY);
        assert_eq!(memory["exit"], "killed by signal 9", "{memory}");
        assert!(!memory["output"].as_str().unwrap_or("").contains("still alive"), "{memory}");
        // Past TasksMax: a fork is refused.
        let tasks = find(TASKS);
        let output = tasks["output"].as_str().unwrap_or("");
        assert!(
            output.contains("Cannot fork") || output.contains("Resource temporarily unavailable"),
            "a fork refused by the scope's TasksMax: {tasks}"
        );
        assert!(!output.contains("all started"), "{tasks}");
        // A cage that cannot be made ends with its own word, whether the
        // manager had adopted its first process before it ended or not.
        let gone = find(GONE);
        let word = format!("exit status {}", teneral_cage::EXIT_NAMESPACES);
        assert_eq!(gone["exit"], word.as_str(), "{gone}");
        let output = gone["output"].as_str().unwrap_or("");
        assert!(output.contains("cannot grant"), "{gone}");
        assert!(!output.lines().any(|l| l == "ran"), "the program never ran: {gone}");

        // The held check: its scope, with the limits, holding the cage (its
        // first process, the helper's child, which the manager adopted, and
        // the program), while the helper supervises from the kernel's unit.
        let held = wait_for_file(&dir.join("held"), SHORT)?;
        let helper: u32 = held.trim().parse()?;
        let scope = scope_of(HELD);
        let shown = systemctl(&["show", &scope, "-p", "ActiveState,MemoryMax,TasksMax"])?;
        for want in ["ActiveState=active", "MemoryMax=268435456", "TasksMax=32"] {
            assert!(shown.contains(want), "{want} in:\n{shown}");
        }
        let inside = processes_in(&scope);
        let parent = |pid: u32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, rest)| rest.to_owned()).unwrap_or_default();
            after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok())
        };
        assert!(
            inside.iter().any(|(pid, _)| parent(*pid) == Some(helper)),
            "the cage's first process: {inside:?}"
        );
        assert!(inside.iter().all(|(pid, _)| *pid != helper), "not the helper: {inside:?}");
        assert!(
            inside.iter().any(|(_, cmd)| cmd.trim() == "sleep 600"),
            "the program in the cage's PID namespace is in the scope too: {inside:?}"
        );

        // Its output in journald, under the scope, with the kernel's fields.
        let line = journal_entries(&["TENERAL_EVENT=output"], |e| {
            e["MESSAGE"].as_str().is_some_and(|m| m.contains("scope check line"))
        })?;
        assert_eq!(line["USER_UNIT"], scope.as_str(), "{line}");
        assert_eq!(line["TENERAL_INDIVIDUAL"], dir.display().to_string().as_str(), "{line}");
        assert_eq!(line["TENERAL_GENERATION"], "1", "{line}");

        // The kernel killed: no scope, and nothing of the check, is left.
        let out =
            run("systemctl", &["--user", "kill", "--signal=KILL", "--kill-whom=main", &kernel])?;
        assert!(out.status.success(), "kill: {}", text(&out));
        let end = Instant::now() + SHORT;
        let left = || {
            let listed = systemctl(&[
                "list-units",
                "--all",
                "--plain",
                "--no-legend",
                "teneral-gate-scopetest-*",
            ])
            .unwrap_or_default();
            (listed.trim().to_owned(), processes_in(&scope))
        };
        while left() != (String::new(), Vec::new()) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(left(), (String::new(), Vec::new()), "nothing of the checks is left");
        assert!(!alive(helper), "the helper went with the kernel");
        Ok(())
    })();
    let _ = systemctl(&["kill", "--signal=KILL", &kernel]);
    let _ = systemctl(&["reset-failed", &kernel]);
    outcome
}

/// The kernel of the test above, run by it as a unit of the manager: three
/// gate checks through the zygote under the systemd runner, what the two
/// that end did written to `checks`, the pid of the third (left running)
/// to `held`.
#[test]
#[ignore = "the kernel of systemd::scope::a_gate_check_the_zygote_forks_is_adopted_by_a_scope_with_its_limits, which runs it as a unit"]
fn scope_kernel() -> TestResult {
    let Some(dir) = std::env::var_os(DIR_VARIABLE).map(PathBuf::from) else {
        skip("run by the scope test as its kernel; nothing to do alone");
        return Ok(());
    };
    let said = std::fs::File::create(dir.join("said"))?;
    let outcome = scope_checks(&dir);
    if let Err(e) = &outcome {
        use std::io::Write;
        let _ = writeln!(&said, "{e}");
    }
    outcome
}

fn scope_checks(dir: &Path) -> TestResult {
    use teneral::runner::{Cage, Launch, Limits, Profile, Runner};
    use teneral::settings::RunnerChoice;
    use teneral::spawn::{self, Spec};
    teneral_core::log::set_individual(dir);
    teneral_core::log::set_commit("5c09e7e5c09e7e5c09e7e5c09e7e5c09e7e5c09e");
    let checkout = dir.join("checkout");
    std::fs::create_dir_all(&checkout)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        spawn::start_reaper_of_own_children()?;
        let helper = PathBuf::from(env!("CARGO_BIN_EXE_teneral-confine"));
        spawn::use_zygote(spawn::start_zygote(&helper, teneral_cage::SOURCE_ID)?);
        let cage = Cage::On { exe: teneral(), pretend_missing: vec![] };
        let runner = Runner::choose(RunnerChoice::Systemd, cage).await?;
        let gate = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
        let check = |script: &str| {
            Spec::new("/bin/sh", &checkout).arg("-c").arg(script).env("PATH", "/usr/bin:/bin")
        };
        let limits = |memory: u64, tasks: u64| Limits {
            memory_max: Some(memory),
            tasks_max: Some(tasks),
            runtime_max: Some(Duration::from_secs(120)),
            stop_timeout: Duration::from_secs(5),
            background: false,
        };
        let ended = [
            (
                MEMORY,
                check(
                    "exec python3 -c 'b = bytearray(512 << 20); b[::4096] = b\"x\" * len(b[::4096]); \
                     print(\"still alive\")'",
                ),
                limits(64 << 20, 32),
            ),
            (
                TASKS,
                check("i=0; while [ $i -lt 40 ]; do sleep 60 & i=$((i+1)); done; echo all started"),
                limits(256 << 20, 12),
            ),
        ];
        let linked = dir.join("linked");
        std::os::unix::fs::symlink(&checkout, &linked)?;
        let body = teneral_cage::BODY_ID;
        std::os::unix::fs::lchown(&linked, Some(body), Some(body))?;
        let gone = Profile::Gate { checkout: linked, writable: vec![] };
        let ended = ended.into_iter().map(|(unit, spec, limits)| (unit, spec, limits, &gate)).chain([(
            GONE,
            check("echo ran"),
            limits(256 << 20, 32),
            &gone,
        )]);
        // Each reads its own cgroups before anything else (it is the
        // program the cage executes); the same name each time.
        let mut firsts = String::new();
        for _ in 0..FIRSTS {
            let spec = Spec::new("/bin/cat", &checkout).arg("/proc/self/cgroup");
            let launch = Launch::new(spec, limits(256 << 20, 32)).caged(gate.clone());
            let (ended, running) = runner.run(FIRST, launch).await?;
            if ended.exit != spawn::Exit::Code(0) {
                return Err(format!("{FIRST}: {ended:?}: {}", running.output_tail()).into());
            }
            firsts.push_str(&running.stdout_tail());
            firsts.push('\0');
        }
        std::fs::write(dir.join("firsts"), firsts)?;
        let mut lines = String::new();
        for (unit, spec, limits, profile) in ended {
            let launch = Launch::new(spec, limits).caged(profile.clone());
            let (ended, running) = runner.run(unit, launch).await?;
            let line = serde_json::json!({
                "unit": running.unit(),
                "exit": ended.exit.to_string(),
                "result": ended.result,
                "output": running.output_tail(),
            });
            lines.push_str(&format!("{line}\n"));
        }
        assert_eq!(spawn::zygote_launches(), FIRSTS + 3, "all went through the zygote");
        std::fs::write(dir.join("checks"), lines)?;
        let spec = check("echo scope check line; exec sleep 600");
        let launch = Launch::new(spec, limits(256 << 20, 32)).caged(gate.clone());
        let mut held = runner.start(HELD, launch).await?;
        std::fs::write(dir.join("held"), format!("{}\n", held.pid().unwrap_or(0)))?;
        held.wait().await;
        Ok(())
    })
}

/// A scope the manager refuses (its process is gone: a child already
/// reaped) is a refusal naming the scope, said at once, and leaves no
/// scope loaded.
#[test]
fn a_scope_whose_process_is_gone_is_refused_naming_it() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    use teneral::runner::systemd::{Scope, Systemd};
    use teneral::runner::Limits;
    let limits = Limits {
        memory_max: Some(256 << 20),
        tasks_max: Some(32),
        runtime_max: Some(Duration::from_secs(60)),
        stop_timeout: SHORT,
        background: false,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let systemd = Systemd::connect().await?;
        let mut ended = std::process::Command::new("/bin/true").spawn()?;
        ended.wait()?;
        let gone = "teneral-gate-scopefail-gone.scope";
        let asked = Instant::now();
        let got = tokio::time::timeout(SHORT, Scope::adopt(&systemd, gone, ended.id(), &limits))
            .await
            .map_err(|_| format!("no answer for {gone} within {SHORT:?}"))?;
        let error = got.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains(&format!("refused to start {gone}")), "{error}");
        assert!(asked.elapsed() < SHORT, "{:?}", asked.elapsed());
        let listed = systemctl(&["list-units", "--all", "--plain", "--no-legend", gone])?;
        assert_eq!(listed.trim(), "", "no scope is left loaded");
        Ok(())
    })
}
