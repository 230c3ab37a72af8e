//! The places a check needs besides its checkout: a short directory for
//! the sockets of kernels under test, the kernel binary where the cage lets
//! the body's tests run it, and what identifies that binary.

use std::path::{Path, PathBuf};

/// A short path for the event sockets of the kernels the kernel's tests
/// start inside a check: `/tmp/teneral-<uid>/g-<home id>`, a link to
/// `<target>/sockets`. A Unix socket's path has at most 107 bytes, the
/// check's own places lie deeper, and /tmp is not the check's to write;
/// through the link the sockets are made in the check's cache.
pub(super) fn socket_dir(home: &Path, target: &Path) -> std::io::Result<PathBuf> {
    // A kernel that was itself given one (it runs under test in a check)
    // passes it on: it cannot make links in /tmp either.
    if let Some(given) = std::env::var_os(crate::events::SOCKET_DIR_VAR).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(given));
    }
    let real = target.join("sockets");
    std::fs::create_dir_all(&real)?;
    let uid = rustix::process::getuid().as_raw();
    let base = PathBuf::from(format!("/tmp/teneral-{uid}"));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&base)?;
    }
    let link = base.join(format!("g-{}", crate::events::home_id(home)));
    if std::fs::read_link(&link).ok().as_deref() != Some(real.as_path()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link)?;
    }
    Ok(link)
}

/// The kernel binary as `<target>/teneral-kernel`, a hard link when the
/// two lie on one filesystem, else a copy; replaced when the kernel changed.
pub(super) fn place_kernel(exe: &Path, target: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(target)?;
    let placed = target.join("teneral-kernel");
    let (from, to) = (std::fs::metadata(exe)?, std::fs::metadata(&placed).ok());
    let same = to.is_some_and(|t| {
        (t.dev(), t.ino()) == (from.dev(), from.ino())
            || (t.size(), t.mtime()) == (from.size(), from.mtime())
    });
    if same {
        return Ok(placed);
    }
    let tmp = target.join(".teneral-kernel.tmp");
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(exe, &tmp).is_err() {
        std::fs::copy(exe, &tmp)?;
        std::fs::File::options().write(true).open(&tmp)?.set_modified(from.modified()?)?;
    }
    std::fs::rename(&tmp, &placed)?;
    Ok(placed)
}

/// What identifies the kernel binary the body's tests run against.
pub(super) fn kernel_identity(exe: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(exe)
        .map(|m| format!(" kernel {}:{}:{}:{}", m.dev(), m.ino(), m.size(), m.mtime()))
        .unwrap_or_default()
}
