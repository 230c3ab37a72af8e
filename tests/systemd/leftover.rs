//! Under systemd, a kernel killed during a gate check started as a service
//! unit (the cage's zygote off, so the manager starts the check; run
//! directly, so no unit of its own binds the check's unit to it) leaves the
//! check's unit running; the next start of the same individual stops it,
//! and only it: every unit names its individual in its description. (A
//! check the zygote forks dies with its kernel, and its scope with it:
//! systemd::scope.)

use std::time::{Duration, Instant};

use super::{run, systemctl, text, LONG, SHORT};
use crate::common::*;

fn active(unit: &str) -> String {
    systemctl(&["show", unit, "-p", "ActiveState", "--value"]).unwrap_or_default().trim().to_owned()
}

/// The gate unit whose cgroup holds process `pid`: the check running it.
/// Several checks run at once and some end on their own (or on a write to
/// the pipe of a killed kernel), so the test follows its own process's unit
/// rather than the first one listed.
fn gate_unit_of(pid: u32, candidate: &str) -> Result<String, String> {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("the cgroup of {pid}: {e}"))?;
    let prefix = format!("teneral-gate-{}-", &candidate[..7]);
    cgroup
        .lines()
        .flat_map(|line| line.rsplit(':').next().unwrap_or_default().split('/'))
        .find(|part| part.starts_with(&prefix) && part.ends_with(".service"))
        .map(str::to_owned)
        .ok_or_else(|| format!("process {pid} runs in no gate unit of {candidate}: {cgroup}"))
}

#[test]
fn a_killed_kernels_gate_unit_is_stopped_at_the_next_start_and_no_one_elses() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    // Another individual's unit, by its description: the sweep leaves it.
    let other = "teneral-gate-0000000-other.service";
    let out = run(
        "systemd-run",
        &[
            "--user",
            "--unit",
            other,
            "-p",
            &format!("Description=teneral: {other} for /elsewhere"),
            "sleep",
            "600",
        ],
    )?;
    assert!(out.status.success(), "systemd-run: {}", text(&out));

    let ind = Individual::with_mode(
        "mutate",
        "",
        &["TENERAL_RUNNER=systemd", "TENERAL_CAGE_ZYGOTE=off"],
    )?;
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let workspace = ind.path().join(".teneral/candidate");
    std::fs::write(
        workspace.join("body/build.rs"),
        "fn main() {\n    std::thread::sleep(std::time::Duration::from_secs(600));\n}\n",
    )?;
    let candidate = commit_all(&workspace, "a slow build script")?;
    give_to_individual(ind.path(), &workspace)?;
    teneral_core::owner::write_line(ind.path(), &candidate)?;
    let end = Instant::now() + LONG;
    let sleeper = loop {
        let found = processes_under(ind.path());
        if let Some(p) = found.iter().find(|(_, n)| n.starts_with("build-script")) {
            break p.0;
        }
        assert!(Instant::now() < end, "no build script ran:\n{}", ind.kernel_log());
        std::thread::sleep(Duration::from_millis(100));
    };
    let unit = gate_unit_of(sleeper, &candidate)?;
    let described = systemctl(&["show", &unit, "-p", "Description", "--value"])?;
    assert_eq!(
        described.trim(),
        format!("teneral: {unit} for {}", ind.path().display()),
        "the unit names its individual"
    );

    kernel.signal(9);
    assert_eq!(kernel.wait(SHORT)?, None, "killed");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(active(&unit), "active", "the check outlived its kernel (what the start sweeps)");
    assert!(alive(sleeper), "its build script still runs");

    let starts = ind.events("kernel.started").len();
    let _again = ind.start()?;
    ind.wait_for("the restart", LONG, |_| ind.events("kernel.started").len() > starts)?;
    let end = Instant::now() + Duration::from_secs(10);
    while (alive(sleeper) || active(&unit) == "active") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(sleeper), "the build script {sleeper} outlived the sweep");
    assert_ne!(active(&unit), "active", "{unit} was stopped:\n{}", ind.kernel_log());
    let compilers: Vec<_> = processes_under(ind.path())
        .into_iter()
        .filter(|(_, n)| n.starts_with("build-script") || n == "rustc" || n == "cargo")
        .collect();
    assert!(compilers.is_empty(), "no compiler left: {compilers:?}");
    assert!(ind.kernel_log().contains("a killed supervisor left behind"), "{}", ind.kernel_log());
    assert_eq!(active(other), "active", "another individual's unit is left alone");
    let _ = systemctl(&["stop", other]);
    Ok(())
}
