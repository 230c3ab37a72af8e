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

use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::process::{kill_process, Pid, Signal};

/// Where the list of live groups is kept, under the individual.
pub const CHILDREN_PATH: &str = ".teneral/run/children";

struct Kept {
    file: PathBuf,
    live: Vec<(u32, u64)>,
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
    let mut guard = kept().lock().unwrap_or_else(|p| p.into_inner());
    let live = guard.take().map(|k| k.live).unwrap_or_default();
    write_list(&file, &live)?;
    *guard = Some(Kept { file: file.clone(), live });
    drop(guard);
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    super::start_keeper(&file, read)?;
    let _ = keeper_pipe().set(write);
    Ok(())
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
    if let Err(e) = write_list(&kept.file, &kept.live) {
        crate::log::info(format!("cannot write {}: {e}", kept.file.display()));
        return;
    }
    crate::crash::point("children.recorded");
}

/// Replaces the list. No sync: the list matters only while the machine
/// runs (a reboot ends every group anyway).
fn write_list(file: &Path, live: &[(u32, u64)]) -> io::Result<()> {
    let text: String = live.iter().map(|(pid, start)| format!("{pid} {start}\n")).collect();
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, file)
}

fn read_list(file: &Path) -> Vec<(u32, u64)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (pid, start) = l.split_once(' ')?;
            Some((pid.parse().ok()?, start.parse().ok()?))
        })
        .collect()
}

/// Kills what remains of the groups a dead kernel of `home` listed, and
/// empties the list. Returns how many processes were killed.
pub fn sweep_leftover_groups(home: &Path) -> usize {
    let file = home.join(CHILDREN_PATH);
    let killed = kill_listed(&file);
    if killed > 0 {
        crate::log::info(format!(
            "killed {killed} process(es) that a killed kernel's children left running"
        ));
    }
    let _ = std::fs::remove_file(&file);
    killed
}

fn kill_listed(file: &Path) -> usize {
    let groups = read_list(file);
    if groups.is_empty() {
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

/// `teneral keep-children <file>`: waits for the end of its stdin (the
/// kernel's death), then kills what is left of the groups `file` lists.
pub fn keeper_main(file: &Path) -> i32 {
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
    kill_listed(file);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_round_trips() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let file = dir.path().join("children");
        write_list(&file, &[(12, 345), (67, 8)]).expect("the list is written");
        assert_eq!(read_list(&file), vec![(12, 345), (67, 8)]);
        assert_eq!(read_list(&dir.path().join("none")), vec![]);
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
