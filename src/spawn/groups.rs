//! The kernel's process groups, kept so that none outlives the kernel.
//!
//! Every child started by [`super::spawn`] leads a process group of its
//! own. Death with the kernel (PDEATHSIG) reaches the child but not what it
//! started (rustc under cargo), which stays in the child's group. So the
//! groups alive are listed in `.teneral/run/children` (leader pid and start
//! time, one a line), and:
//! - a keeper process (`teneral keep-children`), started by the kernel and
//!   holding the read end of a pipe only the kernel writes to, wakes when
//!   the kernel dies (the pipe's end of file) and kills every process of
//!   every listed group;
//! - the next start does the same ([`sweep_leftover_groups`]), for a keeper
//!   that was killed too.
//!
//! A process is killed only when its group is a listed one and it started
//! no earlier than the group's leader, so a pid reused since is left alone.
//! The list's first line names the kernel it belongs to (pid and start
//! time): a keeper that wakes late, after the next kernel has started and
//! listed its own children, finds another kernel named there and kills
//! nothing (the next kernel's sweep took care of what it left).

use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::process::{kill_process, Pid, Signal};

/// Where the list of live groups is kept, under the individual.
pub const CHILDREN_PATH: &str = ".teneral/run/children";

struct Kept {
    file: PathBuf,
    /// This kernel, as the list's first line names it.
    kernel: Kernel,
    live: Vec<(u32, u64)>,
}

/// A kernel process: its pid and start time, `<pid>:<start>` as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kernel(u32, u64);

impl Kernel {
    fn this() -> Kernel {
        let pid = std::process::id();
        Kernel(pid, super::process_start_time(pid).unwrap_or_default())
    }

    fn parse(text: &str) -> Option<Kernel> {
        let (pid, start) = text.split_once(':')?;
        Some(Kernel(pid.parse().ok()?, start.parse().ok()?))
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.0, self.1)
    }
}

fn kept() -> &'static Mutex<Option<Kept>> {
    static KEPT: OnceLock<Mutex<Option<Kept>>> = OnceLock::new();
    KEPT.get_or_init(|| Mutex::new(None))
}

/// The write end of the keeper's pipe: held open for the kernel's life.
fn keeper_pipe() -> &'static OnceLock<OwnedFd> {
    static PIPE: OnceLock<OwnedFd> = OnceLock::new();
    &PIPE
}

/// Starts listing this kernel's groups under `home`, and the keeper that
/// kills them when the kernel dies. Call once, after
/// [`sweep_leftover_groups`].
pub fn keep_groups(home: &Path) -> io::Result<()> {
    let file = home.join(CHILDREN_PATH);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let kernel = Kernel::this();
    let mut guard = kept().lock().unwrap_or_else(|p| p.into_inner());
    let live = guard.take().map(|k| k.live).unwrap_or_default();
    write_list(&file, kernel, &live)?;
    *guard = Some(Kept { file: file.clone(), kernel, live });
    drop(guard);
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    super::start_keeper(&file, &kernel.to_string(), read)?;
    let _ = keeper_pipe().set(write);
    Ok(())
}

/// This process stops listing its groups (a kernel that ran in the
/// launcher's process has ended; the launcher's next child is a kernel,
/// which lists and sweeps groups of its own and must not find itself
/// listed). The keeper stays and finds no list of this process.
pub fn stop_keeping_groups() {
    *kept().lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// A child group began: list it.
pub(super) fn started(pid: u32) {
    let start = super::process_start_time(pid).unwrap_or_default();
    change(|live| live.push((pid, start)));
}

/// A child ended: its group is no longer listed.
pub(super) fn ended(pid: u32) {
    change(|live| live.retain(|(p, _)| *p != pid));
}

fn change(edit: impl FnOnce(&mut Vec<(u32, u64)>)) {
    let mut guard = kept().lock().unwrap_or_else(|p| p.into_inner());
    let Some(kept) = guard.as_mut() else { return };
    edit(&mut kept.live);
    if let Err(e) = write_list(&kept.file, kept.kernel, &kept.live) {
        teneral_core::log::warn(format!("cannot write {}: {e}", kept.file.display()));
        return;
    }
    teneral_core::crash::point("children.recorded");
}

/// Replaces the list. No sync: the list matters only while the machine
/// runs (a reboot ends every group anyway).
fn write_list(file: &Path, kernel: Kernel, live: &[(u32, u64)]) -> io::Result<()> {
    let mut text = format!("kernel {kernel}\n");
    text.extend(live.iter().map(|(pid, start)| format!("{pid} {start}\n")));
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, file)
}

/// The kernel a list names (none in a list of an older kernel) and its
/// groups.
fn read_list(file: &Path) -> (Option<Kernel>, Vec<(u32, u64)>) {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let kernel =
        text.lines().next().and_then(|l| l.strip_prefix("kernel ")).and_then(Kernel::parse);
    let groups = text
        .lines()
        .filter_map(|l| {
            let (pid, start) = l.split_once(' ')?;
            Some((pid.parse().ok()?, start.parse().ok()?))
        })
        .collect();
    (kernel, groups)
}

/// Kills what remains of the groups a dead kernel of `home` listed, and
/// empties the list. Returns how many processes were killed.
pub fn sweep_leftover_groups(home: &Path) -> usize {
    let file = home.join(CHILDREN_PATH);
    let killed = kill_listed(&file, None);
    if killed > 0 {
        teneral_core::log::info(format!(
            "killed {killed} process(es) that a killed kernel's children left running"
        ));
    }
    let _ = std::fs::remove_file(&file);
    killed
}

/// Kills the groups `file` lists; with `only_of`, only if the list is still
/// that kernel's.
fn kill_listed(file: &Path, only_of: Option<Kernel>) -> usize {
    let (kernel, groups) = read_list(file);
    if only_of.is_some_and(|mine| kernel != Some(mine)) || groups.is_empty() {
        return 0;
    }
    let mut killed = 0;
    // Twice: a process may fork while the first pass runs.
    for _ in 0..2 {
        for (pid, pgid, start) in processes() {
            let listed = groups.iter().any(|&(g, since)| g == pgid && start >= since);
            if listed {
                if let Some(p) = Pid::from_raw(pid as i32) {
                    if kill_process(p, Signal::KILL).is_ok() {
                        killed += 1;
                    }
                }
            }
        }
    }
    killed
}

/// Every process: (pid, process group, start time).
fn processes() -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state, ppid, pgrp, ... starttime is the 20th.
        let (Some(pgrp), Some(start)) = (fields.get(2), fields.get(19)) else { continue };
        if let (Ok(pgrp), Ok(start)) = (pgrp.parse(), start.parse()) {
            out.push((pid, pgrp, start));
        }
    }
    out
}

/// `teneral keep-children <file> <pid>:<start>`: waits for the end of its
/// stdin (the kernel's death), then kills what is left of the groups `file`
/// lists, if it still lists that kernel's.
pub fn keeper_main(file: &Path, kernel: &str) -> i32 {
    let Some(kernel) = Kernel::parse(kernel) else {
        eprintln!("teneral keep-children: {kernel:?} is not <pid>:<start time>");
        return 2;
    };
    let mut sink = [0u8; 64];
    let mut stdin = io::stdin();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    kill_listed(file, Some(kernel));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_round_trips() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let file = dir.path().join("children");
        write_list(&file, Kernel(9, 10), &[(12, 345), (67, 8)]).expect("the list is written");
        assert_eq!(read_list(&file), (Some(Kernel(9, 10)), vec![(12, 345), (67, 8)]));
        assert_eq!(read_list(&dir.path().join("none")), (None, vec![]));
        assert_eq!(Kernel::parse(&Kernel(9, 10).to_string()), Some(Kernel(9, 10)));
    }

    /// A keeper that wakes after the next kernel listed its children kills
    /// none of them; the list's own kernel's keeper, or a sweep, does.
    #[test]
    fn a_late_keeper_leaves_the_next_kernels_children_alone() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let file = dir.path().join("children");
        let child = super::super::spawn(super::super::Spec::new("/bin/sleep", "/").arg("600"))
            .expect("sleep starts");
        let pid = child.pid;
        let start = super::super::process_start_time(pid).expect("sleep has a start time");
        let next = Kernel(pid, start);
        write_list(&file, next, &[(pid, start)]).expect("the list is written");
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_owned))
        };
        assert_eq!(kill_listed(&file, Some(Kernel(1, 1))), 0, "a keeper of another kernel killed");
        assert_ne!(state().as_deref(), Some("Z"), "sleep was killed");
        assert!(
            kill_listed(&file, Some(next)) >= 1,
            "the list's own kernel's keeper killed nothing"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Dead: a zombie, or gone if another test's reaper collected it.
        while !matches!(state().as_deref(), Some("Z") | None) {
            assert!(std::time::Instant::now() < deadline, "sleep outlived its kill");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Collected here: no reaper runs in this test.
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty());
        }
    }

    #[test]
    fn this_process_is_seen_with_its_group() {
        // Its group as /proc says it (`getpgrp` cannot be asked: inside a
        // cage's PID namespace a group led from outside has the number 0).
        let me = std::process::id();
        let stat = std::fs::read_to_string("/proc/self/stat").expect("this process has a stat");
        let after_name = &stat[stat.rfind(')').expect("stat names the command") + 2..];
        let group: u32 =
            after_name.split(' ').nth(2).and_then(|g| g.parse().ok()).expect("a group number");
        assert!(processes().iter().any(|&(p, g, start)| p == me && g == group && start > 0));
    }
}
