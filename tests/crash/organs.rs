//! The organ cache's staging directories: a kill while the kernel links a
//! generation's set of organs leaves the staged set beside it, and the next
//! set made removes it; and the individual the system-call mode's Organs
//! scenario runs on.

use std::path::PathBuf;

use super::{born, SHORT};
use crate::common::*;

/// The paths of the kernel's side of unpacking an organ, for its pid.
pub type OrganPaths = Box<dyn Fn(u32) -> Vec<PathBuf>>;

/// An individual whose body pins one organ, its archive in the cache; and
/// the paths whose calls the Organs scenario counts and kills at, for the
/// kernel's pid: the directory of trees (synced once the tree is in place),
/// the staged tree (renamed into place) and the staged set of links
/// (renamed into place), each staging name the kernel's first of its kind.
/// The unpacking itself, inside the staging directory, is not among them.
pub fn organs_individual() -> Result<(Individual, OrganPaths), Box<dyn std::error::Error>> {
    let ind = Individual::new("", &[])?;
    let tar = crate::organs::tarball::Tar::new()
        .dir("tool/", 0o755)
        .file("tool/README", b"an organ\n")
        .file_mode("tool/run", b"#!/bin/sh\necho organ\n", 0o755)
        .finish();
    let archive = crate::organs::tarball::gz(&tar);
    let sha256 = teneral::organs::cache::hash(&archive[..])?;
    let cache = teneral::organs::cache::Cache::new(ind.path());
    std::fs::create_dir_all(cache.root.join("archives"))?;
    std::fs::write(cache.archive(&sha256), &archive)?;
    let pins = serde_json::json!({"tool": {
        "url": "https://example.invalid/tool.tar.gz", "sha256": sha256, "dir": "tool"}});
    std::fs::write(ind.path().join(teneral::organs::pins::PIN_FILE), pins.to_string())?;
    let head = commit_all(ind.path(), "pins an organ")?;
    born(&ind, &head)?;
    // A set is named by the first 8 bytes of the hash of what it holds.
    use sha2::Digest;
    let id = sha2::Sha256::digest(format!("tool\0{sha256}\0tool\n"));
    let id: String = id[..8].iter().map(|b| format!("{b:02x}")).collect();
    let (trees, sets) = (cache.root.join("trees"), cache.sets());
    let paths = move |pid: u32| {
        vec![
            trees.clone(),
            trees.join(format!(".unpack-{sha256}-{pid}-0")),
            sets.join(format!(".set-{id}-{pid}-1")),
        ]
    };
    Ok((ind, Box::new(paths) as OrganPaths))
}

/// A kill after the kernel staged a set's links and before it renamed
/// them into place leaves `.set-<id>-<pid>-<n>`; the next start, which
/// links the set again, removes it (its process is gone).
#[test]
fn a_staged_set_a_kill_left_is_removed_when_the_set_is_made() -> TestResult {
    let (ind, paths) = organs_individual()?;
    // A pid no process has (above the kernel's largest).
    let left = paths(99_999_999).pop().ok_or("no staged set's path")?;
    std::fs::create_dir_all(&left)?;
    std::os::unix::fs::symlink("../../trees/gone", left.join("tool"))?;
    let _kernel = ind.start()?;
    ind.wait_for("the generation ready", SHORT, |e| e["type"] == "generation.ready")?;
    assert!(!left.exists(), "{} is removed:\n{}", left.display(), ind.kernel_log());
    let sets = teneral::organs::cache::Cache::new(ind.path()).sets();
    let made: Vec<String> = std::fs::read_dir(&sets)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(made.len(), 1, "the set alone: {made:?}");
    Ok(())
}
