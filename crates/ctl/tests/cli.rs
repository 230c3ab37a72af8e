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

#[test]
fn talk_status_and_back_refuse_a_directory_that_is_no_individual() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cases: &[(&[&str], i32)] = &[(&["talk"], 1), (&["status"], 3), (&["back", "--list"], 1)];
    for (args, code) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
            .args(*args)
            .arg("-d")
            .arg(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("teneralctl runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {out:?}");
        assert!(err.contains("is not a teneral individual"), "{args:?}: {err}");
        assert_eq!(err.matches(&*dir.path().display().to_string()).count(), 1, "named once: {err}");
    }
    assert!(!dir.path().join(".teneral").exists(), "nothing was created there");
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(["talk", "--help"])
        .output()
        .expect("teneralctl runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("-d, --dir <DIR>") && help.contains("individual's directory"), "{help}");
}
