//! The install is the owner's: a generation whose `Containerfile` and
//! `SIGNERS` differ from the install's (HEAD of the individual's directory)
//! is said to differ once, in the log and in a `kernel.notice` that
//! `teneralctl talk` shows, and not again when the kernel starts again.

use std::process::Command;

use git2::Repository;
use serde_json::Value;

use super::{LONG, SHORT};
use crate::common::*;

fn differs(ind: &Individual) -> Vec<Value> {
    ind.events("kernel.notice").into_iter().filter(|e| e.get("install_differs").is_some()).collect()
}

#[test]
fn a_generation_whose_install_files_differ_is_said_once() -> TestResult {
    let ind = Individual::new("", &[])?;
    let base = ind.head()?;
    let work = tempfile::tempdir()?;
    Repository::clone(&ind.path().to_string_lossy(), work.path())?;
    std::fs::write(work.path().join("Containerfile"), "FROM scratch\n")?;
    std::fs::write(work.path().join("SIGNERS"), "# no keys\n")?;
    let v2 = commit_all(work.path(), "another Containerfile and SIGNERS")?;
    let mut fetch = Command::new("git");
    fetch.arg("-C").arg(ind.path()).args(["fetch", "-q"]).arg(work.path());
    fetch.arg(format!("+{v2}:refs/heads/later"));
    succeed_within(&mut fetch, QUICK, "fetching a later generation")?;
    let state = serde_json::json!({"generation": v2, "previous": base});
    std::fs::write(ind.path().join(".teneral/state.json"), state.to_string())?;

    let mut kernel = ind.start()?;
    ind.wait_for("v2 ready", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    let said = differs(&ind);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["commit"], v2.as_str());
    assert_eq!(said[0]["install_differs"], serde_json::json!(["Containerfile", "SIGNERS"]));
    let text = said[0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("the install's are in effect"), "{text}");
    assert!(ind.kernel_log().contains(&text), "one log line:\n{}", ind.kernel_log());
    let (_, shown, _) = talk(ind.path(), "", 3)?;
    assert!(shown.contains(&format!("[kernel] {text}")), "talk shows it:\n{shown}");

    kernel.signal(15);
    assert_eq!(kernel.wait(SHORT)?, Some(0), "{}", ind.kernel_log());
    let _again = ind.start()?;
    ind.wait_for("v2 ready again", LONG, |_| ind.events("generation.ready").len() >= 2)?;
    assert_eq!(differs(&ind).len(), 1, "said once per generation: {:?}", differs(&ind));

    // The install's own generation differs in nothing.
    let plain = Individual::new("", &[])?;
    let _k = plain.start()?;
    plain.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    assert!(differs(&plain).is_empty(), "{:?}", differs(&plain));
    Ok(())
}
