use std::time::Duration;

use super::*;
use crate::runner::{Cage, Launch, Runner};
use crate::spawn::{self, Exit};

const HYBRID_CGROUP: &str = "4:memory:/process_api/abc\n8:pids:/\n0::/\n";
const HYBRID_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
33 25 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
";

#[test]
fn locate_reads_where_each_hierarchy_puts_the_kernel() {
    let v2_container = (
        "0::/\n",
        "40 30 0:33 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
        Located { v2: Some("/sys/fs/cgroup".into()), ..Located::default() },
    );
    let v2_unit = (
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/teneral.service\n",
        "40 30 0:33 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        Located {
            v2: Some(
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/teneral.service"
                    .into(),
            ),
            ..Located::default()
        },
    );
    let hybrid = (
        HYBRID_CGROUP,
        HYBRID_MOUNTS,
        Located {
            v2: Some("/sys/fs/cgroup/unified/".into()),
            memory: Some("/sys/fs/cgroup/memory/process_api/abc".into()),
            pids: Some("/sys/fs/cgroup/pids/".into()),
        },
    );
    // A mount of part of the hierarchy (field 4 is not /): the path below it.
    let bound = (
        "0::/outer/inner\n",
        "40 30 0:33 /outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        Located { v2: Some("/sys/fs/cgroup/inner".into()), ..Located::default() },
    );
    // A container on a v1 host: its own cgroup read-only, and a writable
    // parent bound over it (docs/container.md).
    let stacked = (
        "4:memory:/teneral-ct/libpod-1\n8:pids:/teneral-ct/libpod-1\n",
        "97 93 0:32 /teneral-ct/libpod-1 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory
101 93 0:36 /teneral-ct/libpod-1 /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids
103 101 0:36 /teneral-ct /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
104 97 0:32 /teneral-ct /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
",
        Located {
            v2: None,
            memory: Some("/sys/fs/cgroup/memory/libpod-1".into()),
            pids: Some("/sys/fs/cgroup/pids/libpod-1".into()),
        },
    );
    let none = ("0::/\n", "20 1 0:5 / /proc rw - proc proc rw\n", Located::default());
    for (i, (cgroup, mounts, want)) in
        [v2_container, v2_unit, hybrid, bound, stacked, none].into_iter().enumerate()
    {
        assert_eq!(locate(cgroup, mounts), want, "case {i}");
    }
}

#[test]
fn settings_hold_the_limits_in_each_version() {
    let limits = Limits {
        memory_max: Some(64 << 20),
        tasks_max: Some(50),
        ..Limits::none(Duration::from_secs(1))
    };
    let v2 = Group { dirs: vec!["/c/x".into()], v2: true };
    let names: Vec<(String, String)> =
        v2.settings(&limits).into_iter().map(|(p, v)| (p.display().to_string(), v)).collect();
    let want = [
        ("/c/x/memory.max", "67108864"),
        ("/c/x/memory.swap.max", "0"),
        ("/c/x/memory.oom.group", "1"),
        ("/c/x/pids.max", "50"),
    ];
    assert_eq!(names, want.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let v1 = Group { dirs: vec!["/m/x".into(), "/p/x".into()], v2: false };
    let files: Vec<PathBuf> = v1.settings(&limits).into_iter().map(|(p, _)| p).collect();
    assert_eq!(files[0], Path::new("/m/x/memory.limit_in_bytes"));
    assert_eq!(files.last(), Some(&PathBuf::from("/p/x/pids.max")));
    assert!(v1.settings(&Limits::none(Duration::from_secs(1))).is_empty());
}

/// A cgroup the test makes below its own (v2 when the controllers are
/// there, else the v1 hierarchies), removed at the end; `None` where this
/// machine has none the test may write (then it says so).
struct TestCgroup(Delegated);

impl TestCgroup {
    fn make() -> Option<TestCgroup> {
        let found = locate(
            &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
            &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
        );
        let name = format!("teneral-test-{}", std::process::id());
        let made = match (found.memory, found.pids) {
            (Some(m), Some(p)) => {
                let (m, p) = (m.join(&name), p.join(&name));
                std::fs::create_dir(&m).and_then(|()| std::fs::create_dir(&p)).ok()?;
                Delegated::V1 { memory: m, pids: p }
            }
            _ => {
                eprintln!("no cgroup v1 memory and pids here: the v2 path is tested in a container (scripts/test-container)");
                return None;
            }
        };
        Some(TestCgroup(made))
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if let Delegated::V1 { memory, pids } = &self.0 {
            let _ = std::fs::remove_dir(memory);
            let _ = std::fs::remove_dir(pids);
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    rt.expect("a current-thread runtime builds")
}

#[test]
fn a_child_past_its_memory_limit_is_killed_and_its_cgroup_removed() {
    let Some(cg) = TestCgroup::make() else { return };
    runtime().block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let limits = Limits {
            memory_max: Some(32 << 20),
            tasks_max: Some(20),
            ..Limits::none(Duration::from_secs(2))
        };
        // 256 MiB, touched: far past 32 MiB.
        let hog = "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')";
        let spec = Spec::new("/usr/bin/python3", "/").arg("-c").arg(hog);
        let runner = Runner::cgroup(cg.0.clone(), Cage::Off);
        let (ended, run) = runner
            .run("teneral-gen-hog.service", Launch::new(spec, limits))
            .await
            .expect("python3 starts");
        assert_eq!(ended.exit, Exit::Signal(9), "{}", run.output_tail());
        assert_eq!(ended.result, "oom-kill");
        assert!(!run.stdout_tail().contains("survived"));
        let Delegated::V1 { memory, .. } = &cg.0 else { unreachable!("made as v1") };
        assert!(!memory.join("teneral-gen-hog.service").exists(), "its cgroup is removed");

        // Within the limit: runs as it would directly.
        let spec = Spec::new("/bin/sh", "/").arg("-c").arg("echo fine");
        let (ended, run) =
            runner.run("teneral-gen-ok.service", Launch::new(spec, limits)).await.expect("sh starts");
        assert_eq!((ended.exit, ended.result.as_str()), (Exit::Code(0), "success"));
        assert_eq!(run.stdout_tail(), "fine");
    });
}

#[test]
fn a_child_past_its_task_limit_cannot_fork() {
    let Some(cg) = TestCgroup::make() else { return };
    runtime().block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        let limits = Limits { tasks_max: Some(5), ..Limits::none(Duration::from_secs(2)) };
        // Forks until refused; the errno and how many it got are printed.
        let forks = "import errno, os, time\nn = 0\ntry:\n    while n < 50:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(errno.errorcode[e.errno], n)";
        let spec = Spec::new("/usr/bin/python3", "/").arg("-c").arg(forks);
        let runner = Runner::cgroup(cg.0.clone(), Cage::Off);
        let began = std::time::Instant::now();
        let (ended, run) =
            runner.run("teneral-gen-forks.service", Launch::new(spec, limits)).await.expect("python3 starts");
        // Five tasks: python and four children.
        assert_eq!(run.stdout_tail(), "EAGAIN 4", "{}", run.output_tail());
        assert_eq!(ended.exit, Exit::Code(0));
        // The sleeping children were killed with the cgroup, not waited for.
        assert!(began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
    });
}
