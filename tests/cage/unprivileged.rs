//! The cage as an unprivileged user makes it: namespaces inside a user
//! namespace of its own, the read-only bind mount, loopback only, Landlock,
//! no capabilities. Run as `nobody` through setpriv (the tests run as root).
//! And the new root's other use: other programs' sockets are not there.

use std::process::Command;

use super::*;

const SCRIPT: &str = r#"
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
id -u
echo x >> "$DIR/journal" || echo JOURNAL-REFUSED
echo ok > "$DIR/written" && echo WRITE-OK
cat /etc/shadow >/dev/null 2>&1 || echo SHADOW-REFUSED
echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)
/usr/bin/python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); print("LOOPBACK-OK")
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3)
except OSError as e:
    print("OUTSIDE", e.errno)
'
"#;

#[test]
fn the_cage_holds_for_an_unprivileged_user() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    if rustix::process::getuid().as_raw() != 0 {
        crate::common::skip("the test becomes nobody through setpriv, which needs root");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-nobody").tempdir()?;
    let journal = dir.path().join("journal");
    std::fs::write(&journal, "")?;
    for p in [dir.path(), &journal] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534))?;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(teneral())
        .args(["confine", "--profile", "generation"])
        .args([
            "--exec", "/usr", "--exec", "/bin", "--exec", "/lib", "--read", "/etc", "--read",
            "/proc",
        ])
        .args(["--read-write", "/dev/null", "--write"])
        .arg(dir.path())
        .arg("--readonly")
        .arg(&journal)
        .args(["--net", "loopback", "--", "/bin/sh", "-c", SCRIPT])
        .env("DIR", dir.path())
        .current_dir(dir.path())
        .output_within(SLOW)?;
    let all =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    for want in [
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "65534",
        "Read-only file system",
        "JOURNAL-REFUSED",
        "WRITE-OK",
        "SHADOW-REFUSED",
        "interfaces: lo\n",
        "LOOPBACK-OK",
        "OUTSIDE 101",
    ] {
        assert!(all.contains(want), "{want:?} missing:\n{all}");
    }
    Ok(())
}

/// Landlock (before ABI 9) lets a process connect to any Unix socket it can
/// reach by path; in the cage's new root a socket is there only when its
/// directory is granted (`--socket-dir`, as the event socket's is). Shown
/// on a socket of the test's own: gone (ENOENT) without the grant, reached
/// with it.
#[test]
fn sockets_of_other_programs_are_not_there() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-sockets").tempdir()?;
    let sockets = dir.path().join("sockets");
    std::fs::create_dir_all(&sockets)?;
    let path = sockets.join("bus");
    let _listener = std::os::unix::net::UnixListener::bind(&path)?;
    let probe = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({:?})\n    print('CONNECTED')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n",
        path.display().to_string()
    );
    let run = |grant: bool| -> std::io::Result<String> {
        let mut cmd = Command::new(teneral());
        cmd.args(["confine", "--profile", "gate", "--exec", "/usr", "--exec", "/lib"])
            .args(["--exec", "/lib64", "--read", "/etc", "--read", "/proc"]);
        if grant {
            cmd.arg("--socket-dir").arg(&sockets);
        }
        let out = cmd.args(["--", "/usr/bin/python3", "-c", &probe]).output_within(SLOW)?;
        Ok(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    let gone = run(false)?;
    assert!(gone.contains("REFUSED 2"), "not granted, the socket is not there: {gone}");
    let granted = run(true)?;
    assert!(granted.contains("CONNECTED"), "its directory granted, it connects: {granted}");
    Ok(())
}
