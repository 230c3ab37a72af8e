//! A witness with the mutation gate's checks and the owner's `--also`
//! command, against the stand-in forge: the kernel program runs both in the
//! cage on the pull request's tree; the posted report has a line for each
//! gate and one for the command (pass or fail, its exit status), and what
//! the command printed stays here, in the kept report. And the report
//! itself: it waits for approval, and its signature verifies.

use std::process::Command;

use super::publish::{no_token_left, offered, run, Published};
use super::*;

#[test]
fn a_witness_runs_the_gates_then_the_owners_command_and_posts_its_exit_not_its_output() {
    // The gates and the command run in the cage, which cannot be made inside
    // a gate check (cages do not nest; the gate sets TENERAL_TEST_NO_CAGE).
    if std::env::var_os("TENERAL_TEST_NO_CAGE").is_some() {
        teneral_testkit::skip("the witness's gates need the cage (TENERAL_TEST_NO_CAGE is set)");
        return;
    }
    let p = offered();
    // The individual's runs here are direct children, as in the kernel's tests.
    let env = std::fs::read_to_string(p.home.dir.join(".env")).expect("the .env");
    std::fs::write(
        p.home.dir.join(".env"),
        format!("{env}TENERAL_RUNNER=direct\nTENERAL_PROVIDER=standin\n"),
    )
    .expect("write .env");
    let sha = strangers_pull(&p);
    let (code, out, err) = run(&p.home, &["offer", "witness", "1"], "");
    assert_eq!(code, 1, "fetched, then it waits for approval: {out}{err}");
    let (code, out, err) = run(&p.home, &["offer", "approve", &sha[..8]], "");
    assert_eq!(code, 0, "{out}{err}");
    // What it prints goes nowhere but here; reading the key from the
    // checkout's place fails in the cage.
    let also = "printf 'kept-%s\\n' here; cat ../../../auth/offer-key || exit 3";
    let (code, out, err) = run(&p.home, &["offer", "witness", "1", "--also", also], "");
    assert_eq!(code, 0, "{out}{err}");
    let body = p.forge.state.lock().expect("state").comments[0]["body"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for want in [
        "- pass scan: 0 finding(s)",
        // The stranger's tree is no kernel: the gate refuses it, by name.
        "- FAIL gate fetch (failed)",
        "- FAIL the owner's command `printf",
        "(exit status 3, ",
    ] {
        assert!(body.contains(want), "{want:?} in {body}\n{err}");
    }
    assert!(!body.contains("kept-here"), "the command's output is not posted: {body}");
    assert!(!body.contains("OPENSSH PRIVATE KEY"), "the key was not readable: {body}");
    assert!(out.contains("the check FAILED"), "{out}");
    let kept = p.home.dir.join(format!(".teneral/offers/witness-1-{sha}.json"));
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&kept).expect("the report is kept")).expect("json");
    let output = kept["also"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("kept-here"), "the output is kept here: {kept:#}");
    assert!(output.contains("No such file or directory"), "the key is not in the cage: {output}");
    assert!(!output.contains("PRIVATE KEY"), "{output}");
    assert_eq!(kept["also"]["passed"], false, "{kept:#}");
    assert_eq!(kept["gates"]["passed"], false, "{kept:#}");
}

/// A stranger's offer, signed by a key of its own, opened as pull request 1.
pub(super) fn strangers_pull(p: &Published) -> String {
    let other = tempfile::tempdir().expect("the stranger's checkout");
    let bare = p.forge.root.join("o/species.git");
    git(other.path(), &["clone", "-q", &bare.display().to_string(), "c"]);
    let c = other.path().join("c");
    let key = other.path().join("stranger");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .output_within(SLOW)
        .expect("ssh-keygen runs");
    assert!(made.status.success(), "{made:?}");
    std::fs::write(c.join("body/index.ts"), "export const x = 3;\n").expect("write");
    let signing = format!("user.signingkey={}", key.display());
    git(&c, &["-c", "gpg.format=ssh", "-c", &signing, "commit", "-qaS", "-m", MESSAGE]);
    git(&c, &["push", "-q", "origin", "HEAD:refs/heads/contrib/stranger/x"]);
    git(&bare, &["update-ref", "refs/pull/1/head", "refs/heads/contrib/stranger/x"]);
    let sha = String::from_utf8_lossy(&git(&bare, &["rev-parse", "refs/pull/1/head"]).stdout)
        .trim()
        .to_owned();
    p.forge.state.lock().expect("state").pulls.push(serde_json::json!({"number": 1,
        "state": "open", "html_url": "http://forge/o/species/pull/1", "title": "Faster lookups",
        "head": {"ref": "contrib/stranger/x", "sha": sha}, "base": {"ref": "main"}}));
    sha
}

#[test]
fn a_witness_report_waits_for_approval_then_is_posted_and_its_signature_verifies() {
    let p = offered();
    let sha = strangers_pull(&p);
    let (code, out, err) = run(&p.home, &["offer", "witness", "1"], "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("waits for its owner's approval"), "{err}");
    assert!(p.forge.state.lock().expect("state").comments.is_empty(), "nothing ran or was posted");
    let (code, out, err) = run(&p.home, &["offer", "approve", &sha[..8]], "");
    assert_eq!(code, 0, "the head of a fetched pull request may be approved: {out}{err}");
    let (code, out, err) = run(&p.home, &["offer", "witness", "1", "--no-gates"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("the check passed"), "{out}");
    no_token_left(&p, &format!("{out}{err}"));
    let body = p.forge.state.lock().expect("state").comments[0]["body"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for want in [
        "- pass descends from main",
        "- pass scan: 0 finding(s)",
        "- pass every commit signed (by SHA256:",
        "git version",
        "Linux",
    ] {
        assert!(body.contains(want), "{want} in {body}");
    }
    let (text, rest) = body.split_once("\nSigned by `").expect("the text, then its signature");
    let signature = rest.split("```\n").nth(1).expect("the armoured signature");
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("sig"), signature).expect("write");
    assert!(verifies(&dir.path().join("sig"), text), "the report verifies");
    let changed = text.replace("- pass scan", "- FAIL scan");
    assert!(!verifies(&dir.path().join("sig"), &changed), "a changed report does not verify");
    let approval = p.home.dir.join(format!(".teneral/owner/.approved/{sha}.approve"));
    assert!(!approval.exists(), "the approval is used up");
}

/// Whether `ssh-keygen` finds `signature` a witness's signature of `text`.
fn verifies(signature: &std::path::Path, text: &str) -> bool {
    let mut check = Command::new("ssh-keygen");
    check.args(["-Y", "check-novalidate", "-n", "teneral-witness", "-s"]).arg(signature);
    teneral_testkit::run_fed_within(
        &mut check,
        Some(text.as_bytes()),
        teneral_testkit::QUICK,
        "checking a signature",
    )
    .expect("ssh-keygen ends within its limit")
    .status
    .success()
}
