//! Journald's door under a real journald (`scripts/with-systemd`): its
//! socket is there for the kernel, and not there (ENOENT) for a body in
//! the cage, whose new root holds no `/run/systemd/journal`.

use std::process::Command;

use crate::common::*;

/// Connects a datagram socket to journald's and sends one entry; prints
/// `SENT` or `ERRNO <n>`.
const PROBE: &str = r#"
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.connect("/run/systemd/journal/socket")
    s.send(b"MESSAGE=teneral journald door probe\nPRIORITY=6\n")
    print("SENT")
except OSError as e:
    print("ERRNO", e.errno)
"#;

#[test]
fn a_body_cannot_write_to_journald() -> TestResult {
    if super::manager().is_none() {
        return Ok(());
    }
    let socket = std::path::Path::new("/run/systemd/journal/socket");
    if !socket.exists() {
        eprintln!(
            "skipped: no journald socket at {}; run through scripts/with-systemd",
            socket.display()
        );
        return Ok(());
    }
    let outside = Command::new("/usr/bin/python3").args(["-c", PROBE]).output()?;
    let outside = String::from_utf8_lossy(&outside.stdout).into_owned();
    assert_eq!(outside.trim(), "SENT", "journald takes the kernel's entries");
    let dir = tempfile::Builder::new().prefix("tnl-journald").tempdir()?;
    let profile =
        teneral::confine::Profile::Gate { checkout: dir.path().to_owned(), writable: vec![] };
    let options = teneral::confine::Options { exe: Some(teneral()), ..Default::default() };
    let argv = teneral::confine::wrap_with(
        &profile,
        &options,
        vec!["/usr/bin/python3".into(), "-c".into(), PROBE.into()],
    )?;
    let out = Command::new(&argv[0]).args(&argv[1..]).current_dir(dir.path()).output()?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), "ERRNO 2", "journald's socket is not there for a body: {text}");
    Ok(())
}
