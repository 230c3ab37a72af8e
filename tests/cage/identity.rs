//! Who a cage is on the host, and what the kernel talks to: a root
//! kernel's body and checks run as their individual's own identity, which
//! owns what they write and which no other individual shares; run
//! directly, the kernel never connects to a session bus.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use teneral::confine::identity;
use teneral::confine::Profile;
use teneral::runner::{Launch, Limits, Runner};
use teneral::spawn::Spec;
use teneral_cage::identity::Identity;

use super::*;

/// The individual the child half serves.
const HOME_VAR: &str = "TENERAL_TEST_IDENTITY_HOME";

/// What the body and the check write, beneath the individual.
const WRITTEN: [&str; 7] = [
    "soul",
    "soul/made",
    "soul/deep/er/file",
    ".teneral/gate/checkout",
    ".teneral/gate/checkout/made",
    ".teneral/gate/target",
    ".teneral/gate/target/artifact",
];

/// The child's half, a kernel process of its own: for the individual at
/// `HOME_VAR`, through the kernel's runner (direct, caged, for that
/// individual), a body (generation profile) writes in `soul/` and a check
/// (gate profile) in its checkout and the gate's target; prints the
/// identity the machine's record gives the individual.
#[test]
fn child_writes_as_its_individual() {
    let Some(home) = std::env::var_os(HOME_VAR).map(PathBuf::from) else {
        return; // Run by a parent test only.
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        teneral::spawn::start_reaper_of_own_children().expect("the reaper starts");
        let cage = teneral::runner::Cage::On { exe: teneral(), pretend_missing: vec![] };
        let runner = Runner::direct(cage).for_individual(&home);
        let limits =
            Limits::none(Duration::from_secs(5)).with_runtime_max(Some(Duration::from_secs(120)));
        let sh = |cwd: &Path, script: &str| {
            let mut spec = Spec::new("/bin/sh", cwd).arg("-c").arg(script);
            spec.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
            spec
        };
        let body = sh(
            &home,
            "echo body > soul/made && mkdir -p soul/deep/er && echo x > soul/deep/er/file",
        );
        let profile = Profile::Generation { home: home.clone(), forward: vec![] };
        let (ended, run) = runner
            .run("teneral-gen-identity.service", Launch::new(body, limits).caged(profile))
            .await
            .expect("the body starts");
        assert!(ended.exit.success(), "the body wrote: {}", run.output_tail());

        let checkout = home.join(".teneral/gate/checkout");
        let target = home.join(".teneral/gate/target");
        for dir in [&checkout, &target] {
            std::fs::create_dir_all(dir).expect("the gate's places are made");
        }
        let script = format!("echo check > made && echo t > {}/artifact", target.display());
        let profile = Profile::Gate { checkout: checkout.clone(), writable: vec![target] };
        let check = Launch::new(sh(&checkout, &script), limits).caged(profile);
        let (ended, run) =
            runner.run("teneral-gate-identity.service", check).await.expect("the check starts");
        assert!(ended.exit.success(), "the check wrote: {}", run.output_tail());
        let id = identity::of(&home).expect("the individual's identity");
        println!("\nIDENTITY {}", id.to_arg());
    });
}

/// Runs the child half for `home` in a process of its own (a kernel
/// started anew), with the test individuals' shared name unset; the
/// identity it printed.
fn kernel_writes(home: &Path) -> Result<Identity, Box<dyn std::error::Error>> {
    let out = std::process::Command::new("timeout")
        .arg("300")
        .arg(std::env::current_exe()?)
        .args(["cage::identity::child_writes_as_its_individual", "--exact", "--nocapture"])
        .arg("--test-threads=1")
        .env(HOME_VAR, home)
        .env_remove(identity::TEST_KEY_VAR)
        .output_within(SLOW)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("IDENTITY "));
    let id = line.and_then(Identity::from_arg);
    Ok(id.ok_or_else(|| format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)))?)
}

/// A fresh individual: a repository with one tracked file.
fn bare_individual(root: &Path, name: &str) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let home = root.join(name);
    std::fs::create_dir_all(&home)?;
    std::fs::write(home.join("BIRTH.md"), "Hello.\n")?;
    commit_all(&home, "birth")?;
    Ok(home.canonicalize()?)
}

/// Under a root kernel, what a body and a check write is owned on the host
/// by their individual's identity, never root nor nobody; a second
/// individual has an identity of its own, and a kernel started again for
/// the first finds the same one. The kernel's journal stays its own.
#[test]
fn what_a_body_and_a_check_write_is_their_individuals_own() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        crate::common::skip("an individual's own identity is a root kernel's");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-identity").tempdir()?;
    let (a, b) = (bare_individual(dir.path(), "a")?, bare_individual(dir.path(), "b")?);
    let first = kernel_writes(&a)?;
    let again = kernel_writes(&a)?;
    let other = kernel_writes(&b)?;
    assert_eq!(first, again, "a kernel started again keeps its individual's identity");
    assert!(first.uid != other.uid && first.gid != other.gid, "{first:?} and {other:?}");
    for (home, id) in [(&a, first), (&b, other)] {
        assert!(![0, teneral_cage::BODY_ID].contains(&id.uid), "{id:?}");
        for rel in WRITTEN {
            let meta = std::fs::symlink_metadata(home.join(rel))?;
            assert_eq!((meta.uid(), meta.gid()), (id.uid, id.gid), "{}", home.join(rel).display());
        }
        let journal = std::fs::symlink_metadata(home.join("memory/journal.jsonl"))?;
        assert_eq!(journal.uid(), 0, "the kernel's journal stays the kernel's");
    }
    let record = std::fs::read_to_string(identity::REGISTRY)?;
    for (home, id) in [(&a, first), (&b, other)] {
        let line = format!("{} {} {}", id.uid, id.gid, home.display());
        assert!(record.lines().any(|l| l == line), "{line} in {record}");
    }
    Ok(())
}

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
"#;

/// Whether a connection reaches `listener` within `wait`.
fn connected_within(listener: &UnixListener, wait: Duration) -> std::io::Result<bool> {
    let end = Instant::now() + wait;
    loop {
        match listener.accept() {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if Instant::now() > end {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A kernel under `TENERAL_RUNNER=direct`, its session bus a socket of the
/// test's: nothing connects to it, while a kernel under `auto` does (the
/// test would see a connection).
#[test]
fn a_kernel_run_directly_never_connects_to_the_session_bus() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-bus").tempdir()?;
    let path = dir.path().join("bus");
    let listener = UnixListener::bind(&path)?;
    listener.set_nonblocking(true)?;
    let address = format!("unix:path={}", path.display());
    let bus = [("DBUS_SESSION_BUS_ADDRESS", address.as_str())];
    let started = "running children directly (TENERAL_RUNNER=direct)";

    let direct = Individual::new(SCRIPT, &["TENERAL_RUNNER=direct"])?;
    let kernel = direct.start_with(&bus)?;
    let end = Instant::now() + Duration::from_secs(120);
    while !direct.kernel_log().contains(started) {
        assert!(Instant::now() < end, "the kernel chose no runner:\n{}", direct.kernel_log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let asked = connected_within(&listener, Duration::from_secs(3))?;
    drop(kernel);
    assert!(!asked, "a direct kernel connected to the bus:\n{}", direct.kernel_log());

    let auto = Individual::new(SCRIPT, &["TENERAL_RUNNER=auto"])?;
    let kernel = auto.start_with(&bus)?;
    let asked = connected_within(&listener, Duration::from_secs(120))?;
    drop(kernel);
    assert!(asked, "an auto kernel looks for a manager on the bus:\n{}", auto.kernel_log());
    Ok(())
}

/// A check replaces the sockets' directory in the gate's target by a link
/// to a directory of root's elsewhere; the next check of a root kernel,
/// whose grant leads there through the kernel's own link, is refused at its
/// `root` step: the directory is neither given to the identity nor mounted,
/// and nothing is written in it.
#[test]
fn a_link_a_check_plants_where_a_grant_leads_is_not_followed() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    use teneral::confine::{host, plan};
    if !require_cage()? {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        crate::common::skip("an individual's own identity is a root kernel's");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-planted").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let root = dir.path().canonicalize()?;
    let (checkout, target, outside) =
        (root.join("checkout"), root.join("target"), root.join("outside"));
    for d in [&checkout, &target, &outside] {
        std::fs::create_dir(d)?;
    }
    std::fs::write(outside.join("file"), "root's\n")?;
    let (uids, gids) = identity::ranges();
    let id = identity::Registry::machine().identity_of(&checkout, uids, gids)?;
    // What an earlier check left: the target its identity's, the sockets'
    // directory a link of its own to a place of root's.
    std::os::unix::fs::chown(&target, Some(id.uid), Some(id.gid))?;
    let planted = target.join("sockets");
    std::os::unix::fs::symlink(&outside, &planted)?;
    std::os::unix::fs::lchown(&planted, Some(id.uid), Some(id.gid))?;
    // The kernel's own link to the sockets' directory.
    let link = root.join("g-link");
    std::os::unix::fs::symlink(&planted, &link)?;
    let writable = [target.clone(), link.clone()];
    let mut plan = plan::gate(&checkout, &writable, &host::host(&[&checkout, &target]));
    plan.identity = Some(id);
    let mut args = plan.to_args();
    args.push("--".into());
    let out = std::process::Command::new("timeout")
        .arg("60")
        .arg(teneral())
        .arg("confine")
        .args(args)
        .args(["/bin/sh", "-c", "echo written > \"$0\"/made"])
        .arg(&link)
        .current_dir(&checkout)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output_within(SLOW)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(teneral_cage::EXIT_NAMESPACES), "{err}");
    assert!(err.contains("teneral confine: root:") && err.contains("is a link"), "{err}");
    assert!(!outside.join("made").exists(), "the check wrote through the link: {err}");
    for p in [&outside, &outside.join("file")] {
        assert_eq!(std::fs::metadata(p)?.uid(), 0, "{} was given away", p.display());
    }
    Ok(())
}

/// The same through a kernel that is not root (the helper run as `nobody`,
/// whose own files the check's and the owner's alike are): a link planted
/// beneath the gate's target, through which the kernel's own link leads,
/// is refused at the `root` step, and the owner's directory it points at
/// is neither mounted nor written.
#[test]
fn a_link_planted_beneath_a_writable_grant_is_not_followed_by_any_kernel() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    if !require_cage()? {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        crate::common::skip("the test becomes nobody through setpriv, which needs root");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-planted2").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let root = dir.path().canonicalize()?;
    let (checkout, target, secret) = (root.join("checkout"), root.join("target"), root.join("ssh"));
    for d in [&checkout, &target, &secret] {
        std::fs::create_dir(d)?;
        std::os::unix::fs::chown(d, Some(65534), Some(65534))?;
    }
    let planted = target.join("sockets");
    std::os::unix::fs::symlink(&secret, &planted)?;
    std::os::unix::fs::lchown(&planted, Some(65534), Some(65534))?;
    let link = root.join("g-link");
    std::os::unix::fs::symlink(&planted, &link)?;
    let out = std::process::Command::new("timeout")
        .args(["60", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(teneral())
        .args(["confine", "--profile", "gate", "--net", "loopback"])
        .args(["--exec", "/usr", "--exec", "/bin", "--exec", "/lib", "--read", "/etc"])
        .args(["--read-write", "/dev/null", "--write"])
        .arg(&checkout)
        .arg("--write")
        .arg(&target)
        .arg("--write")
        .arg(&link)
        .args(["--", "/bin/sh", "-c", "echo written > \"$0\"/made"])
        .arg(&link)
        .current_dir(&checkout)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output_within(SLOW)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(teneral_cage::EXIT_NAMESPACES), "{err}");
    assert!(err.contains("teneral confine: root:") && err.contains("is a link"), "{err}");
    assert!(!secret.join("made").exists(), "the check wrote through the link: {err}");
    Ok(())
}
