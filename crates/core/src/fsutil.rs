//! Writing state so that a crash leaves either the old file or the new one.
//!
//! [`write_atomic`] writes a temporary file beside the target, syncs it,
//! renames it over the target and syncs the directory, so the rename itself
//! is durable.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
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

/// Syncs a directory, making renames and removals in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
