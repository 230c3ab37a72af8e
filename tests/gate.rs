//! The gate, promotion and rollback, end to end: a fixture body in `mutate`
//! mode asks for the commit its owner names; the test makes that commit in
//! the agent's workspace, as an agent would.

mod accepted;
mod refusals;
mod rollback;
mod stops;

use std::path::Path;
use std::time::Duration;

use git2::{IndexAddOption, Repository, Signature};
use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(300);
const SHORT: Duration = Duration::from_secs(30);

/// Commits what `edit` does to the agent's workspace; returns the commit.
fn candidate(
    ind: &Individual,
    edit: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<String, Box<dyn std::error::Error>> {
    let workspace = ind.path().join(".teneral/candidate");
    edit(&workspace)?;
    let repo = Repository::open(&workspace)?;
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("agent", "agent@localhost")?;
    let parent = repo.head()?.peel_to_commit()?;
    let commit = repo.commit(Some("HEAD"), &sig, &sig, "a mutation", &tree, &[&parent])?;
    give_to_individual(ind.path(), &workspace)?;
    Ok(commit.to_string())
}

/// The first line of the fixture body's one test, after which a test's
/// edits put what makes it fail or hang.
const MODE_TEST: &str = "    fn the_mode_is_one_of_the_known() {\n";
const SLEEP: &str = "        std::thread::sleep(std::time::Duration::from_secs(600));\n";

/// Replaces `from` with `to` in the workspace's fixture body.
fn body_edit(workspace: &Path, from: &str, to: &str) -> std::io::Result<()> {
    let main = workspace.join("body/src/main.rs");
    let text = std::fs::read_to_string(&main)?;
    if !text.contains(from) {
        return Err(std::io::Error::other(format!("{from:?} is not in the fixture body")));
    }
    std::fs::write(main, text.replace(from, to))
}

fn mode(workspace: &Path, mode: &str) -> std::io::Result<()> {
    body_edit(
        workspace,
        "const MODE: &str = \"mutate\";",
        &format!("const MODE: &str = \"{mode}\";"),
    )
}

/// A kernel on a fixture body in `mutate` mode, at rest after its birth.
fn started(env: &[&str]) -> Result<(Individual, Kernel, String), Box<dyn std::error::Error>> {
    let ind = Individual::with_mode("mutate", "", env)?;
    let base = ind.head()?;
    let kernel = ind.start()?;
    ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
    Ok((ind, kernel, base))
}

/// Asks for `commit` and waits for the answer about it.
fn ask(ind: &Individual, commit: &str) -> Result<Value, Box<dyn std::error::Error>> {
    teneral_core::owner::write_line(ind.path(), commit)?;
    Ok(ind.wait_for("the verdict", LONG, |e| {
        (e["type"] == "mutation.rejected" || e["type"] == "mutation.accepted")
            && (e["candidate"] == commit || e["to"] == commit)
    })?)
}

fn rejected_at(verdict: &Value, check: &str, output: &str) {
    assert_eq!(verdict["type"], "mutation.rejected", "{verdict}");
    assert_eq!(verdict["check"], check, "{verdict}");
    let out = verdict["output"].as_str().unwrap_or_default();
    assert!(out.contains(output), "output of {check} should hold {output:?}:\n{out}");
}
