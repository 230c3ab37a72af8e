//! The test's view of processes, from `/proc` and by direct signals: what
//! `pgrep` and `kill` would give, without needing procps (Debian's minimal
//! images have none, and a shell's `kill` builtin is no program).

use std::path::Path;

/// Sends signal number `sig` to process `pid`; one already gone is no error.
pub fn send(pid: u32, sig: i32) {
    let (Some(pid), Some(sig)) = (
        i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw),
        rustix::process::Signal::from_named_raw(sig),
    ) else {
        panic!("no process {pid} or no signal {sig}");
    };
    let _ = rustix::process::kill_process(pid, sig);
}

/// Whether a process runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')').next().map(|rest| !rest.trim_start().starts_with('Z')).unwrap_or(false)
        }
        Err(_) => false,
    }
}

/// Every live process but this one for which `fact` tells something, with
/// what it told.
fn processes(fact: impl Fn(u32) -> Option<String>) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Some(told) = fact(pid) {
            if alive(pid) {
                found.push((pid, told));
            }
        }
    }
    found
}

/// Processes whose command line names `text` (what `pgrep -f` finds), with
/// their command lines.
pub fn processes_naming(text: &str) -> Vec<(u32, String)> {
    processes(|pid| {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        line.contains(text).then(|| line.trim().to_owned())
    })
}

/// Processes whose working directory lies under `dir` (the individual's
/// body, builds and checks run there), with their names.
pub fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    processes(|pid| {
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
        cwd.starts_with(&dir).then(|| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            name.trim().to_owned()
        })
    })
}
