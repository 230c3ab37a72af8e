//! The runner on its own under the user manager: a check's runtime limit,
//! the environment a unit sees, a unit that ends at once or cannot start.

use std::path::Path;
use std::time::{Duration, Instant};

use teneral::runner::{Cage, Launch, Limits, Runner};
use teneral::settings::RunnerChoice;
use teneral::spawn::{Exit, Spec};

use super::{run, systemctl, SHORT};
use crate::common::{user_manager, TestResult};

fn block_on<T>(f: impl std::future::Future<Output = T>) -> Result<T, std::io::Error> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(rt.block_on(f))
}

#[test]
fn a_check_past_its_runtime_limit_is_stopped_as_over_time() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    block_on(async {
        let runner = Runner::choose(RunnerChoice::Systemd, Cage::Off).await?;
        let spec = Spec::new("/bin/sh", "/").arg("-c").arg("echo checking; exec sleep 600");
        let limits = Limits {
            memory_max: Some(256 << 20),
            tasks_max: Some(32),
            runtime_max: Some(Duration::from_secs(2)),
            stop_timeout: Duration::from_secs(2),
            background: false,
        };
        let unit = teneral::runner::systemd::check_unit("ddddddd", "kernel tests");
        let began = Instant::now();
        let mut check = runner.start(&unit, Launch::new(spec, limits)).await?;
        let shown = systemctl(&["show", &unit, "-p", "RuntimeMaxUSec,MemoryMax,TasksMax"])?;
        assert!(shown.contains("RuntimeMaxUSec=2s"), "{shown}");
        let ended = check.wait().await;
        assert!(began.elapsed() < SHORT, "stopped in {:?}", began.elapsed());
        assert!(ended.over_time, "{ended:?}");
        assert_eq!(ended.result, "timeout");
        assert_eq!(ended.exit, Exit::Signal(15), "SIGTERM at the limit: {ended:?}");
        assert!(check.output_tail().contains("checking"), "{}", check.output_tail());
        // The name is free again for the next check.
        let spec = Spec::new("/bin/true", "/");
        let mut again = runner.start(&unit, Launch::new(spec, limits)).await?;
        let ended = again.wait().await;
        assert_eq!((ended.exit, ended.over_time), (Exit::Code(0), false), "{ended:?}");
        Ok::<_, Box<dyn std::error::Error>>(())
    })?
}

#[test]
fn a_unit_gets_exactly_the_environment_it_is_given() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    block_on(async {
        let runner = Runner::choose(RunnerChoice::Systemd, Cage::Off).await?;
        let spec = Spec::new("env", "/").env("ONLY_THIS", "1").env("PATH", "/usr/bin:/bin");
        let limits = Limits {
            memory_max: None,
            tasks_max: None,
            runtime_max: None,
            stop_timeout: SHORT,
            background: false,
        };
        let mut unit =
            runner.start("teneral-gate-env-test.service", Launch::new(spec, limits)).await?;
        let ended = unit.wait().await;
        assert_eq!(ended.exit, Exit::Code(0));
        let env = unit.output_tail();
        let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort_unstable();
        assert_eq!(names, ["ONLY_THIS", "PATH"], "nothing of the manager's reaches it:\n{env}");
        Ok::<_, Box<dyn std::error::Error>>(())
    })?
}

#[test]
fn a_unit_that_ends_at_once_or_cannot_start_is_told_apart() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    block_on(async {
        let runner = Runner::choose(RunnerChoice::Systemd, Cage::Off).await?;
        let limits = Limits {
            memory_max: None,
            tasks_max: None,
            runtime_max: None,
            stop_timeout: SHORT,
            background: false,
        };
        for _ in 0..5 {
            let spec = Spec::new("/bin/false", "/");
            let mut quick =
                runner.start("teneral-gate-quick-test.service", Launch::new(spec, limits)).await?;
            let ended = quick.wait().await;
            assert_eq!((ended.exit, ended.result.as_str()), (Exit::Code(1), "exit-code"));
        }
        let spec = Spec::new("/nonexistent/teneral-body", "/");
        let refused =
            runner.start("teneral-gate-none-test.service", Launch::new(spec, limits)).await;
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("did not start"), "{error}");
        Ok::<_, Box<dyn std::error::Error>>(())
    })??;
    for dir in ["/tmp/a-b c", "/srv/agents/ada", "/.x/y_z"] {
        let out = run("systemd-escape", &["--path", dir])?;
        let want = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(teneral::runner::systemd::instance_for(Path::new(dir)), want, "{dir}");
    }
    Ok(())
}

/// One launch, caged in the gate profile with a runtime limit, through each
/// backend: the same cage (no_new_privs, seccomp, a write outside refused,
/// loopback only), the same environment, the same stop when time runs out.
#[test]
fn a_caged_launch_is_applied_alike_by_both_backends() -> TestResult {
    let Some(_runtime) = user_manager() else { return Ok(()) };
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_teneral"));
    let dir = tempfile::tempdir()?;
    let checkout = dir.path().join("checkout");
    std::fs::create_dir_all(&checkout)?;
    let outside = dir.path().join("outside");
    let script = format!(
        "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; echo ONLY=$ONLY_THIS; \
         touch {} 2>/dev/null && echo wrote-outside || echo outside-refused; \
         touch inside && echo wrote-inside; \
         tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '; echo; \
         echo checking; exec sleep 600",
        outside.display()
    );
    let outputs = block_on(async {
        // Run directly, exits come through the kernel's one reaper.
        teneral::spawn::start_reaper_of_own_children()?;
        let mut outputs = Vec::new();
        for choice in [RunnerChoice::Direct, RunnerChoice::Systemd] {
            let cage = Cage::On { exe: exe.clone(), pretend_missing: vec![] };
            let runner = Runner::choose(choice, cage).await?;
            let spec = Spec::new("/bin/sh", &checkout)
                .arg("-c")
                .arg(&script)
                .env("ONLY_THIS", "1")
                .env("PATH", "/usr/bin:/bin");
            let limits = Limits::none(SHORT).with_runtime_max(Some(Duration::from_secs(3)));
            let profile =
                teneral::runner::Profile::Gate { checkout: checkout.clone(), writable: vec![] };
            let launch = Launch::new(spec, limits).caged(profile);
            let (ended, run) = runner.run("teneral-gate-alike-test.service", launch).await?;
            assert!(ended.over_time, "{choice:?}: {ended:?}");
            std::fs::remove_file(checkout.join("inside"))?;
            outputs.push((runner.is_systemd(), run.stdout_tail()));
        }
        Ok::<_, Box<dyn std::error::Error>>(outputs)
    })??;
    let [(false, direct), (true, unit)] = &outputs[..] else {
        return Err(format!("expected a direct then a systemd run: {outputs:?}").into());
    };
    assert_eq!(direct, unit, "both backends apply the launch alike");
    let want = "NoNewPrivs:\t1\nSeccomp:\t2\nONLY=1\noutside-refused\nwrote-inside\nlo \nchecking";
    assert_eq!(direct, want);
    assert!(!outside.exists());
    Ok(())
}
