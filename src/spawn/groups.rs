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
//! - a kernel's clean end does the same for its own list
//!   ([`sweep_groups_at_stop`]), which a stop has usually emptied already.
//!
//! Either names the processes it killed, and counts only those that still
//! ran: not a zombie, nor a process already dying of its group's SIGKILL.
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
/// empties the list. Returns how many processes were still running.
pub fn sweep_leftover_groups(home: &Path) -> usize {
    sweep(home, "that a killed kernel's children left running")
}

/// At the kernel's clean end: kills what remains of its own listed groups
/// (a check or build cut short by the stop), and empties the list. Returns
/// how many processes were still running; what a stop had already ended is
/// not counted.
pub fn sweep_groups_at_stop(home: &Path) -> usize {
    sweep(home, "that the kernel's children left running at its stop")
}

fn sweep(home: &Path, left: &str) -> usize {
    let file = home.join(CHILDREN_PATH);
    let stopped = kill_listed(&file, None);
    if !stopped.is_empty() {
        let named: Vec<String> =
            stopped.iter().map(|(pid, name)| format!("{pid} ({name})")).collect();
        teneral_core::log::info(format!(
            "killed {} process(es) {left}: {}",
            stopped.len(),
            named.join(", ")
        ));
    }
    let _ = std::fs::remove_file(&file);
    stopped.len()
}

/// Kills the groups `file` lists; with `only_of`, only if the list is still
/// that kernel's. Returns each process killed that was still running (pid
/// and name): not one that had ended and was not yet collected (a zombie),
/// nor one already dying of a SIGKILL, such as its group's stop sent.
fn kill_listed(file: &Path, only_of: Option<Kernel>) -> Vec<(u32, String)> {
    let (kernel, groups) = read_list(file);
    if only_of.is_some_and(|mine| kernel != Some(mine)) || groups.is_empty() {
        return Vec::new();
    }
    let mut stopped: Vec<(u32, String)> = Vec::new();
    // Twice: a process may fork while the first pass runs.
    for _ in 0..2 {
        for p in processes() {
            let listed = groups.iter().any(|&(g, since)| g == p.group && p.start >= since);
            if !listed {
                continue;
            }
            let running = !matches!(p.state, 'Z' | 'X') && !p.exiting && !kill_pending(p.pid);
            let Some(pid) = Pid::from_raw(p.pid as i32) else { continue };
            let killed = kill_process(pid, Signal::KILL).is_ok();
            if killed && running && !stopped.iter().any(|(q, _)| *q == p.pid) {
                stopped.push((p.pid, p.name));
            }
        }
    }
    stopped
}

/// Whether a SIGKILL already waits for process `pid` (it is dying).
fn kill_pending(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    // Signal n is bit n - 1 of the masks /proc gives in hex.
    let bit = 1u64 << (Signal::KILL.as_raw() - 1);
    status.lines().any(|line| {
        let Some((key, mask)) = line.split_once(':') else { return false };
        matches!(key, "SigPnd" | "ShdPnd")
            && u64::from_str_radix(mask.trim(), 16).is_ok_and(|m| m & bit != 0)
    })
}

/// A process as `/proc/<pid>/stat` gives it.
struct Process {
    pid: u32,
    group: u32,
    /// Its start time, in clock ticks since boot.
    start: u64,
    /// `R`, `S`, `D`, `Z` (ended, not yet collected), ...
    state: char,
    /// Whether it is ending (`PF_EXITING` among its flags): dying, if not
    /// yet a zombie.
    exiting: bool,
    /// Its command name, printable ASCII only (a process names itself).
    name: String,
}

/// Every process.
fn processes() -> Vec<Process> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some(p) = parse_stat(pid, &stat) {
            out.push(p);
        }
    }
    out
}

/// Reads `/proc/<pid>/stat`'s text: `pid (name) state ppid pgrp ...`, the
/// flags the 7th field after the name, the start time the 20th.
fn parse_stat(pid: u32, stat: &str) -> Option<Process> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = stat.get(open + 1..close)?;
    let name = name.chars().map(|c| if c.is_ascii_graphic() { c } else { '?' }).collect();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let (group, start) = (fields.get(2)?.parse().ok()?, fields.get(19)?.parse().ok()?);
    const PF_EXITING: u64 = 0x4;
    let exiting = fields.get(6)?.parse::<u64>().ok()? & PF_EXITING != 0;
    Some(Process { pid, group, start, state, name, exiting })
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
        assert_eq!(kill_listed(&file, Some(Kernel(1, 1))), [], "a keeper of another kernel killed");
        assert_ne!(state().as_deref(), Some("Z"), "sleep was killed");
        assert!(
            !kill_listed(&file, Some(next)).is_empty(),
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

    /// Of a listed group, only what still runs is counted and named, once
    /// though the sweep looks twice: not a member that has ended and waits
    /// to be collected.
    #[test]
    fn only_what_still_runs_is_counted_and_named() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let file = dir.path().join("children");
        // A group led by a shell that starts `sleep` and ends: the shell,
        // not collected here, is a zombie; its sleep still runs in its group.
        use std::os::unix::process::CommandExt;
        let mut shell = super::super::command_for_tests("/bin/sh")
            .args(["-c", "sleep 600 >/dev/null & echo $!"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let leader = shell.id();
        let start = super::super::process_start_time(leader).expect("sh has a start time");
        let mut said = String::new();
        std::io::Read::read_to_string(&mut shell.stdout.take().expect("its stdout"), &mut said)
            .expect("sh says its sleep's pid");
        let sleep: u32 = said.trim().parse().expect("a pid");
        // Ended: a zombie, or gone if another test's reaper collected it.
        let ended = || match std::fs::read_to_string(format!("/proc/{leader}/stat")) {
            Ok(stat) => parse_stat(leader, &stat).is_some_and(|p| p.state == 'Z'),
            Err(_) => true,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ended() {
            assert!(std::time::Instant::now() < deadline, "sh did not end");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        write_list(&file, Kernel(1, 1), &[(leader, start)]).expect("the list is written");
        assert_eq!(kill_listed(&file, None), [(sleep, "sleep".to_owned())]);
        let _ = shell.wait();
    }

    #[test]
    fn a_stat_line_is_read_with_any_name() {
        let stat = "42 (a) b) (c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1 1";
        let p = parse_stat(42, stat).expect("a process");
        assert_eq!((p.pid, p.group, p.start, p.state, p.exiting), (42, 42, 777, 'S', false));
        assert_eq!(p.name, "a)?b)?(c");
        let named = parse_stat(7, "7 (\u{1b}]0;x\u{7}) R 1 7 7 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 5")
            .expect("a process");
        assert_eq!((named.name.as_str(), named.exiting), ("?]0;x?", true));
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
        assert!(processes().iter().any(|p| p.pid == me && p.group == group && p.start > 0));
    }
}
