//! Opening the journal file without following a link a body left.
//!
//! The journal lies in `memory/`, a directory every body writes. In the cage
//! the journal is a read-only mount a body cannot replace, but with the cage
//! off (`TENERAL_UNSAFE_UNCONFINED=1`) a body could put a link at
//! `memory/journal.jsonl`, or make `memory` itself a link, and have the
//! kernel read or append to another file with the owner's rights (the
//! confused deputy of docs/cage.md). So the last two parts of the path, the
//! directory holding the journal and the journal, are opened beneath the
//! directory above them (the individual's, the owner's) with `openat2`
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: a link
//! in either is `ELOOP`. Only a regular file is taken (a FIFO neither
//! blocks nor is read: `InvalidInput`).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// How the journal is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// To read (a missing journal is `NotFound`).
    Read,
    /// To read and append, made when missing.
    Append,
}

/// Opens the journal at `path` ([`Access::Read`] or [`Access::Append`]),
/// following no link in its last two parts and taking only a regular file.
pub fn open_file(path: &Path, access: Access) -> io::Result<File> {
    let (base, rel) = split(path);
    let dir =
        rustix::fs::open(&base, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    // NONBLOCK: opening a FIFO would otherwise wait for its other end.
    let mut flags = OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let mut mode = Mode::empty();
    match access {
        Access::Read => flags |= OFlags::RDONLY,
        Access::Append => {
            flags |= OFlags::RDWR | OFlags::APPEND | OFlags::CREATE;
            mode = Mode::from_raw_mode(0o666);
        }
    }
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd: OwnedFd = match rustix::fs::openat2(&dir, &rel, flags, mode, resolve) {
        Ok(fd) => fd,
        // Before Linux 5.6: one part at a time, neither a link.
        Err(rustix::io::Errno::NOSYS) => each_part(&dir, &rel, flags, mode)?,
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    if kind != rustix::fs::FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a {kind:?}, not a regular file: the kernel keeps its journal only in one; \
                 move it aside and start again",
                path.display()
            ),
        ));
    }
    let keep = if access == Access::Append { OFlags::APPEND } else { OFlags::empty() };
    rustix::fs::fcntl_setfl(&fd, keep)?;
    Ok(File::from(fd))
}

/// `path` as the directory it is opened beneath and the last two parts
/// (one when that is all there is), opened beneath it.
fn split(path: &Path) -> (PathBuf, PathBuf) {
    let parts: Vec<Component<'_>> = path.components().collect();
    let normal_tail =
        parts.iter().rev().take_while(|c| matches!(c, Component::Normal(_))).count().min(2);
    let cut = parts.len() - normal_tail;
    let base: PathBuf = parts[..cut].iter().collect();
    let rel: PathBuf = parts[cut..].iter().collect();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    (base, rel)
}

/// Without `openat2`: each directory with `O_NOFOLLOW | O_DIRECTORY`, the
/// file with `O_NOFOLLOW`.
fn each_part(dir: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty journal path"));
    };
    let mut at = rustix::io::dup(dir)?;
    for name in dirs {
        let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        at = rustix::fs::openat(&at, *name, how, Mode::empty())?;
    }
    Ok(rustix::fs::openat(&at, *last, flags | OFlags::NOFOLLOW, mode)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_off_the_last_two_parts() {
        let table = [
            ("/home/i/memory/journal.jsonl", "/home/i", "memory/journal.jsonl"),
            ("memory/journal.jsonl", ".", "memory/journal.jsonl"),
            ("j.jsonl", ".", "j.jsonl"),
            ("/j.jsonl", "/", "j.jsonl"),
            ("/a/../b/j.jsonl", "/a/..", "b/j.jsonl"),
        ];
        for (path, base, rel) in table {
            let (b, r) = split(Path::new(path));
            assert_eq!((b.as_path(), r.as_path()), (Path::new(base), Path::new(rel)), "{path}");
        }
    }

    const LINE: &str = "{\"type\":\"generation.started\",\"seq\":1,\"ts\":\"2026-11-30T10:00:00.000Z\",\"commit\":\"aaaa\"}\n";

    fn eloop<T>(result: io::Result<T>) -> bool {
        matches!(result, Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()))
    }

    /// Every way the kernel opens a journal, against a planted link: the
    /// journal a link to another file, or `memory` a link to another
    /// directory. None follows it; the other file is left as it was.
    #[test]
    fn a_planted_link_is_refused_by_every_opener() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let secret = dir.path().join("secret.jsonl");
        std::fs::write(&secret, LINE).expect("the other file");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("another directory");
        std::fs::write(elsewhere.join("journal.jsonl"), LINE).expect("a journal elsewhere");

        let linked_file = dir.path().join("one");
        std::fs::create_dir_all(linked_file.join("memory")).expect("memory/");
        std::os::unix::fs::symlink(&secret, linked_file.join(crate::journal::JOURNAL_PATH))
            .expect("a link at the journal");
        let linked_dir = dir.path().join("two");
        std::fs::create_dir_all(&linked_dir).expect("an individual");
        std::os::unix::fs::symlink(&elsewhere, linked_dir.join("memory")).expect("memory a link");

        for home in [&linked_file, &linked_dir] {
            let path = home.join(crate::journal::JOURNAL_PATH);
            let opened = crate::journal::writer::Journal::open(&path);
            let refused = matches!(&opened, Err(crate::journal::writer::JournalError::Io { source, .. })
                if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()));
            assert!(refused, "Journal::open {}: {:?}", path.display(), opened.err());
            assert!(eloop(crate::journal::last_events(&path, 10, |_| true)), "last_events");
            assert!(eloop(crate::scorecard::of_individual(home, None)), "of_individual");
            assert!(eloop(open_file(&path, Access::Read)), "open_file");
        }
        assert_eq!(std::fs::read_to_string(&secret).ok().as_deref(), Some(LINE));
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("journal.jsonl")).ok().as_deref(),
            Some(LINE)
        );
    }

    #[test]
    fn only_a_regular_file_is_a_journal() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let memory = dir.path().join("memory");
        std::fs::create_dir_all(&memory).expect("memory/");
        let path = memory.join("journal.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, rustix::fs::Mode::from_raw_mode(0o600))
            .expect("a FIFO at the journal");
        // It returns at once (no wait for a writer) and refuses.
        for access in [Access::Read, Access::Append] {
            let kind = open_file(&path, access).err().map(|e| e.kind());
            assert_eq!(kind, Some(io::ErrorKind::InvalidInput), "{access:?}");
        }
        std::fs::remove_file(&path).expect("the FIFO goes");
        let mut journal = crate::journal::writer::Journal::open(&path)
            .expect("a plain journal is made and opened");
        let event = serde_json::json!({"type": "reply", "text": "hi"});
        let event = event.as_object().cloned().unwrap_or_default();
        assert_eq!(journal.append("c", &event).ok(), Some(1), "appends");
        assert_eq!(journal.append("c", &event).ok(), Some(2), "appends at the end");
        let (events, _) = crate::journal::last_events(&path, 10, |_| true).expect("read back");
        assert_eq!(events.len(), 2);
    }
}
