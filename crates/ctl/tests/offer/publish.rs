//! Approving and publishing an offer against the stand-in forge
//! (`teneral_testkit::forge`): refused while not approved, approved from
//! `teneralctl` and from talk, published (the branch on the forge, the pull
//! request's text with the kernel's block), resumed after a failure between
//! the push and the pull request without a second push, refused with
//! "rebase" when the species moved on; the token in no process's argv or
//! environment, no git configuration, journal or output.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::*;
use teneral_testkit::forge::Forge;

const TOKEN: &str = "ghp_StandInForgeToken0123456789abcdefXY";

pub(super) struct Published {
    pub(super) home: Home,
    pub(super) forge: Forge,
    _root: tempfile::TempDir,
    commit: String,
}

pub(super) fn run(home: &Home, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_teneralctl"));
    cmd.args(args).arg("-d").arg(&home.dir);
    let out = teneral_testkit::run_fed_within(&mut cmd, Some(stdin.as_bytes()), SLOW, "teneralctl")
        .expect("teneralctl ends within its limit");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The species on the forge, the individual's checkout of it, a checked
/// offer `offer/fast` and the token stored.
pub(super) fn offered() -> Published {
    let home = species();
    let root = tempfile::tempdir().expect("the forge's root");
    let bare = root.path().join("o/species.git");
    std::fs::create_dir_all(&bare).expect("mkdir");
    git(&bare, &["init", "-q", "--bare"]);
    git(&home.dir, &["push", "-q", &bare.display().to_string(), "main"]);
    let forge = Forge::start(root.path(), TOKEN);
    git(&home.dir, &["remote", "add", "origin", &forge.url("o/species.git")]);
    write(
        &home,
        ".env",
        &format!("TENERAL_UPSTREAM=origin/main\nTENERAL_FORGE_API={}\n", forge.api()),
    );
    write(&home, "body/index.ts", "export const x = 2;\n");
    commit(&home, MESSAGE, true);
    let (code, out, err) =
        ctl(&home, &["offer", "check", "offer/fast", "--base", "main", "--no-gates"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&home, &["offer", "token"], "ghp_wrongwrongwrong\n");
    assert_eq!(code, 1, "a wrong token is refused: {out}{err}");
    assert!(err.contains("the forge refused the token (401)"), "{err}");
    assert!(!home.dir.join(".teneral/auth/github-token").exists(), "a wrong token is not stored");
    let (code, out, err) = run(&home, &["offer", "token"], &format!("{TOKEN}\n"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("the token works for o/species") && !out.contains(TOKEN), "{out}");
    let commit = head(&home);
    Published { home, forge, _root: root, commit }
}

fn bare_ref(p: &Published, name: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--verify", "-q", name])
        .current_dir(p.forge.root.join("o/species.git"))
        .output_within(SLOW)
        .expect("git runs");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The individual's id as the publish makes it, from the branch it pushed.
fn contrib_branch(p: &Published) -> String {
    let out = Command::new("git")
        .args(["for-each-ref", "--format=%(refname)", "refs/heads/contrib/"])
        .current_dir(p.forge.root.join("o/species.git"))
        .output_within(SLOW)
        .expect("git runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Every process's argv and environment, read again and again while
/// `during` runs: where `secret` was seen, how many files were read, and
/// how many git children of the publish (their argv names the one-push
/// credential helper) were caught alive.
fn watch_proc<T>(
    secrets: &[String],
    during: impl FnOnce() -> T,
) -> (T, BTreeSet<String>, usize, usize) {
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new((BTreeSet::new(), 0usize, BTreeSet::new())));
    let (d, s, needles) = (done.clone(), seen.clone(), secrets.to_vec());
    let watcher = std::thread::spawn(move || {
        let me = std::process::id().to_string();
        while !d.load(Ordering::Relaxed) {
            for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let pid = entry.file_name().to_string_lossy().into_owned();
                if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
                    continue;
                }
                let mut s = s.lock().expect("the findings");
                for file in ["cmdline", "environ"] {
                    if let Ok(bytes) = std::fs::read(entry.path().join(file)) {
                        s.1 += 1;
                        for needle in needles.iter().map(|n| n.as_bytes()) {
                            if bytes.windows(needle.len()).any(|w| w == needle) {
                                s.0.insert(format!("{pid}/{file}"));
                            }
                        }
                        let helper = b"credential.helper=!f()";
                        if file == "cmdline" && bytes.windows(helper.len()).any(|w| w == helper) {
                            s.2.insert(pid.clone());
                        }
                    }
                }
            }
        }
    });
    let result = during();
    done.store(true, Ordering::Relaxed);
    watcher.join().expect("the watcher ends");
    let (found, reads, gits) = seen.lock().expect("the findings").clone();
    (result, found, reads, gits.len())
}

/// The token, and each line of the private key's body.
fn secrets(p: &Published) -> Vec<String> {
    let key = std::fs::read_to_string(p.home.dir.join(".teneral/auth/offer-key")).expect("the key");
    let mut all: Vec<String> = key
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 20)
        .map(str::to_owned)
        .collect();
    assert!(!all.is_empty(), "the key has a body");
    all.push(TOKEN.to_owned());
    all
}

pub(super) fn no_token_left(p: &Published, printed: &str) {
    assert!(!printed.contains(TOKEN), "the token was printed: {printed}");
    for file in [".git/config", "memory/journal.jsonl"] {
        let text = std::fs::read_to_string(p.home.dir.join(file)).unwrap_or_default();
        assert!(!text.contains(TOKEN), "the token is in {file}");
    }
    let left: Vec<String> = std::fs::read_dir(p.home.dir.join(".teneral/auth"))
        .expect("the auth directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".push-"))
        .collect();
    assert!(left.is_empty(), "the push's credential file is removed: {left:?}");
}

#[test]
fn an_offer_waits_for_approval_then_goes_out_with_the_kernels_block_and_no_token_anywhere() {
    let p = offered();
    let short = &p.commit[..7];
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("waits for its owner's approval"), "{err}");
    let (_, listed, _) = run(&p.home, &["offer", "list"], "");
    assert!(
        listed.contains(&format!("{short} offer/fast Faster lookups: passed; waits for you")),
        "{listed}"
    );
    // A line from the owner, or a file in inbox/, is no approval.
    write(&p.home, "inbox/approve.txt", &format!("/approve {short}\n"));
    let (code, _, _) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 1);
    assert_eq!(p.forge.state.lock().expect("state").pushes, 0, "nothing went out");

    let (code, out, err) = run(&p.home, &["offer", "approve", short], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("approved {short}")), "{out}");
    let approval = p.home.dir.join(format!(".teneral/owner/.approved/{}.approve", p.commit));
    assert_eq!(std::fs::metadata(&approval).map(|m| m.len()).ok(), Some(0), "an empty dot-file");

    p.forge.state.lock().expect("state").hold_git = std::time::Duration::from_millis(400);
    let ((code, out, err), found, reads, gits) =
        watch_proc(&secrets(&p), || run(&p.home, &["offer", "publish", short], ""));
    assert_eq!(code, 0, "{out}{err}");
    assert!(found.is_empty(), "the token or the private key was in {found:?}");
    assert!(reads > 100, "the watcher read {reads} files of /proc");
    assert!(gits >= 1, "the watcher caught the publish's git children ({gits})");
    no_token_left(&p, &format!("{out}{err}"));

    let branch = contrib_branch(&p);
    assert!(branch.starts_with("refs/heads/contrib/") && branch.ends_with("/fast"), "{branch}");
    assert_eq!(bare_ref(&p, &branch).as_deref(), Some(p.commit.as_str()));
    let state = p.forge.state.lock().expect("state");
    assert_eq!(state.pushes, 1);
    let pull = &state.pulls[0];
    assert_eq!(pull["title"], "Faster lookups");
    let text = pull["body"].as_str().unwrap_or_default();
    assert!(text.starts_with("What it changes: the body's index"), "{text}");
    for want in [
        "Offered by teneral individual",
        p.commit.as_str(),
        "SHA256:",
        "not checked by its install",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    assert_eq!(pull["base"]["ref"], "main");
    let url = pull["html_url"].as_str().unwrap_or_default().to_owned();
    assert!(out.contains(&url), "{out}");
    drop(state);
    assert!(!approval.exists(), "the approval is used up");
    let journal =
        std::fs::read_to_string(p.home.dir.join("memory/journal.jsonl")).unwrap_or_default();
    let event: serde_json::Value = journal
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|e: &serde_json::Value| e["type"] == "offer.published")
        .expect("offer.published is journaled");
    assert_eq!(event["offer"], p.commit.as_str());
    assert_eq!(event["pull"], url.as_str());
    assert_eq!(format!("refs/heads/{}", event["branch"].as_str().unwrap_or("")), branch);
    let (_, listed, _) = run(&p.home, &["offer", "list"], "");
    assert!(listed.contains(&format!("published: {url}")), "{listed}");
}

#[test]
fn approved_from_talk_a_failure_after_the_push_resumes_without_pushing_again() {
    let p = offered();
    let short = &p.commit[..7];
    // The plain client as typed at a terminal (from a pipe every line is
    // text for the agent, and no line is ever an approval).
    let typed = format!("/offers\n/approve {short}\n/quit\n");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let options = teneralctl::talk::TalkOptions::new(p.home.dir.clone());
    let code =
        teneralctl::talk::session(&options, std::io::Cursor::new(typed), true, &mut out, &mut err)
            .expect("the talk session runs");
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("waits for you") && err.contains(&format!("approved {short}")), "{err}");
    p.forge.state.lock().expect("state").fail_next_pull = true;
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("502"), "{err}");
    let approval = p.home.dir.join(format!(".teneral/owner/.approved/{}.approve", p.commit));
    assert!(approval.exists(), "a failure after the push keeps the approval");
    assert_eq!(bare_ref(&p, &contrib_branch(&p)).as_deref(), Some(p.commit.as_str()));
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("already pushed"), "{out}");
    let state = p.forge.state.lock().expect("state");
    assert_eq!(state.pushes, 1, "no second push");
    assert_eq!(state.pulls.len(), 1, "the pull request that already existed is taken");
    assert!(out.contains(state.pulls[0]["html_url"].as_str().unwrap_or("none")), "{out}");
    no_token_left(&p, &format!("{out}{err}"));
}

#[test]
fn when_the_species_moved_on_nothing_is_pushed_and_the_agent_is_told_to_rebase() {
    let p = offered();
    let short = &p.commit[..7];
    let other = tempfile::tempdir().expect("another checkout");
    let bare = p.forge.root.join("o/species.git");
    git(other.path(), &["clone", "-q", &bare.display().to_string(), "c"]);
    let c = other.path().join("c");
    std::fs::write(c.join("BACKLOG.md"), "# Backlog\n- more\n").expect("write");
    git(&c, &["commit", "-qam", "The species moves on"]);
    git(&c, &["push", "-q", "origin", "main"]);
    let (code, _, _) = run(&p.home, &["offer", "approve", short], "");
    assert_eq!(code, 0);
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("the species moved on") && err.contains("rebase"), "{err}");
    assert_eq!(p.forge.state.lock().expect("state").pushes, 0, "nothing was pushed");
    assert_eq!(contrib_branch(&p), "");
}

#[test]
fn under_off_nothing_goes_out_and_under_auto_a_passed_check_needs_no_approval() {
    let p = offered();
    let short = &p.commit[..7];
    let env = std::fs::read_to_string(p.home.dir.join(".env")).expect(".env");
    write(&p.home, ".env", &format!("{env}TENERAL_PUBLISH=off\n"));
    let (code, _, _) = run(&p.home, &["offer", "approve", short], "");
    assert_eq!(code, 0);
    let (code, _, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 1);
    assert!(err.contains("TENERAL_PUBLISH is off"), "{err}");
    write(&p.home, ".env", &format!("{env}TENERAL_PUBLISH=auto\n"));
    std::fs::remove_dir_all(p.home.dir.join(".teneral/owner/.approved")).expect("no approval");
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(p.forge.state.lock().expect("state").pushes, 1);
}

#[test]
fn a_failed_or_unchecked_commit_cannot_be_approved() {
    let p = offered();
    let (code, _, err) = run(&p.home, &["offer", "approve", &p.commit[..7]], "");
    assert_eq!(code, 0, "{err}");
    write(&p.home, "body/a.ts", "export const a = 1;\n");
    commit(&p.home, MESSAGE, false);
    let unchecked = head(&p.home);
    let (code, _, err) = run(&p.home, &["offer", "approve", &unchecked[..7]], "");
    assert_eq!(code, 1);
    assert!(err.contains("was never checked"), "{err}");
    let (code, _, _) =
        ctl(&p.home, &["offer", "check", "offer/fast", "--base", "main", "--no-gates"]);
    assert_eq!(code, 1, "an unsigned commit fails");
    let (code, _, err) = run(&p.home, &["offer", "approve", &unchecked[..7]], "");
    assert_eq!(code, 1);
    assert!(err.contains("failed its check"), "{err}");
}

/// `teneralctl offer publish` reads `.env` by the kernel's reader: a quoted
/// value, an `export` line or a second `TENERAL_PUBLISH` is refused with the
/// very message the kernel gives, and nothing goes out (a lenient reading
/// would take each of them as `auto` and publish the checked offer).
#[test]
fn a_dotenv_the_kernel_refuses_stops_publish_with_the_kernels_message() {
    let p = offered();
    let short = &p.commit[..7];
    let path = p.home.dir.join(".env");
    let env = std::fs::read_to_string(&path).expect(".env");
    for line in [
        "TENERAL_PUBLISH=\"auto\"\n",
        "export TENERAL_PUBLISH=auto\n",
        "TENERAL_PUBLISH=off\nTENERAL_PUBLISH=auto\n",
    ] {
        let text = format!("{env}{line}");
        write(&p.home, ".env", &text);
        let kernels = teneral_core::dotenv::read(&text, &path.display().to_string())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("the kernel's reader takes {line:?}"));
        let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
        assert_eq!(code, 1, "{line:?} was taken: {out}{err}");
        assert!(err.contains(&kernels), "{line:?}: {err} lacks the kernel's {kernels}");
        assert_eq!(p.forge.state.lock().expect("state").pushes, 0, "{line:?}: nothing went out");
    }
    write(&p.home, ".env", &format!("{env}TENERAL_PUBLISH=auto\n"));
    let (code, out, err) = run(&p.home, &["offer", "publish", short], "");
    assert_eq!(code, 0, "written as the kernel reads it, auto publishes: {out}{err}");
    assert_eq!(p.forge.state.lock().expect("state").pushes, 1);
}
