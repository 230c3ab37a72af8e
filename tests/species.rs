//! The species rule at the gate, driven through `species::judge` on real
//! repositories: a species served by `git http-backend` on loopback (and a
//! plain local branch), commits signed at test time with ed25519 keys by
//! `git commit -S`, and the owner's acceptance by the real `teneralctl`.

mod fixture;

use std::path::Path;
use std::process::Command;

use teneral::species::{signers, Judgement};

use crate::common::teneralctl;
use fixture::{git, git_status, Res, World};
use teneral_testkit::{Within, QUICK};

const KERNEL_V1: (&str, &str) = ("src/kernel.rs", "fn main() { println!(\"v1\"); }\n");
const BODY_EDIT: (&str, &str) = ("body/main.rs", "fn body() { /* better */ }\n");

fn commit(hex: &str) -> teneral_core::commit::Commit {
    teneral_core::commit::Commit::parse(hex).expect("a full commit id")
}

#[test]
fn an_ordinary_mutation_fetches_nothing_and_works_offline() -> Res<()> {
    let mut w = World::new()?;
    w.host.stop();
    let c = w.candidate(&w.s0, false, &[BODY_EDIT, ("BACKLOG.md", "- more\n")])?;
    let signers = w.signers("")?;
    for mode in ["ask", "auto", "off"] {
        let got = w.judge(&World::settings(mode, "")?, &signers, &w.s0, &c)?;
        assert_eq!(got, Ok(Judgement::Ordinary), "{mode}");
    }
    Ok(())
}

#[test]
fn under_ask_a_new_kernel_waits_for_the_owner_then_passes() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let (settings, signers) = (World::settings("ask", "")?, w.signers("")?);
    let refused = w.judge(&settings, &signers, &w.s0, &c)?.expect_err("not accepted yet");
    assert!(!refused.counts, "a wait for the owner is not counted: {refused:?}");
    assert_eq!(refused.awaiting, Some(commit(&s1)));
    assert!(refused.message.contains(&s1), "{}", refused.message);
    assert!(refused.message.contains("teneralctl accept"), "{}", refused.message);
    // The owner accepts the commit asked about, with the real client.
    let out =
        Command::new(teneralctl()).args(["accept", "--dir"]).arg(&w.home).output_within(QUICK)?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains(&s1[..7]), "{said}");
    let got = w.judge(&settings, &signers, &w.s0, &c)?;
    let want = Judgement::Species { species: commit(&s1), from: Some(commit(&w.s0)) };
    assert_eq!(got, Ok(want));
    let accepted = w.events("species.accepted");
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    assert_eq!(accepted[0]["species"], s1.as_str());
    assert_eq!(accepted[0]["via"], "ctl");
    let left: Vec<_> = std::fs::read_dir(w.home.join(".teneral/owner"))?.flatten().collect();
    assert!(left.is_empty(), "the acceptance was taken in: {left:?}");
    Ok(())
}

#[test]
fn accepting_a_later_commit_accepts_the_ones_before_it() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let s2 = w.publish(&[("src/kernel.rs", "fn main() { println!(\"v2\"); }\n")], None)?;
    // The kernel's fetch brings s2; talk names it by its short form.
    let (settings, signers) = (World::settings("ask", "")?, w.signers("")?);
    assert!(w.judge(&settings, &signers, &w.s0, &c)?.is_err());
    teneralctl::accept::accept(&w.home, Some(&s2[..10]), teneralctl::accept::Via::Talk)?;
    let got = w.judge(&settings, &signers, &w.s0, &c)?;
    assert_eq!(got, Ok(Judgement::Species { species: commit(&s1), from: Some(commit(&w.s0)) }));
    assert_eq!(w.events("species.accepted")[0]["via"], "talk");
    Ok(())
}

#[test]
fn auto_needs_no_acceptance_and_off_takes_nothing() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let signers = w.signers("")?;
    let got = w.judge(&World::settings("auto", "")?, &signers, &w.s0, &c)?;
    assert_eq!(got, Ok(Judgement::Species { species: commit(&s1), from: Some(commit(&w.s0)) }));
    let off = w.judge(&World::settings("off", "")?, &signers, &w.s0, &c)?.expect_err("off");
    assert!(off.message.starts_with("protected paths changed: src/kernel.rs."), "{}", off.message);
    assert!(off.message.contains("TENERAL_SPECIES=off") && off.counts, "{off:?}");
    Ok(())
}

#[test]
fn a_kernel_edit_after_the_merge_is_named() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let extra = [BODY_EDIT, ("src/kernel.rs", "fn main() { evil() }\n"), ("src/new.rs", "\n")];
    let c = w.candidate(&w.s0, true, &extra)?;
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &w.s0, &c)?;
    let refused = got.expect_err("an edit outside body/ after the merge");
    assert!(refused.counts, "{refused:?}");
    for want in [s1.as_str(), "src/kernel.rs, src/new.rs"] {
        assert!(refused.message.contains(want), "{want:?} not in {}", refused.message);
    }
    // Without a merge, the same edit is the protected paths of old.
    let c = w.candidate(&w.s0, false, &[("src/kernel.rs", "fn main() { evil() }\n")])?;
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &w.s0, &c)?;
    let refused = got.expect_err("a kernel edit on the running species commit");
    assert!(refused.message.starts_with("protected paths changed: src/kernel.rs."), "{refused:?}");
    Ok(())
}

#[test]
fn the_species_only_moves_forward() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let g = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let c = w.candidate(&w.s0, false, &[("body/main.rs", "fn body() { /* older */ }\n")])?;
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &g, &c)?;
    let refused = got.expect_err("back to s0");
    let want = format!("would move the species back from {} to {}", &s1[..7], &w.s0[..7]);
    assert!(refused.message.contains(&want), "{}", refused.message);
    assert!(refused.counts);
    Ok(())
}

#[test]
fn a_failed_fetch_refuses_without_a_verdict() -> Res<()> {
    let mut w = World::new()?;
    w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    w.host.stop();
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &w.s0, &c)?;
    let refused = got.expect_err("the remote is gone");
    assert!(!refused.counts, "a failed fetch is not counted: {refused:?}");
    assert!(refused.message.contains("could not be fetched"), "{}", refused.message);
    assert!(refused.message.contains("origin/main"), "{}", refused.message);
    Ok(())
}

#[test]
fn a_fetch_that_hangs_is_given_up_at_its_limit() -> Res<()> {
    let w = World::new()?;
    w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    // A remote that takes the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}/species.git", silent.local_addr()?.port());
    git(&w.home, &["remote", "add", "silent", &url])?;
    let held = std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(1).collect();
        std::thread::sleep(std::time::Duration::from_secs(5));
        drop(held);
    });
    let settings = World::settings("auto", "TENERAL_UPSTREAM=silent/main\n")?;
    let started = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(1);
    let got = w.judge_within(limit, &settings, &w.signers("")?, &w.s0, &c)?;
    let took = started.elapsed();
    let refused = got.expect_err("the fetch hangs");
    assert!(refused.message.contains("could not be fetched within 1 s"), "{}", refused.message);
    assert!(!refused.counts);
    assert!(took < std::time::Duration::from_secs(4), "given up after {took:?}");
    let _ = held.join();
    // The remote's address is as it was.
    assert_eq!(git(&w.home, &["remote", "get-url", "silent"])?, url);
    Ok(())
}

#[test]
fn a_local_branch_is_the_species_and_documents_need_no_consent() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[("README.md", "# teneral, better said\n"), ("docs/a.md", "a\n")], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    // The owner's local branch `species`, at s1; no remote is asked.
    git(&w.home, &["fetch", "-q", &w.bare.to_string_lossy(), "main:species"])?;
    let mut w = w;
    w.host.stop();
    let settings = World::settings("ask", "TENERAL_UPSTREAM=species\n")?;
    let got = w.judge(&settings, &w.signers("")?, &w.s0, &c)?;
    assert_eq!(got, Ok(Judgement::DocumentsOnly { species: commit(&s1) }));
    Ok(())
}

/// Our verdict and `git verify-commit`'s, for `commit` in the seed.
fn verdicts(w: &World, signers_file: &Path, commit: &str) -> Res<(bool, bool)> {
    let repo = git2::Repository::open(&w.seed)?;
    let listed = signers::load(signers_file)?;
    let ours = signers::check_commit(&repo, git2::Oid::from_str(commit)?, &listed).is_ok();
    let file = format!("gpg.ssh.allowedSignersFile={}", signers_file.display());
    let (git_ok, _) = git_status(&w.seed, &["-c", &file, "verify-commit", commit])?;
    Ok((ours, git_ok))
}

#[test]
fn with_keys_in_signers_the_species_commit_must_be_signed_by_one() -> Res<()> {
    let w = World::new()?;
    let (maintainer, line) = w.key("maintainer")?;
    let (stranger, _) = w.key("stranger")?;
    let listed = w.signers(&line)?;
    let settings = World::settings("auto", "")?;
    // (signing key, whether it passes, what the refusal says)
    let cases = [
        (None, false, "it is not signed"),
        (Some(stranger.as_path()), false, "a key SIGNERS does not list"),
        (Some(maintainer.as_path()), true, ""),
    ];
    for (n, (key, passes, why)) in cases.into_iter().enumerate() {
        let kernel = format!("fn main() {{ println!(\"v{n}\"); }}\n");
        let s = w.publish(&[("src/kernel.rs", kernel.as_str())], key)?;
        let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
        let got = w.judge(&settings, &listed, &w.s0, &c)?;
        assert_eq!(verdicts(&w, &listed, &s)?, (passes, passes), "ours and git's agree on {n}");
        match got {
            Ok(Judgement::Species { species, .. }) if passes => assert_eq!(species, commit(&s)),
            Err(r) if !passes => {
                assert!(r.message.contains(why) && r.message.contains(&s), "{}", r.message);
                assert!(r.counts, "{r:?}");
            }
            other => panic!("case {n}: {other:?}"),
        }
        // The same commit passes with a SIGNERS that lists no key.
        let none = w.judge(&settings, &w.signers("")?, &w.s0, &c)?;
        assert!(none.is_ok(), "case {n} without keys: {none:?}");
    }
    Ok(())
}

#[test]
fn an_acceptance_planted_as_a_link_is_not_taken() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    // A link named like an acceptance, pointing at a file that holds one.
    let elsewhere = w.dir.path().join("elsewhere");
    std::fs::write(&elsewhere, format!("{s1}\nctl\n"))?;
    let owner = w.home.join(".teneral/owner");
    std::fs::create_dir_all(&owner)?;
    std::os::unix::fs::symlink(&elsewhere, owner.join(".1-1-00000000.accept"))?;
    let got = w.judge(&World::settings("ask", "")?, &w.signers("")?, &w.s0, &c)?;
    let refused = got.expect_err("the link is no acceptance");
    assert_eq!(refused.awaiting, Some(commit(&s1)), "{refused:?}");
    assert!(w.events("species.accepted").is_empty());
    assert!(!owner.join(".1-1-00000000.accept").exists(), "the link was removed");
    let record = std::fs::read_to_string(w.home.join(".teneral/species.json"))?;
    let record: serde_json::Value = serde_json::from_str(&record)?;
    assert_eq!(record["accepted"], serde_json::json!([]), "nothing accepted: {record}");
    assert_eq!(record["asked"], s1.as_str());
    Ok(())
}

#[test]
fn in_a_shallow_clone_the_refusal_says_to_unshallow() -> Res<()> {
    let mut w = World::new()?;
    w.publish(&[KERNEL_V1], None)?;
    // A lineage of the species' second commit, pushed as a branch.
    git(&w.seed, &["checkout", "-q", "-b", "lineage"])?;
    fixture::write(&w.seed, &[BODY_EDIT])?;
    git(&w.seed, &["commit", "-q", "-am", "a generation"])?;
    git(&w.seed, &["push", "-q", &w.bare.to_string_lossy(), "lineage"])?;
    git(&w.seed, &["checkout", "-q", "main"])?;
    let g = git(&w.seed, &["rev-parse", "lineage"])?;
    // The individual, cloned one commit deep: git sees no species commit under it.
    std::fs::remove_dir_all(&w.home)?;
    let url = w.host.url("species.git");
    git(w.dir.path(), &["clone", "-q", "--depth", "1", "-b", "lineage", &url, "home"])?;
    w.journal = std::sync::Arc::new(std::sync::Mutex::new(
        teneral_core::journal::writer::Journal::open(&w.home.join("memory/journal.jsonl"))?,
    ));
    w.publish(&[("src/kernel.rs", "fn main() { println!(\"v2\"); }\n")], None)?;
    git(&w.ws, &["fetch", "-q", &w.bare.to_string_lossy(), "+lineage:refs/tmp/lineage"])?;
    let c = w.candidate("refs/tmp/lineage", true, &[("body/main.rs", "fn body() { 2 }\n")])?;
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &g, &c)?;
    let refused = got.expect_err("the shared history is beyond the clone's depth");
    assert!(refused.message.contains("git fetch --unshallow"), "{}", refused.message);
    assert!(!refused.counts, "{refused:?}");
    // Once unshallowed, the same candidate is a species mutation.
    git(&w.home, &["fetch", "-q", "--unshallow", "origin"])?;
    let got = w.judge(&World::settings("auto", "")?, &w.signers("")?, &g, &c)?;
    assert!(matches!(got, Ok(Judgement::Species { .. })), "{got:?}");
    Ok(())
}

#[test]
fn without_a_species_a_kernel_edit_is_a_protected_path() -> Res<()> {
    let w = World::new()?;
    let c = w.candidate(&w.s0, false, &[("src/kernel.rs", "fn main() { evil() }\n")])?;
    // No remote origin, and HEAD detached: there is no species ref.
    git(&w.home, &["remote", "remove", "origin"])?;
    git(&w.home, &["checkout", "-q", "--detach"])?;
    let got = w.judge(&World::settings("ask", "")?, &w.signers("")?, &w.s0, &c)?;
    let refused = got.expect_err("a kernel edit");
    assert!(refused.message.starts_with("protected paths changed: src/kernel.rs."), "{refused:?}");
    assert!(refused.message.contains("there is no species"), "{}", refused.message);
    assert!(refused.counts, "{refused:?}");
    Ok(())
}

#[test]
fn a_species_commit_needing_a_newer_launcher_is_refused_for_the_owner() -> Res<()> {
    let w = World::new()?;
    let s1 = w.publish(&[KERNEL_V1, ("launch.json", "{\"launcher\": 2}\n")], None)?;
    let c = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let (settings, signers) = (World::settings("auto", "")?, w.signers("")?);
    let refused = w.judge(&settings, &signers, &w.s0, &c)?.expect_err("launcher 2 is not here");
    assert!(refused.message.contains(&s1), "{}", refused.message);
    assert!(refused.message.contains("needs launcher version 2"), "{}", refused.message);
    assert!(refused.message.contains("the owner must update the install"), "{}", refused.message);
    assert!(!refused.counts, "only the owner can mend it: not counted");
    // The same species at launcher 1 passes.
    let s2 = w.publish(&[("launch.json", "{\"launcher\": 1}\n")], None)?;
    let c2 = w.candidate(&w.s0, true, &[BODY_EDIT])?;
    let got = w.judge(&settings, &signers, &w.s0, &c2)?;
    assert_eq!(got, Ok(Judgement::Species { species: commit(&s2), from: Some(commit(&w.s0)) }));
    Ok(())
}
