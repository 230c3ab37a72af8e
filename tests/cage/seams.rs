//! The cage crate links none of the kernel's crates: `scripts/check-seams`
//! reads crates/cage/Cargo.toml and the lock, and refuses a dependency on
//! tokio, hyper, reqwest, zbus or git2, direct or through another crate.

use std::process::Command;

use crate::common::*;

/// A tree holding only the lock, the cage's manifest (with `extra` lines
/// added to its `[dependencies]`) and the table of event kinds, which the
/// check reads for its other seam: what the seam check says of it.
fn seams_of(extra: &str) -> Result<(Option<i32>, String), Box<dyn std::error::Error>> {
    let root = repo_root();
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("crates/cage"))?;
    std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock"))?;
    let kinds = "crates/core/src/journal/kind.rs";
    std::fs::create_dir_all(dir.path().join(kinds).parent().ok_or("a directory")?)?;
    std::fs::copy(root.join(kinds), dir.path().join(kinds))?;
    let manifest = std::fs::read_to_string(root.join("crates/cage/Cargo.toml"))?;
    let manifest = manifest.replacen("[dependencies]\n", &format!("[dependencies]\n{extra}"), 1);
    std::fs::write(dir.path().join("crates/cage/Cargo.toml"), manifest)?;
    // Debian's python, the one a gate check's cage can run (a pyenv shim
    // leads outside what the cage grants).
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(root.join("scripts/check-seams")).arg(dir.path());
    let out = run_within(&mut cmd, QUICK, "check the seams of a copy of the cage's manifest")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok((out.status.code(), text))
}

#[test]
fn the_cage_crate_depending_on_the_kernels_crates_breaks_a_seam() {
    let (code, text) = seams_of("").expect("the seams of the cage as it is");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("seams hold"), "{text}");
    let table = [
        // Direct, by name and under another name.
        ("tokio = \"1\"\n", "crates/cage/Cargo.toml: tokio"),
        ("git = { package = \"git2\", version = \"0.20\" }\n", "crates/cage/Cargo.toml: git2"),
        // Through another crate of the lock.
        ("hyper-util = \"0.1\"\n", "crates/cage/Cargo.toml: hyper-util -> hyper"),
        ("zbus = \"5\"\n", "crates/cage/Cargo.toml: zbus"),
        ("reqwest = \"0.12\"\n", "crates/cage/Cargo.toml: reqwest"),
    ];
    for (extra, want) in table {
        let (code, text) = seams_of(extra).expect("the seams of a changed manifest");
        assert_eq!(code, Some(1), "{extra}: {text}");
        assert!(text.contains("the cage depends on the kernel's crates"), "{extra}: {text}");
        assert!(text.contains(want), "{extra}: wanted {want:?} in {text}");
    }
}
