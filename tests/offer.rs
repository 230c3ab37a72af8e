//! The kernel's answer to a body's `offer.requested`
//! (`teneral::offer::answer`), against the stand-in forge that teneralctl's
//! tests use too (`teneral_testkit::forge`): the prepared commit signed as
//! `offer/<name>` with the individual's key (git verifies it), checked,
//! kept waiting under `ask`, published once the owner approved the signed
//! commit (asked again: the same signature, so the same commit), and a
//! private path failing the check.

use std::path::Path;
use std::process::Command;

use teneral_core::commit::Commit;
use teneral_testkit::forge;

use crate::common::{run_within, QUICK};

const TOKEN: &str = "ghp_KernelSideForgeToken0123456789abcdXY";

fn git(dir: &Path, args: &[&str]) -> String {
    let mut git = Command::new("git");
    git.args(["-c", "user.name=Agent", "-c", "user.email=agent@localhost"])
        .args(["-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    let out = run_within(&mut git, QUICK, "making the offer's repository").expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

const MESSAGE: &str = "Faster lookups\n\nWhat it changes: the index\nWhy: slow\n\
                       Evidence: 3 times faster\nNot verified: ARM\n";

#[test]
fn a_body_request_is_signed_checked_kept_waiting_then_published_once_approved() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let home = tmp.path().join("individual");
    std::fs::create_dir_all(&home).expect("mkdir");
    git(&home, &["init", "-q"]);
    write(&home, "body/index.ts", "export const x = 1;\n");
    write(&home, "BACKLOG.md", "# Backlog\n");
    write(&home, ".gitignore", ".teneral/\n.env\n");
    git(&home, &["add", "-A"]);
    git(&home, &["commit", "-qm", "The species"]);
    let root = tmp.path().join("forge");
    let bare = root.join("o/species.git");
    std::fs::create_dir_all(&bare).expect("mkdir");
    git(&bare, &["init", "-q", "--bare"]);
    git(&home, &["push", "-q", &bare.display().to_string(), "main"]);
    let forge = forge::Forge::start(&root, TOKEN);
    git(&home, &["remote", "add", "origin", &forge.url("o/species.git")]);
    write(&home, ".env", &format!("TENERAL_UPSTREAM=main\nTENERAL_FORGE_API={}\n", forge.api()));
    // TENERAL_UPSTREAM names the local branch for the check; the forge's
    // remote is found as origin's.
    let token = teneralctl::offer::token::Token::new(TOKEN).expect("a token");
    teneralctl::offer::token::store(&home, &token).expect("stored");

    // The agent's change, unsigned, on a detached head of its own.
    git(&home, &["switch", "-q", "--detach"]);
    write(&home, "body/index.ts", "export const x = 2;\n");
    git(&home, &["commit", "-qam", MESSAGE]);
    let prepared = Commit::parse(&git(&home, &["rev-parse", "HEAD"])).expect("a commit");

    let (answer, done) = teneral::offer::answer(&home, 41, "fast", &prepared);
    assert!(done.is_none());
    assert_eq!(answer["request"], 41, "{answer}");
    assert_eq!(answer["state"], "waits", "{answer}");
    let signed = Commit::parse(answer["offer"].as_str().unwrap_or("")).expect("the signed head");
    assert_ne!(signed, prepared, "signing makes the commit again");
    assert_eq!(git(&home, &["rev-parse", "offer/fast"]), signed.as_str());
    let key = teneralctl::offer::key::ensure(&home).expect("the key");
    let signers = tmp.path().join("allowed");
    std::fs::write(&signers, teneralctl::offer::key::allowed_signers_line(key.public_key()))
        .expect("write");
    let allowed = format!("gpg.ssh.allowedSignersFile={}", signers.display());
    git(&home, &["-c", &allowed, "verify-commit", "offer/fast"]);
    assert_eq!(forge.state.lock().expect("state").pushes, 0, "nothing went out unapproved");

    teneralctl::owner::write_approval(&home, &signed).expect("the owner approves");
    let (answer, done) = teneral::offer::answer(&home, 42, "fast", &prepared);
    assert_eq!(answer["state"], "published", "{answer}");
    assert_eq!(answer["offer"], signed.as_str(), "the same signature, the same commit");
    let done = done.expect("the outcome");
    assert!(done.branch.starts_with("contrib/") && done.branch.ends_with("/fast"));
    assert_eq!(answer["pull"], done.pull.url.as_str());
    assert_eq!(forge.state.lock().expect("state").pushes, 1);
    let event = teneralctl::offer::publish::event(&done);
    assert_eq!(event["offer"], signed.as_str());

    // A private path fails the check; nothing is published.
    git(&home, &["switch", "-q", "--detach", "main"]);
    write(&home, "soul/name.md", "name: Ada\n");
    git(&home, &["add", "soul"]);
    git(&home, &["commit", "-qm", MESSAGE]);
    let leaky = Commit::parse(&git(&home, &["rev-parse", "HEAD"])).expect("a commit");
    let (answer, done) = teneral::offer::answer(&home, 43, "leak", &leaky);
    assert!(done.is_none());
    assert_eq!(answer["state"], "failed", "{answer}");
    assert!(answer["message"].as_str().unwrap_or("").contains("FAIL scan"), "{answer}");
    let (answer, _) = teneral::offer::answer(&home, 44, "../up", &leaky);
    assert_eq!(answer["state"], "refused", "{answer}");
}

const SCRIPT: &str = r#"{"reply": "Hello."}
{"expect": "Offer", "tool_calls": [{"name": "edit_file", "arguments": {"path": ".teneral/candidate/body/src/prompt.rs", "old": "You are an agent that lives in a directory", "new": "You are a kind agent that lives in a directory"}}]}
{"tool_calls": [{"name": "bash", "arguments": {"command": "cd .teneral/candidate && git -c user.name=Agent -c user.email=agent@teneral.invalid -c commit.gpgsign=false commit -qam \"$(printf 'A kinder prompt\\n\\nWhat it changes: the prompt\\nWhy: kindness\\nEvidence: read it\\nNot verified: anything else\\n')\" && git rev-parse HEAD"}}]}
{"tool_calls": [{"name": "offer", "arguments": {"name": "kind"}}]}
{"reply": "Offered."}
"#;

/// System test: the seed body's `offer` tool through the real event
/// channel: the kernel takes the commit from the workspace, signs it as
/// `offer/kind`, checks it and answers once (it waits for the owner).
#[test]
fn the_seed_bodys_offer_tool_is_answered_once_through_the_channel() -> crate::common::TestResult {
    use crate::common::*;
    if !system_tests() {
        return Ok(());
    }
    let long = std::time::Duration::from_secs(900);
    // The test individual has no species branch of its own: its lineage stands in.
    let ind = Individual::seed(SCRIPT, &["TENERAL_UPSTREAM=lineage/local"])?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", long, |e| e["type"] == "turn.ended")?;
    teneral_core::owner::write_line(ind.path(), "Offer your kinder prompt to the species.")?;
    let asked = ind.wait_for("the request", long, |e| e["type"] == "offer.requested")?;
    let answer = ind.wait_for("the answer", long, |e| e["type"] == "offer.answered")?;
    assert_eq!(answer["request"], asked["seq"], "{answer}");
    assert_eq!(answer["state"], "waits", "{answer}\n{}", ind.kernel_log());
    ind.wait_for("the reply", long, |e| e["type"] == "reply" && e["text"] == "Offered.")?;
    let answers = ind.events("offer.answered");
    assert_eq!(answers.len(), 1, "answered exactly once: {answers:?}");
    let result = ind
        .events("tool.result")
        .into_iter()
        .find(|e| e["output"].as_str().is_some_and(|o| o.starts_with("waits:")));
    assert!(result.is_some(), "the tool returned the answer: {:?}", ind.events("tool.result"));
    let repo = git2::Repository::open(ind.path())?;
    let signed = repo.revparse_single("offer/kind")?.peel_to_commit()?;
    assert_eq!(answer["offer"], signed.id().to_string().as_str());
    assert!(repo.extract_signature(&signed.id(), None).is_ok(), "signed");
    Ok(())
}
