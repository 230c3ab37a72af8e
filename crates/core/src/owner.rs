//! The owner's channel, `.teneral/owner/`: how a line or an interrupt from the
//! owner reaches the agent (docs/contract.md, section 4).
//!
//! The writing side is used by the talk clients; the kernel reads an owner
//! file only through [`read_file`], which opens it beneath the owner
//! directory without following links, regular files only (a body may
//! remove files there, and a body that could plant a link must not make the
//! kernel read what it points at). Invariants:
//! - a file appears under its final name only whole: it is written under a
//!   name starting with a dot (which no reader takes), synced, then renamed,
//!   and the directory is synced so the rename survives a crash;
//! - a line always ends in `.txt` and an interrupt is always an empty file
//!   ending in `.interrupt`, so no text can ever be taken for an interrupt;
//! - names are `<unix nanos, 20 digits>-<pid>-<8 hex>`, so they sort by the
//!   time they were written and two clients never pick the same name.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fsutil::sync_dir;

/// The owner's directory inside an individual.
pub const OWNER_DIR: &str = ".teneral/owner";

/// What an owner file is, by the end of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A line of text for the agent: `.txt`.
    Line,
    /// A request to stop the turn in progress: `.interrupt`, empty.
    Interrupt,
}

impl Kind {
    /// The ending of a file of this kind, dot included.
    pub fn extension(self) -> &'static str {
        match self {
            Kind::Line => ".txt",
            Kind::Interrupt => ".interrupt",
        }
    }

    /// The kind of a file in the owner directory, from its name alone;
    /// `None` for names no reader takes (a leading dot, another ending).
    pub fn of(name: &str) -> Option<Kind> {
        if name.starts_with('.') {
            return None;
        }
        [Kind::Line, Kind::Interrupt]
            .into_iter()
            .find(|k| name.strip_suffix(k.extension()).is_some_and(|stem| !stem.is_empty()))
    }
}

/// The name of a new owner file: time first, so names sort by time.
pub fn file_name(unix_nanos: u128, pid: u32, random: u32, kind: Kind) -> String {
    format!("{unix_nanos:020}-{pid}-{random:08x}{}", kind.extension())
}

/// The temporary name a file is written under before it is renamed to `name`.
pub fn temp_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Writes `text` as a new owner line in `home`; returns the file's name.
pub fn write_line(home: &Path, text: &str) -> io::Result<String> {
    if text.len() as u64 > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an owner line holds at most {} KiB and this one is {} KiB; put the text in a file \
                 in the workspace and ask the agent to read it",
                MAX_FILE / 1024,
                text.len().div_ceil(1024)
            ),
        ));
    }
    write_file(home, Kind::Line, text.as_bytes())
}

/// Writes a new interrupt in `home`; returns the file's name.
pub fn write_interrupt(home: &Path) -> io::Result<String> {
    write_file(home, Kind::Interrupt, b"")
}

fn write_file(home: &Path, kind: Kind, bytes: &[u8]) -> io::Result<String> {
    let dir = home.join(OWNER_DIR);
    fs::create_dir_all(&dir)?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let name = file_name(nanos, std::process::id(), random()?, kind);
    let tmp = dir.join(temp_name(&name));
    let result = (|| {
        let mut file = File::create_new(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, dir.join(&name))?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| name)
}

/// The most an owner file may hold: so much that the body's `owner.line`
/// carrying it back, every byte escaped as JSON's longest (`\u0000`, six
/// bytes), still fits a line of the event channel (1 MiB,
/// `journal::rules::EVENT_BYTES`).
pub const MAX_FILE: u64 = 128 * 1024;

/// Reads the owner file `name` of `home` as the kernel must: `name` is one
/// plain name ([`Kind::of`] takes it), the file is opened beneath
/// `.teneral/owner` following no link, and it is a regular file of at most
/// [`MAX_FILE`] bytes ([`crate::fsutil::read_beneath`]). `NotFound` when it
/// is not there (taken in already).
pub fn read_file(home: &Path, name: &str) -> io::Result<Vec<u8>> {
    if Kind::of(name).is_none() || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not the name of an owner line or interrupt"),
        ));
    }
    crate::fsutil::read_beneath(&home.join(OWNER_DIR), Path::new(name), MAX_FILE)
}

/// Where the owner's approvals of offered commits lie: a directory of the
/// owner channel whose name starts with a dot, so no reader of lines takes
/// what is in it. The cage lets a body remove files of the owner channel
/// but create none, so it can neither make this directory nor put an
/// approval in it.
pub const APPROVED_DIR: &str = ".teneral/owner/.approved";

/// The approval of exactly `commit`: an empty file named after it.
pub fn approval_path(home: &Path, commit: &crate::commit::Commit) -> std::path::PathBuf {
    home.join(APPROVED_DIR).join(format!("{}.approve", commit.as_str()))
}

/// Writes the owner's approval of `commit` (an empty file, made whole:
/// created under a dot-name, synced, renamed, the directory synced).
pub fn write_approval(home: &Path, commit: &crate::commit::Commit) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = home.join(APPROVED_DIR);
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let path = approval_path(home, commit);
    let tmp = crate::fsutil::temp_path(&dir.join(commit.as_str()));
    let result = (|| {
        File::create(&tmp)?.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether the owner approved exactly `commit`: an empty regular file of
/// its name (a link, a directory or a file with content is no approval).
pub fn is_approved(home: &Path, commit: &crate::commit::Commit) -> bool {
    fs::symlink_metadata(approval_path(home, commit))
        .is_ok_and(|m| m.file_type().is_file() && m.len() == 0)
}

/// Uses up the approval of `commit` (the publishing it allowed is done).
pub fn use_approval(home: &Path, commit: &crate::commit::Commit) -> io::Result<()> {
    match fs::remove_file(approval_path(home, commit)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => sync_dir(&home.join(APPROVED_DIR)).or(Ok(())),
    }
}

/// Four random bytes from the system, for names no two clients share.
fn random() -> io::Result<u32> {
    getrandom::u32().map_err(|e| io::Error::other(format!("no random numbers: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_owner_line_fits_the_event_that_carries_it_and_a_longer_is_refused() {
        let worst = "\u{1}".repeat(MAX_FILE as usize);
        let event =
            serde_json::json!({"type": "owner.line", "file": "x".repeat(64), "text": worst});
        let len = event.to_string().len();
        assert!(len <= crate::journal::rules::EVENT_BYTES, "{len} bytes");
        let home = tempfile::tempdir().expect("a temporary directory");
        let err = write_line(home.path(), &"a".repeat(MAX_FILE as usize + 1)).err();
        assert_eq!(err.as_ref().map(io::Error::kind), Some(io::ErrorKind::InvalidInput));
        assert!(err.is_some_and(|e| e.to_string().contains("at most 128 KiB")));
        assert!(write_line(home.path(), &"a".repeat(MAX_FILE as usize)).is_ok());
    }

    #[test]
    fn names_sort_by_time_and_carry_their_kind() {
        let early = file_name(1_700_000_000_000_000_000, 42, 0xab, Kind::Line);
        let late = file_name(1_800_000_000_000_000_000, 7, 0x1, Kind::Interrupt);
        assert_eq!(early, "01700000000000000000-42-000000ab.txt");
        assert_eq!(late, "01800000000000000000-7-00000001.interrupt");
        assert!(early < late);
        // Padding keeps the order across a change in the number of digits.
        assert!(file_name(999, 1, 0, Kind::Line) < file_name(1000, 1, 0, Kind::Line));
    }

    #[test]
    fn kind_of_a_name() {
        let table = [
            ("0001-1-00000000.txt", Some(Kind::Line)),
            ("0001-1-00000000.interrupt", Some(Kind::Interrupt)),
            (".0001-1-00000000.txt.tmp", None),
            (".hidden.txt", None),
            ("note.md", None),
            (".txt", None),
            ("x.interrupt.txt", Some(Kind::Line)),
        ];
        for (name, want) in table {
            assert_eq!(Kind::of(name), want, "{name}");
        }
    }

    #[test]
    fn the_kernel_reads_an_owner_file_only_as_a_plain_file_of_its_own_directory() {
        let home = tempfile::tempdir().expect("a temporary directory can be made");
        let name = write_line(home.path(), "hi").expect("a line is written");
        assert_eq!(read_file(home.path(), &name).ok(), Some(b"hi".to_vec()));
        let dir = home.path().join(OWNER_DIR);
        let secret = home.path().join("secret.txt");
        fs::write(&secret, "the kernel's").expect("a file outside can be written");
        std::os::unix::fs::symlink(&secret, dir.join("1-1-00000000.txt")).expect("a symlink");
        fs::create_dir(dir.join("2-1-00000000.txt")).expect("a directory");
        let eloop = rustix::io::Errno::LOOP.raw_os_error();
        let got = read_file(home.path(), "1-1-00000000.txt").err().and_then(|e| e.raw_os_error());
        assert_eq!(got, Some(eloop), "a planted symlink is not followed");
        let kind = |name: &str| read_file(home.path(), name).err().map(|e| e.kind());
        assert_eq!(kind("2-1-00000000.txt"), Some(io::ErrorKind::InvalidInput));
        assert_eq!(kind("../../secret.txt"), Some(io::ErrorKind::InvalidInput));
        assert_eq!(kind("x/1.txt"), Some(io::ErrorKind::InvalidInput));
        assert_eq!(kind("3-1-00000000.txt"), Some(io::ErrorKind::NotFound));
    }

    #[test]
    fn an_approval_is_for_exactly_one_commit_and_used_up() {
        use crate::commit::Commit;
        let home = tempfile::tempdir().expect("a temporary directory can be made");
        let a = Commit::parse(&"a".repeat(40)).expect("a commit id");
        let b = Commit::parse(&"b".repeat(40)).expect("a commit id");
        assert!(!is_approved(home.path(), &a));
        write_approval(home.path(), &a).expect("an approval is written");
        assert!(is_approved(home.path(), &a));
        assert!(!is_approved(home.path(), &b), "another commit is not approved");
        // Nothing a line reader takes, and never a line of the agent.
        assert_eq!(Kind::of(&format!("{}.approve", a.as_str())), None);
        let listed: Vec<_> = fs::read_dir(home.path().join(OWNER_DIR))
            .expect("the owner directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(listed, [".approved"]);
        // A link or a file with content is no approval.
        let path = approval_path(home.path(), &b);
        fs::write(&path, "yes").expect("a file with content");
        assert!(!is_approved(home.path(), &b));
        fs::remove_file(&path).expect("removed");
        std::os::unix::fs::symlink(approval_path(home.path(), &a), &path).expect("a link");
        assert!(!is_approved(home.path(), &b));
        use_approval(home.path(), &a).expect("used up");
        assert!(!is_approved(home.path(), &a));
        use_approval(home.path(), &a).expect("using up twice is no error");
    }

    #[test]
    fn temp_names_are_never_read() {
        let name = file_name(5, 1, 2, Kind::Line);
        assert_eq!(Kind::of(&temp_name(&name)), None);
    }

    #[test]
    fn writes_whole_files_and_no_temporaries() {
        let home = tempfile::tempdir().expect("a temporary directory can be made");
        let a = write_line(home.path(), "hello\nthere")
            .expect("a line is written, making the owner directory");
        let b = write_interrupt(home.path()).expect("an interrupt is written");
        let dir = home.path().join(OWNER_DIR);
        assert_eq!(fs::read_to_string(dir.join(&a)).unwrap_or_default(), "hello\nthere");
        assert_eq!(fs::read(dir.join(&b)).map(|v| v.len()).ok(), Some(0));
        assert_eq!(Kind::of(&a), Some(Kind::Line));
        assert_eq!(Kind::of(&b), Some(Kind::Interrupt));
        let mut names: Vec<String> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2);
        assert!(names.iter().all(|n| !n.starts_with('.')));
        assert!(a < b, "{a} then {b}");
    }
}
