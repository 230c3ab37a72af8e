//! One supervisor per individual: an exclusive flock on `.teneral/lock`,
//! held for the kernel's whole life and released by the system when it ends,
//! however it ends. The file holds the holder's pid, for the refusal message.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

pub const LOCK_PATH: &str = ".teneral/lock";

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another supervisor{holder} is already running the individual in {dir}; stop it first ({stop})")]
    Held { dir: PathBuf, holder: String, stop: String },
    #[error("cannot open the lock file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The held lock; dropping it (or the process ending) releases it.
pub struct Lock {
    _file: File,
}

/// Takes the lock for the individual at `home`, or says who holds it.
pub fn acquire(home: &Path) -> Result<Lock, LockError> {
    let path = home.join(LOCK_PATH);
    let io_err = |source| LockError::Io { path: path.clone(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err)?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        let mut pid = String::new();
        let _ = file.read_to_string(&mut pid);
        let pid = pid.trim();
        let holder = if pid.is_empty() { String::new() } else { format!(" (pid {pid})") };
        // The holder's unit, from the status file it keeps.
        let unit = crate::status::read(home).and_then(|s| s.unit);
        let stop = match unit {
            Some(unit) => format!("systemctl --user stop {unit}"),
            None => "Ctrl-C where `teneral run` runs, or systemctl --user stop on its unit".into(),
        };
        return Err(LockError::Held { dir: home.to_owned(), holder, stop });
    }
    let write_pid = |file: &mut File| -> io::Result<()> {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())
    };
    write_pid(&mut file).map_err(io_err)?;
    Ok(Lock { _file: file })
}

/// Whether a supervisor holds the lock of the individual at `home` now.
pub fn is_held(home: &Path) -> bool {
    let Ok(file) = File::open(home.join(LOCK_PATH)) else { return false };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(&file, FlockOperation::Unlock);
            false
        }
        Err(_) => true,
    }
}
