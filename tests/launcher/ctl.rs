//! The generation's own `talk`, `back` and `accept`: once the generation
//! runs a kernel of its own with a `teneralctl` kept beside it, the
//! install's `teneralctl` runs that one (here a stub that prints a marker),
//! `--install` runs the install's own, and `teneralctl status` says which.
//! A generation that runs the install's kernel keeps the install's client.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use git2::Repository;

use super::LONG;
use crate::common::*;

const MARK: &str = "the generation's teneralctl:";

fn ctl(home: &Path, args: &[&str]) -> Result<(Output, String), std::io::Error> {
    let out = Command::new(teneralctl())
        .args(args)
        .arg("--dir")
        .arg(home)
        .stdin(Stdio::null())
        .env_remove(teneralctl::individual::CHOSEN_VARIABLE)
        .output_within(SLOW)?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out, text))
}

#[test]
fn the_generations_own_client_runs_talk_back_and_accept() -> TestResult {
    let (ind, v2, _base) = crate::crash::handover::on_trial_with("kept kernel v2: hello", true)?;
    let repo = Repository::open(ind.path())?;
    let key = teneral::launcher::kernels::key_of(&repo, git2::Oid::from_str(&v2)?)?;
    let stub = teneral::launcher::kernels::kept_client(ind.path(), &key);
    std::fs::write(&stub, format!("#!/bin/sh\necho \"{MARK} $*\"\n"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755))?;
    // Nothing started yet: the install's.
    let (_, said) = ctl(ind.path(), &["status"])?;
    assert!(said.contains("talk, back and accept: the install's teneralctl"), "{said}");

    let _kernel = ind.start()?;
    ind.wait_for("v2 ready under its own kernel", LONG, |e| {
        e["type"] == "generation.ready" && e["commit"] == v2.as_str()
    })?;
    let running =
        std::fs::read_to_string(ind.path().join(teneral::launcher::kernels::RUNNING_FILE))?;
    assert_eq!(running.trim(), key);
    for args in [&["talk"][..], &["back", "--list"], &["accept", "1234567"]] {
        let (out, text) = ctl(ind.path(), args)?;
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        let want = format!("{MARK} {} --dir {}", args.join(" "), ind.path().display());
        assert!(text.contains(&want), "{args:?} ran the generation's: {text}");
    }
    // The install's own, when the generation's is what is broken.
    let (out, text) = ctl(ind.path(), &["--install", "back", "--list"])?;
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains(MARK), "{text}");
    assert!(text.contains(&v2[..7]), "the install's back lists the generations: {text}");
    let (_, said) = ctl(ind.path(), &["status"])?;
    assert!(said.contains("the generation's own teneralctl"), "{said}");
    assert!(said.contains(&stub.display().to_string()), "{said}");
    let (_, json) = ctl(ind.path(), &["status", "--json"])?;
    let value: serde_json::Value = serde_json::from_str(json.trim())?;
    assert_eq!(value["client"], stub.display().to_string().as_str(), "{json}");

    // A generation on the install's kernel keeps the install's client.
    let plain = Individual::new("", &[])?;
    let _k = plain.start()?;
    plain.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    let running =
        std::fs::read_to_string(plain.path().join(teneral::launcher::kernels::RUNNING_FILE))?;
    assert_eq!(running.trim(), "install");
    let (_, said) = ctl(plain.path(), &["status"])?;
    assert!(said.contains("talk, back and accept: the install's teneralctl"), "{said}");
    Ok(())
}
