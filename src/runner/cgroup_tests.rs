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

/// Says on the test's real stderr (not captured, so it shows in every run)
/// that a test ran nothing, and why.
fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "runner::cgroup test ({test}): skipped: {why}");
}

/// Whether this machine, not the code, is why a cgroup cannot be made at
/// `dir`: the test is not root, or the hierarchy is mounted read-only.
/// Where neither holds, a failure is a fault and fails the test.
fn machine_refuses(dir: &Path) -> bool {
    let read_only = rustix::fs::statvfs(dir)
        .map(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
        .unwrap_or(true);
    !rustix::process::geteuid().is_root() || read_only
}

fn here() -> Located {
    locate(
        &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
    )
}

fn words(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_whitespace().map(str::to_owned).collect()
}

/// A cgroup the test makes (v1: below its own in the memory and pids
/// hierarchies; v2: at the top of the mounted hierarchy), removed at the
/// end. `None`, said on stderr, only where the machine does not allow one;
/// where the test is root and the hierarchy writable, a failure panics.
struct TestCgroup(Delegated);

impl TestCgroup {
    fn v1(test: &str) -> Option<TestCgroup> {
        let (Some(memory), Some(pids)) = (here().memory, here().pids) else {
            skipped(test, "no cgroup v1 memory and pids hierarchies are mounted here (v1 path)");
            return None;
        };
        let name = format!("teneral-test-{}-{test}", std::process::id());
        let (m, p) = (memory.join(&name), pids.join(&name));
        match std::fs::create_dir(&m).and_then(|()| std::fs::create_dir(&p)) {
            Ok(()) => Some(TestCgroup(Delegated::V1 { memory: m, pids: p })),
            Err(e) if machine_refuses(&memory) => {
                let _ = std::fs::remove_dir(&m);
                skipped(
                    test,
                    &format!("cannot make {} (not root, or read-only): {e}", m.display()),
                );
                None
            }
            Err(e) => {
                panic!("root, and {} is writable, yet making {name} failed: {e}", memory.display())
            }
        }
    }

    /// With `limits`, the hierarchy must offer memory and pids (where
    /// they are bound to v1, as on hybrid hosts, it cannot); without, any
    /// writable v2 hierarchy serves (the entering and the killing only).
    fn v2(test: &str, limits: bool) -> Option<TestCgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        // The top of the hierarchy as mounted here.
        let Some(top) = locate("0::/\n", &mountinfo).v2 else {
            skipped(test, "no cgroup v2 hierarchy is mounted here (v2 path)");
            return None;
        };
        let offered = words(&top.join("cgroup.controllers"));
        let wanted = ["memory", "pids"];
        if limits && !wanted.iter().all(|c| offered.iter().any(|o| o == c)) {
            skipped(
                test,
                &format!(
                    "the cgroup v2 hierarchy at {} offers {offered:?}, not memory and pids (they are \
                     bound to cgroup v1 here), so the v2 limits cannot be tried",
                    top.display()
                ),
            );
            return None;
        }
        if machine_refuses(&top) {
            skipped(
                test,
                &format!("cannot make a cgroup in {} (not root, or read-only)", top.display()),
            );
            return None;
        }
        if limits
            && !wanted
                .iter()
                .all(|c| words(&top.join("cgroup.subtree_control")).iter().any(|o| o == c))
        {
            // Enabling below a cgroup that holds processes is refused
            // (EBUSY): the top of a container's own cgroup namespace.
            if let Err(e) = std::fs::write(top.join("cgroup.subtree_control"), "+memory +pids") {
                skipped(
                    test,
                    &format!("cannot enable memory and pids below {}: {e}", top.display()),
                );
                return None;
            }
        }
        let dir = top.join(format!("teneral-test-{}-{test}", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("root, and {} is writable: {e}", top.display()));
        let made = TestCgroup(Delegated::V2(dir.clone()));
        if limits {
            let enabled = std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids");
            enabled.unwrap_or_else(|e| {
                panic!("enabling memory and pids below {}: {e}", dir.display())
            });
        }
        Some(made)
    }

    /// Where child `name`'s cgroup (its memory one, in v1) is.
    fn child(&self, name: &str) -> PathBuf {
        match &self.0 {
            Delegated::V1 { memory, .. } => memory.join(name),
            Delegated::V2(dir) => dir.join(name),
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        match &self.0 {
            Delegated::V1 { memory, pids } => {
                let _ = std::fs::remove_dir(memory);
                let _ = std::fs::remove_dir(pids);
            }
            Delegated::V2(dir) => {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// The test cgroups of both versions this machine allows; says when it
/// allows none.
fn both(test: &str) -> Vec<TestCgroup> {
    let made: Vec<TestCgroup> =
        [TestCgroup::v1(test), TestCgroup::v2(test, true)].into_iter().flatten().collect();
    if made.is_empty() {
        skipped(test, "no cgroup of either version could be made: this test ran nothing");
    }
    made
}

fn runtime() -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    rt.expect("a current-thread runtime builds")
}

#[test]
fn a_child_past_its_memory_limit_is_killed_and_its_cgroup_removed() {
    for cg in both("memory") {
        let how = cg.0.describe();
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
            assert_eq!(ended.exit, Exit::Signal(9), "{how}: {}", run.output_tail());
            assert_eq!(ended.result, "oom-kill", "{how}");
            assert!(!run.stdout_tail().contains("survived"), "{how}");
            assert!(!cg.child("teneral-gen-hog.service").exists(), "{how}: its cgroup is removed");

            // Within the limit: runs as it would directly.
            let spec = Spec::new("/bin/sh", "/").arg("-c").arg("echo fine");
            let (ended, run) =
                runner.run("teneral-gen-ok.service", Launch::new(spec, limits)).await.expect("sh starts");
            assert_eq!((ended.exit, ended.result.as_str()), (Exit::Code(0), "success"), "{how}");
            assert_eq!(run.stdout_tail(), "fine", "{how}");
        });
    }
}

#[test]
fn a_child_past_its_task_limit_cannot_fork() {
    for cg in both("tasks") {
        let how = cg.0.describe();
        runtime().block_on(async {
            spawn::start_reaper_of_own_children().expect("the reaper starts");
            let limits = Limits { tasks_max: Some(5), ..Limits::none(Duration::from_secs(2)) };
            // Forks until refused; the errno and how many it got are printed.
            let forks = "import errno, os, time\nn = 0\ntry:\n    while n < 50:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(errno.errorcode[e.errno], n)";
            let spec = Spec::new("/usr/bin/python3", "/").arg("-c").arg(forks);
            let runner = Runner::cgroup(cg.0.clone(), Cage::Off);
            let began = std::time::Instant::now();
            let (ended, run) = runner
                .run("teneral-gen-forks.service", Launch::new(spec, limits))
                .await
                .expect("python3 starts");
            // Five tasks: python and four children.
            assert_eq!(run.stdout_tail(), "EAGAIN 4", "{how}: {}", run.output_tail());
            assert_eq!(ended.exit, Exit::Code(0), "{how}");
            // The sleeping children were killed with the cgroup, not waited for.
            assert!(began.elapsed() < Duration::from_secs(20), "{how}: {:?}", began.elapsed());
        });
    }
}

/// The v2 path without limits, where any v2 hierarchy may be written (on a
/// hybrid host, its unified one): the child is in its own leaf before it
/// runs anything, and what it leaves behind is killed with the leaf
/// (`cgroup.kill`), which is then removed.
#[test]
fn a_child_enters_its_own_v2_cgroup_and_what_it_leaves_is_killed() {
    let Some(cg) = TestCgroup::v2("enter", false) else { return };
    let Delegated::V2(dir) = &cg.0 else { unreachable!("made as v2") };
    let leaf = format!(
        "{}/teneral-gen-left.service",
        dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
    );
    runtime().block_on(async {
        spawn::start_reaper_of_own_children().expect("the reaper starts");
        // A sleeper left behind, in a session of its own, holding no pipe.
        let script = "grep '^0::' /proc/self/cgroup; setsid sleep 300 </dev/null >/dev/null 2>&1 &";
        let spec = Spec::new("/bin/sh", "/").arg("-c").arg(script);
        let runner = Runner::cgroup(cg.0.clone(), Cage::Off);
        let began = std::time::Instant::now();
        let (ended, run) = runner
            .run(
                "teneral-gen-left.service",
                Launch::new(spec, Limits::none(Duration::from_secs(2))),
            )
            .await
            .expect("sh starts");
        assert_eq!(ended.exit, Exit::Code(0), "{}", run.output_tail());
        assert!(run.stdout_tail().ends_with(&leaf), "{} is not in {leaf}", run.stdout_tail());
        assert!(
            !cg.child("teneral-gen-left.service").exists(),
            "the leaf is removed, its sleeper killed"
        );
        assert!(began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
    });
}
