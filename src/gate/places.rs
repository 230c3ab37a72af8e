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

/// The kernel binary as `<target>/teneral-kernel`: always a copy of its
/// own, made anew for every candidate. The target is the checks' to write;
/// a hard link would hand them the running kernel's own inode (its mode,
/// its owner), and a copy kept from an earlier check could be one a check
/// rewrote.
/// Checks that run side by side place it at once: each copy has a name of
/// its own until its rename.
pub(super) fn place_kernel(exe: &Path, target: &Path) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COPIES: AtomicU32 = AtomicU32::new(0);
    std::fs::create_dir_all(target)?;
    let placed = target.join("teneral-kernel");
    let n = COPIES.fetch_add(1, Ordering::Relaxed);
    // The one temporary pattern (`fsutil::is_temp_name`).
    let tmp = target.join(format!(".teneral-kernel-{n}.tmp-{}", std::process::id()));
    // A name a check left there is removed, never written through.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut from = std::fs::File::open(exe)?;
    let mut to = std::fs::File::options().write(true).create_new(true).open(&tmp)?;
    std::io::copy(&mut from, &mut to)?;
    {
        use std::os::unix::fs::PermissionsExt;
        to.set_permissions(std::fs::Permissions::from_mode(0o755))?;
    }
    drop(to);
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    #[test]
    fn the_kernels_build_shares_no_writable_place_with_any_body_build() {
        use std::path::Path;
        // Where a body's code writes: the gate's checks and builds, the
        // generations' build, the checkouts of candidates and of the body.
        let body_places = [
            crate::gate::TARGET_DIR,
            crate::generation::TARGET_DIR,
            ".teneral/gate",
            crate::repo::CANDIDATE_DIR,
            crate::repo::LIVE_DIR,
        ];
        let kernels = Path::new(crate::launcher::kernels::KERNELS_TARGET);
        for place in body_places {
            let place = Path::new(place);
            assert!(
                !kernels.starts_with(place) && !place.starts_with(kernels),
                "{} and {} overlap",
                kernels.display(),
                place.display()
            );
        }
    }

    #[test]
    fn the_placed_kernel_is_a_fresh_copy_never_the_running_inode() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let exe = dir.path().join("teneral");
        std::fs::write(&exe, "kernel")?;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o750))?;
        let target = dir.path().join("target");
        std::fs::create_dir(&target)?;
        // What a check could leave: the copy rewritten, a link at the temporary name.
        std::fs::write(target.join("teneral-kernel"), "forged")?;
        let pid = std::process::id();
        let planted: Vec<_> =
            (0..256).map(|n| target.join(format!(".teneral-kernel-{n}.tmp-{pid}"))).collect();
        for name in &planted {
            std::os::unix::fs::symlink(&exe, name)?;
        }
        let placed = place_kernel(&exe, &target)?;
        let (from, to) = (std::fs::metadata(&exe)?, std::fs::metadata(&placed)?);
        assert_ne!(to.ino(), from.ino(), "a copy, not a link");
        assert_eq!(std::fs::read(&placed)?, b"kernel");
        assert_eq!(to.permissions().mode() & 0o7777, 0o755);
        assert_eq!(std::fs::read(&exe)?, b"kernel", "the link was not written through");
        Ok(())
    }

    #[test]
    fn checks_placing_the_kernel_at_once_each_get_a_whole_copy() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let exe = dir.path().join("teneral");
        std::fs::write(&exe, vec![7u8; 1 << 20])?;
        let target = dir.path().join("target");
        let placed: Vec<std::io::Result<PathBuf>> = std::thread::scope(|s| {
            let each: Vec<_> = (0..8).map(|_| s.spawn(|| place_kernel(&exe, &target))).collect();
            each.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("panicked"))))
                .collect()
        });
        for p in placed {
            assert_eq!(std::fs::read(p?)?.len(), 1 << 20);
        }
        let names: Vec<String> = std::fs::read_dir(&target)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        assert_eq!(names, ["teneral-kernel"], "no temporary copy is left");
        Ok(())
    }
}
