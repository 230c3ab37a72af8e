//! The kernel's log. For now `[teneral] ...` lines on stderr, which journald
//! captures under systemd; structured journald fields come with the systemd
//! issue and will be added here, the one place that writes the log.

/// One line of the kernel's own.
pub fn info(msg: impl std::fmt::Display) {
    eprintln!("[teneral] {msg}");
}

/// A line about the agent's work (`[reply] ...`, `[tool] ...`), as
/// `journalctl` and a terminal running `teneral run` show it.
pub fn agent(tag: &str, msg: impl std::fmt::Display) {
    eprintln!("[{tag}] {msg}");
}
