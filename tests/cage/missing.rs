//! Where the cage cannot be built: the refusal to start, naming what is
//! missing; the helper's exit status for each step; and the owner's unsafe
//! setting, which runs the body unconfined and says so.

use std::ffi::OsString;
use std::time::Duration;

use teneral::confine::{self, Profile};

use super::gate::{options, run_confined};
use super::*;

const SHORT: Duration = Duration::from_secs(30);

#[test]
fn a_linux_without_a_cage_feature_is_refused_naming_it() -> TestResult {
    let table = [
        ("landlock", "Landlock ABI 6"),
        ("seccomp", "seccomp filters"),
        ("namespaces", "namespaces for an unprivileged user"),
    ];
    for (feature, named) in table {
        let env = format!("TENERAL_PROVIDER=standin\nTENERAL_TEST_PRETEND_MISSING={feature}\n");
        let ind = hostile_individual(&env)?;
        let mut kernel = ind.start()?;
        let status = kernel.wait(SHORT)?;
        let log = ind.kernel_log();
        assert_eq!(status, Some(1), "{feature}: {log}");
        assert!(log.contains("the cage cannot be built on this Linux"), "{feature}: {log}");
        assert!(log.contains(named), "{feature}: {log}");
        assert!(log.contains("TENERAL_UNSAFE_UNCONFINED=1"), "says what to do: {log}");
        assert!(ind.events("generation.started").is_empty(), "no body started");
    }
    Ok(())
}

#[test]
fn the_helper_exits_with_the_status_of_the_step_that_failed() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let profile = Profile::Gate { checkout: dir.path().to_owned(), writable: vec![] };
    let table = [
        ("namespaces", teneral_cage::EXIT_NAMESPACES, "teneral confine: namespaces:"),
        ("landlock", teneral_cage::EXIT_LANDLOCK, "teneral confine: landlock:"),
        ("seccomp", teneral_cage::EXIT_SECCOMP, "teneral confine: seccomp:"),
    ];
    for (feature, code, message) in table {
        let argv = confine::wrap_with(
            &profile,
            &confine::Options { pretend_missing: vec![feature.to_owned()], ..options() },
            vec!["/bin/true".into()],
        )?;
        let out = Command::new(&argv[0]).args(&argv[1..]).output_within(SLOW)?;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{feature}: {err}");
        assert!(err.contains(message) && err.contains("pretended"), "{feature}: {err}");
        assert!(teneral_cage::describe_exit(code).is_some());
    }
    let missing = run_confined(&profile, vec!["/no/such/program".into()], dir.path(), dir.path())?;
    assert_eq!(missing.status.code(), Some(teneral_cage::EXIT_NOT_FOUND));
    let out = Command::new(teneral())
        .args(["confine", "--profile", "gate", "--bogus"])
        .output_within(QUICK)?;
    assert_eq!(out.status.code(), Some(teneral_cage::EXIT_USAGE));
    let fine = run_confined(&profile, vec![OsString::from("/bin/true")], dir.path(), dir.path())?;
    assert_eq!(fine.status.code(), Some(0), "and with nothing missing it runs");
    Ok(())
}

/// The unsafe setting, with a kernel started without capabilities (as an
/// ordinary user's would be), which also shows that the kernel keeps a
/// same-uid process without capabilities out of its `/proc/<pid>/environ`:
/// only its being non-dumpable does that here.
#[test]
fn the_unsafe_setting_runs_the_body_unconfined_and_says_so() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let env =
        "TENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTES=0\nTENERAL_UNSAFE_UNCONFINED=1\n\
               TENERAL_TEST_PRETEND_MISSING=landlock\n";
    let ind = hostile_individual(env)?;
    // A kernel without capabilities cannot write the shared build cache,
    // which the test individuals' identity owns: this one builds its own.
    let target = ind.path().join(".teneral/target");
    std::fs::remove_file(&target)?;
    std::fs::create_dir(&target)?;
    std::fs::write(ind.path().join("soul/harmless"), "")?;
    let log = std::fs::File::create(ind.path().join("kernel.log"))?;
    let child = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all"])
        .arg(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let kernel = Kernel { child: Some(child), log: ind.path().join("kernel.log") };
    ind.wait_for("the harmless report", LONG, |e| e["type"] == "reply")?;
    let doors: Doors = ind
        .events("note")
        .into_iter()
        .filter_map(|e| Some((e["data"]["door"].as_str()?.to_owned(), e["data"].clone())))
        .collect();
    let peek = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all", "cat"])
        .arg(format!("/proc/{}/environ", kernel.pid()))
        .output_within(QUICK)?;
    let err = String::from_utf8_lossy(&peek.stderr);
    assert!(!peek.status.success() && err.contains("Permission denied"), "environ: {err}");
    check(&doors, &[("env.read", Want::Pass)])?;
    let status = doors["self.status"]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(status.contains("Seccomp:\t0"), "no filter: {status}");
    let log = ind.kernel_log();
    assert!(log.contains("runs unconfined (TENERAL_UNSAFE_UNCONFINED=1 in .env)"), "{log}");
    Ok(())
}
