//! What a cage inherits and what it makes carry no privilege: a descriptor
//! its starter holds and the launch does not name is not open inside (the
//! executed helper and the zygote alike), a set-id `chmod` is refused and
//! every writable grant is `nosuid,nodev`, of `~/.config/git` only its
//! plain configuration files are there, what a cage leaves is its
//! individual's and gives no one root, and a fork bomb ends in EAGAIN
//! inside its own cage and individual.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use teneral::confine::host::{self, Homes};
use teneral::confine::plan;
use teneral_cage::plan::{Plan, Rlimits};
use teneral_cage::zygote::Request;

use super::*;

type Outcome<T> = Result<T, Box<dyn std::error::Error>>;

/// Runs each probe given as `name[:path]` and prints one line for it:
/// `<name> OK <detail>` or `<name> ERRNO <n>`.
const PROBE: &str = r#"
import os, shutil, sys, time
def fork(n):
    kids, err = [], None
    for _ in range(int(n)):
        try:
            pid = os.fork()
        except OSError as e:
            err = e
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    if err is not None:
        err.strerror = str(len(kids))
        raise err
    return len(kids)
def bomb(n):
    try:
        fork(n)
    except OSError as e:
        print("bomb ERRNO", e.errno, e.strerror, flush=True)
    held = []
    while True:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        held.append(pid)
    print("holding", len(held), flush=True)
    time.sleep(60)
probes = {
    "fd7": lambda p: os.fstat(7).st_size,
    "procfd7": lambda p: open("/proc/self/fd/7").read(),
    "readfd7": lambda p: os.pread(7, 100, 0).decode().strip(),
    "read": lambda p: open(p).read().strip(),
    "chmod_suid": lambda p: os.chmod(p, 0o4755),
    "chmod_sgid": lambda p: os.chmod(p, 0o2755),
    "chmod": lambda p: os.chmod(p, 0o755),
    "create_suid": lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o4755)),
    "nosuid": lambda p: int(bool(os.statvfs(p).f_flag & os.ST_NOSUID)),
    "nodev": lambda p: int(bool(os.statvfs(p).f_flag & os.ST_NODEV)),
    "fork": fork,
    "bomb": bomb,
    "uid": lambda p: os.geteuid(),
    "nice": lambda p: os.nice(0),
    "copy": lambda p: os.chmod(shutil.copy("/usr/bin/id", p), 0o755),
}
for arg in sys.argv[1:]:
    name, _, path = arg.partition(":")
    try:
        print(name, "OK", probes[name](path), flush=True)
    except OSError as e:
        print(name, "ERRNO", e.errno, e.strerror, flush=True)
"#;

const PYTHON: &str = "/usr/bin/python3";

/// The line of probe `name` in `out`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name} ");
    out.lines().find(|l| l.starts_with(&prefix)).unwrap_or("(no line)")
}

fn probes(pairs: &[(&str, &Path)]) -> Vec<OsString> {
    pairs.iter().map(|(n, p)| format!("{n}:{}", p.display()).into()).collect()
}

/// Runs the probe inside `plan` through the executed helper, from a shell
/// that holds `secret` open as descriptor 7 (not close-on-exec), as a
/// kernel started with `7<secret` would.
fn through_helper(plan: &Plan, cwd: &Path, secret: &Path, args: &[OsString]) -> Outcome<String> {
    let mut helper = plan.to_args();
    helper.push("--".into());
    let out = Command::new("/bin/sh")
        .args(["-c", "exec 7<\"$0\" && exec \"$@\""])
        .arg(secret)
        .arg(teneral())
        .arg("confine")
        .args(helper)
        .args([PYTHON, "-c", PROBE])
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output_within(SLOW)?;
    Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The same through a zygote, whose request hands the launch `secret` as
/// descriptor 7 beside its standard ones while the plan names none.
fn through_zygote(plan: &Plan, cwd: &Path, secret: &Path, args: &[OsString]) -> Outcome<String> {
    use std::io::{Read, Seek};
    let zygote = super::zygote::zygote()?;
    let helper = PathBuf::from(env!("CARGO_BIN_EXE_teneral-confine"));
    let mut argv: Vec<OsString> = vec![PYTHON.into(), "-c".into(), PROBE.into()];
    argv.extend(args.iter().cloned());
    let mut all = host::helper_argv(&helper, plan.to_args(), argv);
    all.remove(0);
    let mut out = tempfile::tempfile()?;
    let fds = vec![
        (0, OwnedFd::from(std::fs::File::open("/dev/null")?)),
        (1, OwnedFd::from(out.try_clone()?)),
        (2, OwnedFd::from(out.try_clone()?)),
        (7, OwnedFd::from(std::fs::File::open(secret)?)),
    ];
    let env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    let request = Request { args: all, cwd: cwd.to_owned(), env, fds };
    let pid = zygote.launch(&request)?.pid;
    let pid = rustix::process::Pid::from_raw(pid as i32).ok_or("no pid")?;
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())?;
    let mut text = String::new();
    out.rewind()?;
    out.read_to_string(&mut text)?;
    Ok(text)
}

/// A secret as the test's starter would hold it: a 0600 file in a 0700
/// directory.
fn secret(dir: &Path) -> Outcome<PathBuf> {
    let closed = dir.join("closed");
    std::fs::create_dir(&closed)?;
    let secret = closed.join("secret");
    std::fs::write(&secret, format!("{SECRET}\n"))?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700))?;
    Ok(secret)
}

/// A body's plan for an individual at `home` (made), and a check's for a
/// checkout at `checkout` (made), both open to others as the cage needs.
fn plans(root: &Path) -> Outcome<(PathBuf, Plan, PathBuf, Plan)> {
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))?;
    let home = root.join("individual");
    let checkout = root.join("checkout");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&checkout)?;
    host::prepare_generation(&home)?;
    let mut body = plan::generation(&home, &[], &host::host(&[&home]));
    body.rules.retain(|r| r.path.exists());
    let gate = plan::gate(&checkout, &[], &host::host(&[&checkout]));
    Ok((home, body, checkout, gate))
}

/// A descriptor the starter holds open without close-on-exec (a 0600
/// file below a 0700 directory) is not open in a body's nor in a check's
/// cage: `fstat(7)` is EBADF and `/proc/self/fd/7` is not there (ENOENT),
/// through the executed helper and through the zygote, which was handed it.
#[test]
fn a_descriptor_the_launch_does_not_name_is_not_open_inside() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-fds").tempdir()?;
    let secret = secret(dir.path())?;
    let (home, body, checkout, gate) = plans(dir.path())?;
    let args: Vec<OsString> = vec!["fd7".into(), "procfd7".into(), "readfd7".into()];
    for (name, plan, cwd) in [("body", &body, &home), ("check", &gate, &checkout)] {
        for (how, out) in [
            ("helper", through_helper(plan, cwd, &secret, &args)?),
            ("zygote", through_zygote(plan, cwd, &secret, &args)?),
        ] {
            assert!(
                line(&out, "fd7").starts_with(&format!("fd7 ERRNO {EBADF} ")),
                "{name}, {how}: {out}"
            );
            assert!(
                line(&out, "procfd7").starts_with(&format!("procfd7 ERRNO {ENOENT} ")),
                "{name}, {how}: {out}"
            );
            assert!(
                line(&out, "readfd7").starts_with(&format!("readfd7 ERRNO {EBADF} ")),
                "{name}, {how}: {out}"
            );
            assert!(!out.contains(SECRET), "{name}, {how}: {out}");
        }
    }
    // The probe can see a descriptor: one the plan names crosses.
    let mut named = gate.clone();
    named.fds.push(7);
    let out = through_helper(&named, &checkout, &secret, &args)?;
    assert!(line(&out, "fd7").starts_with("fd7 OK"), "a named descriptor: {out}");
    assert_eq!(line(&out, "readfd7"), format!("readfd7 OK {SECRET}"), "a named descriptor: {out}");
    Ok(())
}

/// In a body's cage and a check's, `chmod` to a set-uid or set-gid mode and
/// a file created with one are refused (EPERM) while `chmod 0755` works; a
/// set-uid file already in a writable grant is on a `nosuid,nodev` mount
/// there, so executing it gains nothing.
#[test]
fn nothing_a_cage_writes_carries_a_set_id_bit() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-setid").tempdir()?;
    let secret = secret(dir.path())?;
    let (home, body, checkout, gate) = plans(dir.path())?;
    for (name, plan, cwd, place) in
        [("body", &body, &home, home.join("soul")), ("check", &gate, &checkout, checkout.clone())]
    {
        let planted = place.join("planted");
        std::fs::copy("/bin/true", &planted)?;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755))?;
        // The kernel's own file, which the cage shows as its body's.
        let mine = place.join("mine");
        std::fs::write(&mine, "#!/bin/sh\n")?;
        let args = probes(&[
            ("chmod_suid", &mine),
            ("chmod_sgid", &mine),
            ("create_suid", &place.join("made")),
            ("chmod", &mine),
            ("nosuid", &planted),
            ("nodev", &planted),
        ]);
        let out = through_helper(plan, cwd, &secret, &args)?;
        for probe in ["chmod_suid", "chmod_sgid", "create_suid"] {
            assert!(
                line(&out, probe).starts_with(&format!("{probe} ERRNO {EPERM} ")),
                "{name}: {out}"
            );
        }
        assert!(line(&out, "chmod").starts_with("chmod OK"), "{name}: {out}");
        assert_eq!(line(&out, "nosuid"), "nosuid OK 1", "{name}: {out}");
        assert_eq!(line(&out, "nodev"), "nodev OK 1", "{name}: {out}");
        let mode = std::fs::metadata(&mine)?.permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{name}: the host sees no set-id bit");
        assert!(!place.join("made").exists(), "{name}: nothing was made");
    }
    Ok(())
}

/// Of `~/.config/git` only `config` (a file) is there for a body and a
/// check; `credentials` beside it is not (ENOENT).
#[test]
fn gits_credentials_are_not_there() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-gitcfg").tempdir()?;
    let secret = secret(dir.path())?;
    let (home, _, checkout, _) = plans(dir.path())?;
    let user = dir.path().join("user");
    let git = user.join(".config/git");
    std::fs::create_dir_all(&git)?;
    std::fs::write(git.join("config"), "owner-config\n")?;
    std::fs::write(git.join("credentials"), format!("https://owner:{SECRET}@example.org\n"))?;
    for p in [&user, &user.join(".config"), &git] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    }
    for f in ["config", "credentials"] {
        std::fs::set_permissions(git.join(f), std::fs::Permissions::from_mode(0o644))?;
    }
    let homes = Homes { home: Some(user.clone()), ..Homes::default() };
    let mut body = plan::generation(&home, &[], &host::host_of(&homes, &[&home]));
    body.rules.retain(|r| r.path.exists());
    let gate = plan::gate(&checkout, &[], &host::host_of(&homes, &[&checkout]));
    let args = probes(&[("read", &git.join("config")), ("read", &git.join("credentials"))]);
    for (name, plan, cwd) in [("body", &body, &home), ("check", &gate, &checkout)] {
        let out = through_helper(plan, cwd, &secret, &args[..1])?;
        assert_eq!(line(&out, "read"), "read OK owner-config", "{name}: {out}");
        let out = through_helper(plan, cwd, &secret, &args[1..])?;
        assert!(line(&out, "read").starts_with(&format!("read ERRNO {ENOENT} ")), "{name}: {out}");
        assert!(!out.contains(SECRET), "{name}: {out}");
    }
    Ok(())
}

/// With `TasksMax` as the cage's RLIMIT_NPROC, a fork bomb in a check's
/// cage ends in EAGAIN before it has the limit's count of processes; while
/// it holds every process it may have, a second cage started afterwards
/// forks as before: each cage counts its own.
#[test]
fn a_fork_bomb_ends_in_eagain_inside_its_cage() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    use std::io::BufRead;
    const LIMIT: u64 = 24;
    let dir = tempfile::Builder::new().prefix("tnl-nproc").tempdir()?;
    let secret = secret(dir.path())?;
    let (_, _, checkout, mut gate) = plans(dir.path())?;
    gate.limits = Rlimits { tasks: Some(LIMIT), address_space: Some(2 << 30), nice: None };
    let out = through_helper(&gate, &checkout, &secret, &["fork:1000".into()])?;
    let got = line(&out, "fork");
    let forked: u64 = got
        .strip_prefix(&format!("fork ERRNO {EAGAIN} "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("the bomb ends in EAGAIN: {out}"))?;
    assert!(forked < LIMIT, "{forked} children under a limit of {LIMIT}: {out}");

    let mut helper = gate.to_args();
    helper.push("--".into());
    let mut bomb = Command::new(teneral())
        .arg("confine")
        .args(helper)
        .args([PYTHON, "-c", PROBE, "bomb:1000"])
        .current_dir(&checkout)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let stdout = bomb.stdout.take().ok_or("the bomb's stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line?;
        seen.push(line.clone());
        if line.starts_with("holding") {
            break;
        }
    }
    let later = through_helper(&gate, &checkout, &secret, &["fork:8".into()]);
    let _ = bomb.kill();
    let _ = bomb.wait();
    assert!(seen.iter().any(|l| l.starts_with(&format!("bomb ERRNO {EAGAIN} "))), "{seen:?}");
    assert_eq!(line(&later?, "fork"), "fork OK 8", "a cage beside a bomb that holds {seen:?}");
    Ok(())
}

/// The identity the machine's record gives a directory made for the test
/// (as a kernel would for an individual there).
fn recorded(dir: &Path) -> Outcome<teneral_cage::identity::Identity> {
    use teneral::confine::identity::{ranges, Registry};
    let (uids, gids) = ranges();
    Ok(Registry::machine().identity_of(&dir.canonicalize()?, uids, gids)?)
}

/// A program a body or a check copies into what it may write (`id`) is
/// owned on the host by its individual's identity: made set-uid afterwards
/// (the step the seccomp profile refuses inside) and run by an
/// unprivileged host user, it runs as that identity, never as root.
#[test]
fn what_a_cage_leaves_gives_no_one_root() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        crate::common::skip("running a file as another host user (setpriv) needs root");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-leaves").tempdir()?;
    let secret = secret(dir.path())?;
    let (home, mut body, checkout, mut gate) = plans(dir.path())?;
    let id = recorded(&home)?;
    body.identity = Some(id);
    gate.identity = Some(id);
    for (name, plan, cwd, place) in
        [("body", &body, &home, home.join("soul")), ("check", &gate, &checkout, checkout.clone())]
    {
        let left = place.join("id");
        let out = through_helper(plan, cwd, &secret, &probes(&[("copy", &left)]))?;
        assert!(line(&out, "copy").starts_with("copy OK"), "{name}: {out}");
        let meta = std::fs::metadata(&left)?;
        assert_eq!((meta.uid(), meta.gid()), (id.uid, id.gid), "{name}: the host's owner");
        std::fs::set_permissions(&left, std::fs::Permissions::from_mode(0o4755))?;
        let ran = Command::new("timeout")
            .args(["60", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&left)
            .arg("-u")
            .output_within(QUICK)?;
        let euid = String::from_utf8_lossy(&ran.stdout).trim().to_owned();
        assert_eq!(euid, id.uid.to_string(), "{name}: {}", String::from_utf8_lossy(&ran.stderr));
        assert_ne!(euid, "0", "{name}: what a cage left made a user root");
    }
    Ok(())
}

/// Under the direct runner's task limit, a fork bomb in one individual's
/// check holds every process it may have, and a body of a second
/// individual, started afterwards as its own identity, forks as before.
#[test]
fn a_fork_bomb_in_one_individual_leaves_another_able_to_fork() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    use std::io::BufRead;
    let root = rustix::process::geteuid().is_root();
    let dir = tempfile::Builder::new().prefix("tnl-nproc2").tempdir()?;
    let secret = secret(dir.path())?;
    let (home, mut body, checkout, mut gate) = plans(dir.path())?;
    let limits = Rlimits { tasks: Some(24), address_space: Some(2 << 30), nice: None };
    gate.limits = limits;
    body.limits = limits;
    if root {
        gate.identity = Some(recorded(&checkout)?);
        body.identity = Some(recorded(&home)?);
        assert_ne!(gate.identity, body.identity, "two individuals, two identities");
    }
    let mut helper = gate.to_args();
    helper.push("--".into());
    // Killed by the test (with its cage) once the second cage has run.
    let mut bomb = Command::new(teneral())
        .arg("confine")
        .args(helper)
        .args([PYTHON, "-c", PROBE, "bomb:1000"])
        .current_dir(&checkout)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let stdout = bomb.stdout.take().ok_or("the bomb's stdout")?;
    let mut seen = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line?;
        seen.push(line.clone());
        if line.starts_with("holding") {
            break;
        }
    }
    let later = through_helper(&body, &home, &secret, &["fork:8".into(), "uid:".into()]);
    let _ = bomb.kill();
    let _ = bomb.wait();
    assert!(seen.iter().any(|l| l.starts_with(&format!("bomb ERRNO {EAGAIN} "))), "{seen:?}");
    let later = later?;
    assert_eq!(line(&later, "fork"), "fork OK 8", "beside another individual's bomb {seen:?}");
    if let Some(id) = body.identity {
        assert_eq!(line(&later, "uid"), format!("uid OK {}", id.uid), "{later}");
    }
    Ok(())
}

/// A background launch (the gate's warm-up) runs at nice 19 in the cage,
/// through the executed helper and through the zygote alike, though a
/// zygote's launch may be forked before its plan comes; any other at the
/// nice value of whoever started it.
#[test]
fn a_background_launch_runs_at_nice_19_through_the_helper_and_the_zygote() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-nice").tempdir()?;
    let secret = secret(dir.path())?;
    let (_home, _body, checkout, mut gate) = plans(dir.path())?;
    let own = rustix::process::getpriority_process(None)?;
    assert!(own < 19, "the tests run at nice {own}: a launch at 19 would look like any other");
    for nice in [None, Some(19)] {
        gate.limits.nice = nice;
        let want = format!("nice OK {}", nice.map_or(own, i32::from));
        let by_helper = through_helper(&gate, &checkout, &secret, &["nice:".into()])?;
        assert_eq!(line(&by_helper, "nice"), want, "through the helper: {by_helper}");
        let by_zygote = through_zygote(&gate, &checkout, &secret, &["nice:".into()])?;
        assert_eq!(line(&by_zygote, "nice"), want, "through the zygote: {by_zygote}");
    }
    Ok(())
}
