//! The system-call mode's kill: the kernel under `strace`, which sends
//! the kernel SIGKILL at the Nth invocation of one durability call
//! (`-e inject=<call>:signal=KILL:when=N`), or only records those calls for
//! the dry run. `-f` follows the kernel's threads (strace counts each
//! thread's calls apart); `-b execve` lets go of every child at its exec, so
//! the body, cargo, git, the keeper and the clients are neither counted nor
//! killed. Writes count only on the journal and the state
//! (`-P`, matched on the file a descriptor names).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use teneral::launcher::contract;

use crate::common::*;

/// The durability calls the mode kills at, in the order its table lists them.
pub const CALLS: [&str; 7] =
    ["rename", "renameat2", "fsync", "fdatasync", "unlink", "unlinkat", "write"];

/// The files whose writes count.
fn written_files(home: &Path) -> [std::path::PathBuf; 2] {
    [home.join("memory/journal.jsonl"), home.join(".teneral/state.json")]
}

/// What `strace` does to the kernel.
pub enum Strace<'a> {
    /// Kill it at the `n`th invocation of `call` in any one of its threads.
    Kill { call: &'a str, n: u32 },
    /// Record every durability call to `file`.
    Record { file: &'a Path },
}

/// Starts the kernel on `ind` under `strace`, as the launcher starts it
/// (`teneral kernel`, with the launcher's version and the install's kernel
/// named), so that the calls counted are the kernel's own; the child
/// (strace) and the kernel's pid.
pub fn start(ind: &Individual, how: &Strace) -> Result<(Kernel, u32), Box<dyn std::error::Error>> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ind.path().join("kernel.log"))?;
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-b", "execve", "-qq"]);
    match how {
        Strace::Kill { call, n } => {
            if *call == "write" {
                for file in written_files(ind.path()) {
                    cmd.arg("-P").arg(file);
                }
            }
            cmd.args(["-o", "/dev/null", "-e"]).arg(format!("trace={call}"));
            cmd.arg("-e").arg(format!("inject={call}:signal=KILL:when={n}"));
        }
        Strace::Record { file } => {
            cmd.args(["-y", "-o"]).arg(file);
            cmd.arg("-e").arg(format!("trace={}", CALLS.join(",")));
        }
    }
    let child = cmd
        .arg("--")
        .arg(teneral())
        .arg("kernel")
        .arg("--dir")
        .arg(ind.path())
        .env(contract::VERSION_VARIABLE, contract::LAUNCHER_VERSION.to_string())
        .env(contract::KERNEL_VARIABLE, "install")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let tracer = child.id();
    let kernel = Kernel { child: Some(child), log: ind.path().join("kernel.log") };
    // strace forks children of its own to probe ptrace first: the kernel
    // is the child that runs the kernel's binary.
    let exe = std::fs::canonicalize(teneral())?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let path = format!("/proc/{tracer}/task/{tracer}/children");
        let children = std::fs::read_to_string(path).unwrap_or_default();
        let kernel_pid = children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe));
        if let Some(pid) = kernel_pid {
            return Ok((kernel, pid));
        }
        if Instant::now() > end {
            return Err("strace started no kernel within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// From a record: for each call, the most any one thread made (strace's
/// `when=N` counts each thread apart). Writes count on the journal and the
/// state only.
pub fn most_per_thread(record: &str, home: &Path) -> BTreeMap<String, u32> {
    let files: Vec<String> =
        written_files(home).iter().map(|f| format!("<{}>", f.display())).collect();
    let mut per: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for line in record.lines() {
        let Some((tid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        let Some(call) = CALLS.iter().find(|c| rest.starts_with(&format!("{c}("))) else {
            continue;
        };
        if *call == "write" && !files.iter().any(|f| rest.contains(f.as_str())) {
            continue;
        }
        *per.entry((call, tid)).or_default() += 1;
    }
    let mut most: BTreeMap<String, u32> = BTreeMap::new();
    for ((call, _), n) in per {
        let m = most.entry(call.to_owned()).or_default();
        *m = (*m).max(n);
    }
    most
}
