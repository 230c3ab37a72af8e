//! The sensors that are files: the owner's directory and the inbox.
//!
//! One thread blocks on inotify (a file renamed into place, or closed after
//! writing) and sends what it sees to the main loop as a [`Wake`]; nothing
//! polls, so a body at rest is not woken at all. What was already there at
//! start is taken in first, oldest name first (names sort by time).
//!
//! In `.teneral/owner/`: a name ending in `.txt` is a line from the owner,
//! taken in by the turn loop (the kernel removes the file once it is in the
//! journal); a name ending in `.interrupt` stops the turn in progress, here
//! and at once, and is removed. Names starting with a dot are never read:
//! they are files being written, or meant for the kernel.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread;

use inotify::{EventMask, Inotify, WatchMask};

use crate::cancel::Cancel;
use crate::inbox;

/// The owner's directory under the individual's root.
pub const OWNER_DIR: &str = ".teneral/owner";

/// Something for the main loop to take in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wake {
    /// A line from the owner: a file name in the owner's directory.
    Line(String),
    /// An envelope: a file name in `inbox/`.
    Inbox(String),
}

struct Dirs {
    owner: PathBuf,
    inbox: PathBuf,
}

/// Starts watching. When this returns, every file that arrives from now on
/// will be seen, and those already there have been sent.
pub fn start(home: &Path, cancel: Arc<Cancel>, wakes: Sender<Wake>) -> io::Result<()> {
    let dirs = Dirs { owner: home.join(OWNER_DIR), inbox: inbox::dir(home) };
    fs::create_dir_all(&dirs.inbox)?;
    let _ = fs::create_dir_all(&dirs.owner); // the kernel makes it; this is for a bare start
    let mut inotify = Inotify::init()?;
    let mask = WatchMask::MOVED_TO | WatchMask::CLOSE_WRITE;
    let owner_watch = inotify.watches().add(&dirs.owner, mask).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot watch {}: {e}", dirs.owner.display()))
    })?;
    inotify.watches().add(&dirs.inbox, mask)?;
    scan(&dirs, &cancel, &wakes);
    thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        loop {
            let Ok(events) = inotify.read_events_blocking(&mut buffer) else { return };
            for event in events {
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    scan(&dirs, &cancel, &wakes); // events were lost: look again
                    continue;
                }
                let Some(name) = event.name.and_then(|n| n.to_str()) else { continue };
                let sent = if event.wd == owner_watch {
                    owner_file(&dirs.owner, name, &cancel, &wakes)
                } else {
                    !inbox::is_envelope_name(name) || wakes.send(Wake::Inbox(name.into())).is_ok()
                };
                if !sent {
                    return; // the main loop is gone
                }
            }
        }
    });
    Ok(())
}

/// Sends what is in both directories, oldest name first.
fn scan(dirs: &Dirs, cancel: &Cancel, wakes: &Sender<Wake>) {
    for name in names(&dirs.owner) {
        owner_file(&dirs.owner, &name, cancel, wakes);
    }
    for name in names(&dirs.inbox).into_iter().filter(|n| inbox::is_envelope_name(n)) {
        let _ = wakes.send(Wake::Inbox(name));
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Handles one name in the owner's directory; false when the main loop is
/// gone.
fn owner_file(dir: &Path, name: &str, cancel: &Cancel, wakes: &Sender<Wake>) -> bool {
    if name.starts_with('.') {
        return true;
    }
    if name.ends_with(".txt") {
        return wakes.send(Wake::Line(name.to_owned())).is_ok();
    }
    if name.ends_with(".interrupt") {
        // Its name alone makes it an interrupt; once seen it is used up,
        // whether a turn was running or not.
        let _ = fs::remove_file(dir.join(name));
        cancel.interrupt();
    }
    true
}
