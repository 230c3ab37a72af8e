//! The launcher under a real `systemd --user`: the unit stays active while
//! the kernel hands over to a species kernel. It needs the user manager
//! `scripts/with-systemd` starts; the `systemd::` in its path puts it with
//! the other system tests of `scripts/test` (run under that manager, left
//! out of the kernel tests' stage), and anywhere else it skips.

use std::process::Command;

use super::{promoted, species_commit, HELLO, LONG};
use crate::common::*;

/// `systemctl --user` with these arguments: its output.
fn systemctl(args: &[&str]) -> String {
    let out = run_within(
        Command::new("systemctl").args(["--user", "--no-pager"]).args(args),
        QUICK,
        "asking the user manager",
    );
    match out {
        Ok(o) => {
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
        }
        Err(e) => e,
    }
}

#[test]
fn the_unit_stays_active_across_the_hand_over() -> TestResult {
    let Some(runtime) = user_manager() else { return Ok(()) };
    let env = ["TENERAL_SPECIES=auto", "TENERAL_UPSTREAM=species", "TENERAL_RUNNER=systemd"];
    let ind = Individual::with_mode("mutate", "", &env)?;
    let mut install = Command::new(repo_root().join("scripts/install-units"));
    install.arg("--dir").arg(ind.path()).arg("--bin").arg(teneral());
    install.arg("--unit-dir").arg(format!("{runtime}/systemd/user")).arg("--template-only");
    let out = run_within(&mut install, QUICK, "installing the unit template")?;
    assert!(out.status.success(), "install-units: {}", String::from_utf8_lossy(&out.stderr));
    let inner = format!("TENERAL_TEST_INNER_KERNEL={}", teneral().display());
    systemctl(&["set-environment", &inner]);
    systemctl(&["daemon-reload"]);
    let unit = format!("teneral@{}.service", teneral::runner::systemd::instance_for(ind.path()));
    let started = run_within(
        Command::new("systemctl").args(["--user", "start", &unit]),
        QUICK,
        "starting the unit",
    )?;
    assert!(started.status.success(), "start: {}", String::from_utf8_lossy(&started.stderr));
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    let main_pid = systemctl(&["show", &unit, "-p", "MainPID", "--value"]);
    let v2 = species_commit(&ind, HELLO, "{\"launcher\": 1}\n")?;
    promoted(&ind, &v2)?;
    ind.wait_for("the new generation under its kernel", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    let shown = systemctl(&["show", &unit, "-p", "ActiveState,SubState,MainPID,NRestarts"]);
    assert!(shown.contains("ActiveState=active"), "{shown}");
    assert!(
        shown.contains(&format!("MainPID={}", main_pid.trim())),
        "the launcher stayed: {shown}"
    );
    let status = Command::new(teneralctl())
        .args(["status", "--dir"])
        .arg(ind.path())
        .output_within(QUICK)?;
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(said.contains(&v2), "teneralctl status names the running kernel's commit:\n{said}");
    systemctl(&["stop", &unit]);
    systemctl(&["unset-environment", "TENERAL_TEST_INNER_KERNEL"]);
    Ok(())
}
