//! The owner's evaluations: their files read strictly at start, run on
//! throwaway individuals in the cage, hidden from every body, and held
//! against each candidate by the gate.

use std::time::Duration;

use crate::common::*;

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
"#;

/// An evaluation file that cannot be used stops the start: the file and the
/// field are named, and nothing of the individual changes (no journal, no
/// state, the same commit).
#[test]
fn a_malformed_evaluation_refuses_the_start() -> TestResult {
    let ind = Individual::new(SCRIPT, &[])?;
    let head = ind.head()?;
    std::fs::create_dir_all(ind.path().join("evals"))?;
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n\n[[check]]\nreply_contains = \"hello\"\nrpely = \"x\"\n",
    )?;
    let out = std::process::Command::new(teneral())
        .arg("run")
        .arg("--dir")
        .arg(ind.path())
        .stdin(std::process::Stdio::null())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the evaluation evals/greets.toml cannot be used"), "{err}");
    assert!(
        err.contains("check[0]: it has 2 keys (reply_contains, rpely)"),
        "the field is named: {err}"
    );
    assert!(!ind.path().join("memory/journal.jsonl").exists(), "nothing journaled");
    assert!(!ind.path().join(".teneral/state.json").exists(), "no state written");
    assert_eq!(ind.head()?, head);
    // Mended, the same individual starts.
    std::fs::write(
        ind.path().join("evals/greets.toml"),
        "line = \"hello\"\n\n[[check]]\nreply_contains = \"hello\"\n",
    )?;
    let _kernel = ind.start()?;
    ind.wait_for("kernel.started", Duration::from_secs(240), |e| e["type"] == "kernel.started")?;
    Ok(())
}
