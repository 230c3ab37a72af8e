//! The zygote as the kernel's own launches use it: through `spawn` once
//! the kernel said to use one, and under the cgroup runner. Each installs
//! a zygote for the whole test process, so `scripts/test` runs them alone.

use std::path::PathBuf;
use std::time::Duration;

use teneral::confine::{self, Profile};

use super::zygote::{checkout, zygote};
use super::*;

/// The kernel's `spawn`, once told to use a zygote, sends a launch that
/// `Cage::wrap` made through it (no caller changes), and the child is
/// reaped and its output read as any other.
#[test]
#[ignore = "installs a zygote for the whole test process, which would take other tests' launches; scripts/test runs it alone"]
fn the_kernels_spawn_sends_confined_launches_through_the_zygote() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    use teneral::spawn::{self, Exit, Output, Spec};
    let (_dir, checkout, _tmp) = checkout()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        spawn::start_reaper_of_own_children()?;
        spawn::use_zygote(zygote()?);
        let before = spawn::zygote_launches();
        let cage = confine::Cage::On { exe: teneral(), pretend_missing: vec![] };
        let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![] };
        let mut spec = Spec::new("/bin/sh", &checkout)
            .arg("-c")
            .arg("echo inside; ls /proc | grep -c '^[0-9]'; echo oops >&2; exit 3");
        spec.stdout = Output::Pipe;
        spec.stderr = Output::Pipe;
        let spec = cage.wrap("zygote-test", &profile, spec, Default::default(), None)?;
        let mut child = spawn::spawn(spec)?;
        let mut out = String::new();
        let mut err = String::new();
        use tokio::io::AsyncReadExt;
        child.stdout.take().ok_or("no stdout")?.read_to_string(&mut out).await?;
        child.stderr.take().ok_or("no stderr")?.read_to_string(&mut err).await?;
        let exit = child.wait().await;
        let zygote = spawn::stop_using_zygote();
        assert!(zygote.is_some());
        assert_eq!(exit, Exit::Code(3), "{out}{err}");
        assert!(out.starts_with("inside\n"), "{out}");
        assert!(err.contains("oops"), "{err}");
        assert_eq!(spawn::zygote_launches(), before + 1, "the launch went through the zygote");
        Ok(())
    })
}

/// Under the cgroup runner, a launch the zygote forks enters the cgroup
/// made for it before anything runs (no shell in between): the program
/// finds itself there, and the helper outside the cage's PID namespace
/// (forked by a spare before the request named the cgroup) is there too.
/// Needs a writable cgroup v2 hierarchy (root); says so on stderr and
/// passes without one.
#[test]
#[ignore = "installs a zygote for the whole test process, which would take other tests' launches; scripts/test runs it alone"]
fn under_the_cgroup_runner_a_zygote_launch_is_in_its_cgroup() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    use teneral::runner::{cgroup::Delegated, Launch, Limits, Runner};
    use teneral::spawn::{self, Exit, Spec};
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let top = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        right.starts_with("cgroup2 ").then(|| PathBuf::from(point))
    });
    let Some(top) = top else {
        crate::common::skip("no cgroup v2 hierarchy is mounted here");
        return Ok(());
    };
    let dir = top.join(format!("teneral-test-{}-zygote", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        crate::common::skip(&format!("cannot make a cgroup in {}: {e}", top.display()));
        return Ok(());
    }
    let (_tmp, checkout, _) = checkout()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = rt.block_on(async {
        spawn::start_reaper_of_own_children()?;
        spawn::use_zygote(zygote()?);
        let before = spawn::zygote_launches();
        let cage = confine::Cage::On { exe: teneral(), pretend_missing: vec![] };
        let runner = Runner::cgroup(Delegated::V2(dir.clone()), cage);
        let spec = Spec::new("/bin/sh", &checkout)
            .arg("-c")
            .arg("sleep 0.5; grep '^0::' /proc/self/cgroup; env | grep -c TENERAL_CGROUP || true");
        let launch = Launch {
            spec,
            cage: Some(Profile::Gate { checkout: checkout.clone(), writable: vec![] }),
            limits: Limits::none(Duration::from_secs(5)),
        };
        let procs = dir.join("teneral-check-zygote.service/cgroup.procs");
        let (ran, helper_in) =
            tokio::join!(runner.run("teneral-check-zygote.service", launch), helper_in(&procs));
        spawn::stop_using_zygote();
        assert_eq!(helper_in, Some(true), "the helper, this process's child, is in the cgroup");
        let (ended, run) = ran?;
        let out = run.stdout_tail();
        assert_eq!(ended.exit, Exit::Code(0), "{}", run.output_tail());
        assert!(out.contains("/teneral-check-zygote.service"), "in its own cgroup: {out}");
        assert!(out.ends_with('0'), "the variable does not reach the program: {out}");
        assert_eq!(spawn::zygote_launches(), before + 1, "the launch went through the zygote");
        Ok::<_, Box<dyn std::error::Error>>(())
    });
    let _ = std::fs::remove_dir(&dir);
    result
}

/// Once the cage's first process (pid 1 of its own namespace) is in the
/// cgroup whose processes `procs` lists: whether a child of this process
/// (the launch's helper, outside that namespace) is there too. `None` if
/// the first process never appears.
async fn helper_in(procs: &std::path::Path) -> Option<bool> {
    let me = std::process::id().to_string();
    let field = |pid: &str, name: &str| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
    };
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let Ok(text) = std::fs::read_to_string(procs) else { continue };
        let pids: Vec<&str> = text.lines().collect();
        let first_in = pids.iter().any(|pid| {
            field(pid, "NSpid:").is_some_and(|ns| ns.split_whitespace().nth(1) == Some("1"))
        });
        if first_in {
            return Some(pids.iter().any(|pid| field(pid, "PPid:").as_deref() == Some(&me)));
        }
    }
    None
}
