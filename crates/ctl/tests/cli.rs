//! The owner's client as a program. Its own test target also makes
//! `cargo test --workspace` build the `teneralctl` binary, which the
//! kernel's integration tests drive.
use std::process::Command;

#[test]
fn status_of_a_directory_that_is_no_individual_says_it_does_not_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .arg("status")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .expect("teneralctl runs");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn the_commands_are_the_owners() {
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .arg("--help")
        .output()
        .expect("teneralctl runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for command in ["talk", "back", "status"] {
        assert!(help.contains(command), "{help}");
    }
}
