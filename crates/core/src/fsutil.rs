//! Writing state so that a crash leaves either the old file or the new one.
//!
//! [`write_atomic`] writes a temporary file beside the target, syncs it,
//! renames it over the target and syncs the directory, so the rename itself
//! is durable.
//!
//! [`open_beneath`] is how the kernel opens a file a body could have put
//! there: beneath a directory of the kernel's, following no link of any kind,
//! a regular file or nothing (design section 3, "the confused deputy").
//!
//! [`discard_dir`] takes a directory tree out of the way at once and removes
//! it in the background, so a fresh checkout does not wait on the old one.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Replaces `path` with `bytes` atomically and durably. The temporary file
/// is always a new one (`O_EXCL`): a link someone left at its name (a body,
/// in a directory it may write) is removed, never followed, and a file
/// made there again in between fails the write instead of being trusted.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = temp_path(path);
    let create = || fs::OpenOptions::new().write(true).create_new(true).open(&tmp);
    let result = (|| {
        let mut f = match create() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fs::remove_file(&tmp)?;
                create()?
            }
            other => other?,
        };
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The name every temporary file of the kernel and its clients has, beside
/// the file it becomes (or, for a claimed request, the file it was):
/// `.<name>.tmp-<pid>`, `pid` the writer's. One pattern, so the start can
/// remove what a killed writer left wherever it lies ([`remove_temp_files`]).
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = format!(".{name}.tmp-{}", std::process::id());
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.join(tmp),
        None => PathBuf::from(tmp),
    }
}

/// Whether `name` is a temporary name of [`temp_path`]'s pattern, written
/// by any process: a dot, a name, `.tmp-`, and a process id.
pub fn is_temp_name(name: &str) -> bool {
    temp_writer(name).is_some()
}

/// The id of the process that wrote the temporary file `name`, when `name`
/// is of [`temp_path`]'s pattern.
pub fn temp_writer(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let (stem, pid) = rest.rsplit_once(".tmp-")?;
    if stem.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether the writer `pid` of a temporary file is gone, so the file is
/// what a killed writer left: no process has that id, or the sweeper has it
/// itself (it writes none before it sweeps; a container starts its
/// processes with the same ids each time). A live writer's file is its
/// write under way (a client's `write_atomic` while the kernel starts).
fn writer_gone(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return true;
    };
    rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
}

/// Directories below `.teneral/` the sweep of temporary files does not
/// enter: checkouts (a body's workspace, the running generation, the gate's
/// checks) and build targets, which hold files of the body's and of cargo's
/// that merely look like the pattern.
fn sweep_skips(name: &str, dir: &Path) -> bool {
    matches!(name, "candidate" | "live" | "target" | ".git") || dir.join(".git").exists()
}

/// Removes every regular file named by the temporary pattern anywhere below
/// `root` whose writer is gone ([`writer_gone`]), never following a link and
/// never entering a checkout or a build target. Call holding the
/// individual's lock, with no writer of its own running (at start). How
/// many were removed.
pub fn remove_temp_files(root: &Path) -> io::Result<usize> {
    let mut removed = 0;
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound && dir != root => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // The entry's own kind: a link is a link, never what it names.
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                if !sweep_skips(&name, &path) {
                    dirs.push(path);
                }
            } else if kind.is_file() && temp_writer(&name).is_some_and(writer_gone) {
                fs::remove_file(&path)?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// `path` as an absolute path, for a directory named on a command line:
/// resolved (links and `..` followed) when it exists, else joined to the
/// current directory. A command makes its directory absolute once, as it
/// parses its arguments, so nothing it hands on (a caged program with
/// another working directory, a path walked upwards) sees a relative one.
pub fn absolute(path: &Path) -> io::Result<PathBuf> {
    path.canonicalize().or_else(|_| std::path::absolute(path))
}

/// Syncs a directory, making renames and removals in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `rel` beneath the directory `dir` for reading, the way the kernel
/// opens what a body can write: the path may not leave `dir` (`..`, an
/// absolute path: `EXDEV`), no symbolic link is followed anywhere in it
/// (`ELOOP`), no magic link of `/proc`, and only a regular file is returned
/// (a directory, FIFO, socket or device is refused with `InvalidInput`,
/// without blocking on a FIFO). `dir` itself is the kernel's: its own path
/// is trusted, everything beneath it is not.
pub fn open_beneath(dir: &Path, rel: &Path) -> io::Result<File> {
    let base =
        rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    // NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd: OwnedFd = match rustix::fs::openat2(&base, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => fd,
        // Before Linux 5.6: one plain name, no link at its end, is the same.
        Err(rustix::io::Errno::NOSYS) if is_one_name(rel) => {
            rustix::fs::openat(&base, rel, flags | OFlags::NOFOLLOW, Mode::empty())?
        }
        Err(rustix::io::Errno::NOSYS) => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{} cannot be opened safely on a Linux without openat2", rel.display()),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    if kind != rustix::fs::FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} in {} is a {kind:?}, not a regular file", rel.display(), dir.display()),
        ));
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
    Ok(File::from(fd))
}

/// Reads at most `max` bytes of `rel` beneath `dir` ([`open_beneath`]);
/// a longer file is refused with `FileTooLarge`, not cut.
pub fn read_beneath(dir: &Path, rel: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = open_beneath(dir, rel)?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{} in {} is longer than {max} bytes", rel.display(), dir.display()),
        ));
    }
    Ok(bytes)
}

/// Takes the directory `dir` out of the way at once and removes it in a
/// thread of its own: it is renamed beside itself to `.NAME.gone-PID-N`, and
/// that, with whatever earlier calls left under such names (a process
/// stopped before its removal ended), is removed in the background. On
/// return `dir` no longer exists. The removal opens each level without
/// following links (std's `remove_dir_all`), so a tree shaped by a caged
/// check cannot lead it out. Where the rename or the thread is refused, the
/// tree is removed before returning, as a plain `remove_dir_all` would.
pub fn discard_dir(dir: &Path) -> io::Result<()> {
    let parent = dir.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}.gone-");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let gone = parent.join(format!("{prefix}{}-{nanos}", std::process::id()));
    match fs::rename(dir, &gone) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => return remove_tree(dir),
    }
    let entries = match fs::read_dir(parent) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    // A tree another call of this process is removing already is left to it.
    let trees: Vec<_> = {
        let mut removing = REMOVING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .filter(|tree| removing.insert(tree.clone()))
            .collect()
    };
    if trees.is_empty() {
        return Ok(());
    }
    let remove = |trees: &[std::path::PathBuf]| -> io::Result<()> {
        // Each is tried; the first failure is the answer.
        let result = trees.iter().map(|tree| remove_tree(tree)).fold(Ok(()), Result::and);
        let mut removing = REMOVING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for tree in trees {
            removing.remove(tree);
        }
        result
    };
    let work = trees.clone();
    let spawned = std::thread::Builder::new().name("discard".into()).spawn(move || {
        let _ = remove(&work);
    });
    if spawned.is_err() {
        remove(&trees)?;
    }
    Ok(())
}

/// The trees [`discard_dir`] calls of this process are removing.
static REMOVING: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// `remove_dir_all`, where a tree already gone is no error.
fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn is_one_name(rel: &Path) -> bool {
    let mut parts = rel.components();
    matches!(parts.next(), Some(std::path::Component::Normal(_))) && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    #[test]
    fn temporary_names_are_one_pattern() {
        for (name, temp) in [
            (".state.json.tmp-123", true),
            (".running.tmp-9", true),
            (".back.taken.tmp-4242", true),
            (".a.tmp-1.tmp-2", true),
            ("state.json.tmp-123", false),
            (".tmp-123", false),
            (".state.json.tmp-", false),
            (".state.json.tmp-12a", false),
            (".state.json.tmp", false),
            (".0001-1-00000000.txt.tmp", false),
            ("back.taken-77", false),
        ] {
            assert_eq!(is_temp_name(name), temp, "{name}");
        }
        let made = temp_path(Path::new("/x/.teneral/state.json"));
        assert_eq!(made.parent(), Some(Path::new("/x/.teneral")));
        assert!(is_temp_name(&made.file_name().unwrap_or_default().to_string_lossy()), "{made:?}");
    }

    #[test]
    fn the_sweep_removes_temporary_files_at_any_depth_and_nothing_else() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        // Writers gone: an id no process can have (ids stay below
        // pid_max), and this process itself (a killed writer of the same
        // id, as in a restarted container). A live one: this one's parent.
        let gone: u32 =
            fs::read_to_string("/proc/sys/kernel/pid_max")?.trim().parse().unwrap_or(1 << 22);
        let (own, live) = (std::process::id(), std::os::unix::process::parent_id());
        let planted = [
            format!(".state.json.tmp-{gone}"),
            format!("kernels/.running.tmp-{own}"),
            format!("gate/deep/er/.memo.json.tmp-{gone}"),
        ];
        let live_write = format!("requests/.back.json.tmp-{live}");
        let kept = [
            live_write.as_str(),
            "state.json",
            "gate/deep/.memo.json.tmp",
            "candidate/.x.tmp-4",
            "gate/check/.git/HEAD",
            "gate/check/.y.tmp-5",
            "gate/target/.z.tmp-6",
        ];
        for name in planted.iter().map(String::as_str).chain(kept) {
            let path = root.join(name);
            fs::create_dir_all(path.parent().unwrap_or(root))?;
            fs::write(&path, "x")?;
        }
        let outside = tempfile::tempdir()?;
        fs::write(outside.path().join(".far.tmp-7"), "x")?;
        std::os::unix::fs::symlink(outside.path(), root.join("link"))?;
        assert_eq!(remove_temp_files(root)?, planted.len());
        for name in &planted {
            assert!(!root.join(name).exists(), "{name} is removed");
        }
        for name in kept {
            assert!(root.join(name).exists(), "{name} is kept");
        }
        assert!(outside.path().join(".far.tmp-7").exists(), "a link is not followed");
        Ok(())
    }

    use super::*;

    /// A directory named on a command line, relative or not, comes out
    /// absolute: resolved when it exists (`..` and links followed), joined
    /// to the current directory when it does not.
    #[test]
    fn a_directory_is_made_absolute() {
        let place = tempfile::tempdir().expect("a temporary directory");
        let real = place.path().canonicalize().expect("it resolves");
        std::fs::create_dir(real.join("ind")).expect("a directory");
        std::os::unix::fs::symlink(real.join("ind"), real.join("link")).expect("a link");
        let here = std::env::current_dir().expect("a current directory");
        let table: [(PathBuf, PathBuf); 5] = [
            (real.join("ind"), real.join("ind")),
            (real.join("ind/../ind/."), real.join("ind")),
            (real.join("link"), real.join("ind")),
            (PathBuf::from("."), here.canonicalize().expect("it resolves")),
            (PathBuf::from("no-such-dir/x"), here.join("no-such-dir/x")),
        ];
        for (given, want) in table {
            assert_eq!(absolute(&given).expect("made absolute"), want, "{}", given.display());
        }
    }

    fn errno(result: io::Result<File>) -> Option<i32> {
        result.err().and_then(|e| e.raw_os_error())
    }

    #[test]
    fn beneath_follows_no_link_and_opens_only_regular_files() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let (d, outside) = (dir.path().join("d"), dir.path().join("secret"));
        fs::create_dir_all(d.join("sub")).expect("a subdirectory can be made");
        fs::write(&outside, "secret").expect("a file outside can be written");
        fs::write(d.join("sub/line.txt"), "hello").expect("a file inside can be written");
        std::os::unix::fs::symlink(&outside, d.join("link")).expect("a symlink can be made");
        std::os::unix::fs::symlink(d.join("sub"), d.join("dirlink")).expect("a symlink too");
        rustix::fs::mkfifoat(rustix::fs::CWD, d.join("fifo"), Mode::from_raw_mode(0o600))
            .expect("a FIFO can be made");
        let open = |rel: &str| open_beneath(&d, Path::new(rel));

        let mut text = String::new();
        open("sub/line.txt").and_then(|mut f| f.read_to_string(&mut text)).expect("plain file");
        assert_eq!(text, "hello");
        let eloop = Some(rustix::io::Errno::LOOP.raw_os_error());
        let exdev = Some(rustix::io::Errno::XDEV.raw_os_error());
        let table: [(&str, Option<i32>); 6] = [
            ("link", eloop),
            ("dirlink/line.txt", eloop),
            ("../secret", exdev),
            ("sub/../../secret", exdev),
            ("/etc/passwd", exdev),
            ("missing", Some(rustix::io::Errno::NOENT.raw_os_error())),
        ];
        for (rel, want) in table {
            assert_eq!(errno(open(rel)), want, "{rel}");
        }
        for rel in ["fifo", "sub", "."] {
            let kind = open(rel).err().map(|e| e.kind());
            assert_eq!(kind, Some(io::ErrorKind::InvalidInput), "{rel}");
        }
        let magic = open_beneath(Path::new("/proc/self"), Path::new("exe"));
        assert_eq!(errno(magic), eloop, "a magic link of /proc");
        assert_eq!(
            read_beneath(&d, Path::new("sub/line.txt"), 3).err().map(|e| e.kind()),
            Some(io::ErrorKind::FileTooLarge)
        );
        assert_eq!(read_beneath(&d, Path::new("sub/line.txt"), 5).ok(), Some(b"hello".to_vec()));
    }

    #[test]
    fn a_link_at_the_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let victim = dir.path().join("victim");
        fs::write(&victim, b"the owner's file").expect("the victim is written");
        let p = dir.path().join("scorecard.json");
        let tmp = dir.path().join(format!(".scorecard.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).expect("a link is planted");
        write_atomic(&p, b"figures").expect("the write goes on beside the link");
        assert_eq!(fs::read(&victim).unwrap_or_default(), b"the owner's file");
        assert_eq!(fs::read(&p).unwrap_or_default(), b"figures");
        assert!(fs::symlink_metadata(&tmp).is_err(), "the link is gone, the temp renamed");
    }

    #[test]
    fn replaces_whole_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").expect("a new file is written");
        write_atomic(&p, b"two").expect("an existing file is replaced");
        assert_eq!(fs::read(&p).unwrap_or_default(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["state.json"]);
    }

    #[test]
    fn a_discarded_tree_is_gone_at_once_and_removed_without_following_links() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let (tree, outside) = (dir.path().join("checkout"), dir.path().join("owner"));
        fs::create_dir_all(tree.join("deep/er")).expect("a tree can be made");
        fs::create_dir_all(&outside).expect("a directory outside can be made");
        fs::write(outside.join("keep.txt"), "kept").expect("a file outside can be written");
        fs::write(tree.join("deep/er/file"), "x").expect("a file inside can be written");
        std::os::unix::fs::symlink(&outside, tree.join("deep/link")).expect("a link is planted");
        // What an earlier process left half removed.
        let left = dir.path().join(".checkout.gone-1-2");
        fs::create_dir_all(left.join("a")).expect("a leftover can be made");

        discard_dir(&tree).expect("the tree is discarded");
        assert!(fs::symlink_metadata(&tree).is_err(), "the name is free on return");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let gone = || {
            fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains(".gone-"))
                .count()
        };
        while gone() > 0 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(gone(), 0, "the discarded tree and the leftover are removed");
        assert_eq!(fs::read_to_string(outside.join("keep.txt")).unwrap_or_default(), "kept");
        discard_dir(&tree).expect("a tree already gone is no error");
    }

    #[test]
    fn a_tree_another_call_is_removing_is_left_to_it() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let tree = dir.path().join("checkout");
        let taken = dir.path().join(".checkout.gone-1-3");
        fs::create_dir_all(taken.join("a")).expect("a tree being removed can be made");
        REMOVING.lock().expect("the set is not poisoned").insert(taken.clone());
        for _ in 0..2 {
            fs::create_dir_all(&tree).expect("a checkout can be made");
            discard_dir(&tree).expect("the tree is discarded");
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(taken.join("a").is_dir(), "left to the call that took it");
        }
        REMOVING.lock().expect("the set is not poisoned").remove(&taken);
        discard_dir(&tree).expect("nothing to discard");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while taken.exists() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!taken.exists(), "swept once no call holds it");
    }
}
