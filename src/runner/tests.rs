use super::*;
use crate::confine::Profile;

fn runtime() -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    rt.expect("a current-thread runtime builds")
}

#[test]
fn run_directly_a_runtime_limit_stops_it_as_over_time() {
    runtime().block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let spec = Spec::new("/bin/sh", "/").arg("-c").arg("echo checking; exec sleep 600");
        let limits =
            Limits::none(Duration::from_secs(2)).with_runtime_max(Some(Duration::from_millis(300)));
        let began = std::time::Instant::now();
        let runner = Runner::direct(Cage::Off);
        let (ended, check) = runner
            .run("teneral-gate-x-check.service", Launch::new(spec, limits))
            .await
            .expect("sh starts");
        assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
        assert_eq!(
            ended,
            Ended { exit: Exit::Signal(15), result: "timeout".into(), over_time: true }
        );
        assert_eq!(check.output_tail(), "checking");
        assert_eq!(check.stdout_tail(), "checking");
        assert_eq!(check.stderr_tail(), "");
    });
}

#[test]
fn with_the_cage_off_a_profile_runs_the_program_as_it_is() {
    runtime().block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let dir = tempfile::tempdir().expect("a temp dir");
        let spec = Spec::new("/bin/sh", dir.path()).arg("-c").arg("echo $0; echo oops >&2");
        let profile = Profile::Gate { checkout: dir.path().to_owned(), writable: vec![] };
        let launch = Launch::new(spec, Limits::none(Duration::from_secs(1))).caged(profile);
        let (ended, run) =
            Runner::direct(Cage::Off).run("teneral-gate-x-y.service", launch).await.expect("runs");
        assert_eq!(ended.exit, Exit::Code(0));
        assert_eq!(run.stdout_tail(), "/bin/sh");
        assert_eq!(run.stderr_tail(), "oops");
        assert_eq!(ended.cage_step(), None);
    });
}

#[test]
fn only_a_runner_that_may_be_systemd_asks_the_bus() {
    for (choice, asks) in
        [(RunnerChoice::Direct, false), (RunnerChoice::Auto, true), (RunnerChoice::Systemd, true)]
    {
        assert_eq!(asks_the_bus(choice), asks, "{choice:?}");
    }
}

#[test]
fn a_background_launch_asks_the_cage_for_nice_19_under_every_backend() {
    let none = Limits::none(Duration::from_secs(2));
    let background = none.in_background();
    let direct = Runner::direct(Cage::Off);
    assert_eq!(direct.rlimits(&background).nice, Some(19));
    assert_eq!(direct.rlimits(&none).nice, None);
    let delegated = cgroup::Delegated::V2(std::path::PathBuf::from("/sys/fs/cgroup/x"));
    let cgroup = Runner::cgroup(delegated, Cage::Off);
    assert_eq!(cgroup.rlimits(&background).nice, Some(19));
    assert_eq!(cgroup.rlimits(&background).tasks, None, "the cgroup holds the tasks");
    assert_eq!(cgroup.rlimits(&none).nice, None);
}
