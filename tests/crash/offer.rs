//! Kills in the kernel's answer to a body's `offer.requested`, at its named
//! points: after the request is journaled and the work began
//! (`offer.answering`), after the offer went out (`offer.published.
//! journaled`), and after the start answered it (`offer.reconciled`). Each
//! request must end with exactly one `offer.answered` naming it: `refused`
//! ("the kernel stopped before answering; ask again") when nothing says how
//! far it got, `published` from its `offer.published` when it went out.
//!
//! The fixture body in mode `offer` asks for the commit an owner line names.

use std::path::Path;
use std::time::Duration;

use git2::Repository;
use serde_json::Value;

use super::{die_at, LONG, SHORT};
use crate::common::*;

use teneral_testkit::forge;

const TOKEN: &str = "ghp_CrashSideForgeToken0123456789abcdefXY";

const MESSAGE: &str = "A quieter fixture\n\nWhat it changes: a comment\nWhy: a test\n\
                       Evidence: none needed\nNot verified: anything\n";

/// The answers naming request `seq`.
fn answers_to(ind: &Individual, seq: &Value) -> Vec<Value> {
    ind.events("offer.answered").into_iter().filter(|e| &e["request"] == seq).collect()
}

/// Starts the kernel (no crash point) and waits until it serves: its own
/// `kernel.started` is journaled, so the start's reconcile is over.
fn start_serving(ind: &Individual) -> Result<Kernel, Box<dyn std::error::Error>> {
    let kernel = ind.start()?;
    let pid = u64::from(kernel.pid());
    ind.wait_for("the kernel serving", SHORT, |e| {
        e["type"] == "kernel.started" && e["pid"].as_u64() == Some(pid)
    })?;
    Ok(kernel)
}

/// The offer's commit: HEAD with one comment more in the body, made in the
/// main repository (so the kernel takes it as it is), no ref moved.
fn prepared(home: &Path) -> Result<String, Box<dyn std::error::Error>> {
    let repo = Repository::open(home)?;
    let head = repo.head()?.peel_to_commit()?;
    let path = "body/src/main.rs";
    let text = std::fs::read_to_string(home.join(path))?;
    let blob = repo.blob(format!("{text}// A quieter fixture.\n").as_bytes())?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(path, blob, git2::FileMode::Blob);
    let tree = repo.find_tree(update.create_updated(&repo, &head.tree()?)?)?;
    let who = git2::Signature::now("Agent", "agent@teneral.invalid")?;
    Ok(repo.commit(None, &who, &who, MESSAGE, &tree, &[&head])?.to_string())
}

#[test]
fn an_offer_request_cut_short_by_a_kill_is_answered_once_by_the_next_start() -> TestResult {
    let ind = Individual::with_mode("offer", "", &[])?;
    let asked_by = ind.head()?;
    let offered = prepared(ind.path())?;
    die_at(&ind, "offer.answering", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        teneral_core::owner::write_line(ind.path(), &offered)?;
        Ok(())
    })?;
    let asked = ind.events("offer.requested").pop().expect("the request was journaled");
    assert_eq!(asked["head"], offered.as_str());
    assert!(answers_to(&ind, &asked["seq"]).is_empty(), "no answer before the start");

    // The next start answers it, and dies right after its answer is
    // journaled, before its own kernel.started.
    die_at(&ind, "offer.reconciled", || Ok(()))?;
    assert_eq!(answers_to(&ind, &asked["seq"]).len(), 1, "answered by the start");

    // A third start finds it answered: nothing more.
    let _kernel = start_serving(&ind)?;
    std::thread::sleep(Duration::from_secs(1));
    let answers = answers_to(&ind, &asked["seq"]);
    assert_eq!(answers.len(), 1, "answered exactly once: {answers:?}");
    let answer = &answers[0];
    assert_eq!(answer["state"], "refused", "{answer}");
    assert_eq!(answer["message"], "the kernel stopped before answering; ask again", "{answer}");
    assert_eq!(answer["commit"], asked_by.as_str(), "journaled as the asking generation's");
    Ok(())
}

#[test]
fn an_offer_published_just_before_a_kill_is_answered_published_once() -> TestResult {
    let ind = Individual::with_mode("offer", "", &[])?;
    let home = ind.path();
    // The species: the individual's branch, on a stand-in forge.
    let branch = Repository::open(home)?.head()?.shorthand().unwrap_or("master").to_owned();
    let root = tempfile::tempdir()?;
    let bare = root.path().join("o/species.git");
    Repository::init_bare(&bare)?;
    let mut push = std::process::Command::new("git");
    push.arg("-C").arg(home).args(["push", "-q"]).arg(&bare);
    push.arg(format!("HEAD:refs/heads/{branch}"));
    succeed_within(&mut push, QUICK, "publishing the offer's branch")?;
    let forge = forge::Forge::start(root.path(), TOKEN);
    Repository::open(home)?.remote("origin", &forge.url("o/species.git"))?;
    let mut env = std::fs::read_to_string(home.join(".env"))?;
    env.push_str(&format!(
        "TENERAL_UPSTREAM={branch}\nTENERAL_FORGE_API={}\nTENERAL_PUBLISH=auto\n",
        forge.api()
    ));
    std::fs::write(home.join(".env"), env)?;
    let token = teneralctl::offer::token::Token::new(TOKEN).expect("a token");
    teneralctl::offer::token::store(home, &token)?;
    let offered = prepared(home)?;

    die_at(&ind, "offer.published.journaled", || {
        ind.wait_for("the birth turn", LONG, |e| e["type"] == "turn.ended")?;
        teneral_core::owner::write_line(home, &offered)?;
        Ok(())
    })?;
    let asked = ind.events("offer.requested").pop().expect("the request was journaled");
    let published = ind.events("offer.published").pop().expect("the publish was journaled");
    assert_eq!(published["request"], asked["seq"], "the publish names its request");
    assert!(answers_to(&ind, &asked["seq"]).is_empty(), "no answer before the start");
    assert_eq!(forge.state.lock().expect("the forge's state").pushes, 1);

    let _kernel = start_serving(&ind)?;
    std::thread::sleep(Duration::from_secs(1));
    let answers = answers_to(&ind, &asked["seq"]);
    assert_eq!(answers.len(), 1, "answered exactly once: {answers:?}");
    let answer = &answers[0];
    assert_eq!(answer["state"], "published", "{answer}");
    assert_eq!(answer["pull"], published["pull"], "{answer}");
    assert_eq!(answer["offer"], published["offer"], "{answer}");
    assert_eq!(answer["branch"], "offer/crashed", "{answer}");
    let report = answer["report"].as_str().unwrap_or_default();
    assert!(Path::new(report).is_file(), "the kept report: {answer}");
    let said = ind.events("kernel.notice").iter().any(|e| {
        let text = e["text"].as_str().unwrap_or_default();
        text.contains("answered the offer request crashed") && text.contains("published as")
    });
    assert!(said, "the start said so: {:?}", ind.events("kernel.notice"));
    let state = forge.state.lock().expect("the forge's state");
    assert_eq!((state.pushes, state.pulls.len()), (1, 1), "nothing went out twice");
    Ok(())
}
