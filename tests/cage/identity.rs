//! Who a cage is on the host, and what the kernel talks to: run directly,
//! the kernel never connects to a session bus.

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use super::*;

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
