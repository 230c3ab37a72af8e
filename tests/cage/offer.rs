//! Offers, as a body sees them: it can neither approve one (the owner's
//! approvals are empty files of `.teneral/owner/.approved/`, where the cage
//! lets a body remove but create nothing) nor read the individual's key or
//! the forge token (`.teneral/auth/` is not in its world).

use std::process::Command;

use teneral::confine::{host, plan};
use teneralctl::commit::Commit;

use super::*;

/// Tries each `<verb> <path>` pair given, one line of output each:
/// `<path> OK` or `<path> ERRNO <n>`.
const PROBE: &str = r#"
import os, sys
args = sys.argv[1:]
for verb, p in zip(args[0::2], args[1::2]):
    try:
        if verb == "create":
            open(p, "x").close()
        elif verb == "mkdir":
            os.mkdir(p)
        elif verb == "rename":
            os.rename(os.environ["TMPDIR"] + "/forged", p)
        elif verb == "remove":
            os.remove(p)
        else:
            open(p).read()
        print(p, "OK")
    except OSError as e:
        print(p, "ERRNO", e.errno)
"#;

#[test]
fn a_body_can_neither_approve_an_offer_nor_read_the_key_or_the_token() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-offer").tempdir()?;
    let home = dir.path().join("individual");
    std::fs::create_dir_all(&home)?;
    host::prepare_generation(&home)?;
    let approved = Commit::parse(&"a".repeat(40))?;
    let wanted = Commit::parse(&"b".repeat(40))?;
    teneralctl::owner::write_approval(&home, &approved)?;
    teneralctl::offer::key::ensure(&home)?;
    std::fs::write(home.join(".teneral/auth/github-token"), "ghp_cagetest\n")?;
    std::fs::write(home.join(".teneral/tmp/forged"), "")?;
    let forged = teneralctl::owner::approval_path(&home, &wanted);
    let approvals = home.join(".teneral/owner/.approved");
    let tries = [
        ("create", forged.clone()),
        ("create", approvals.join(".forged.tmp")),
        ("rename", teneralctl::owner::approval_path(&home, &Commit::parse(&"c".repeat(40))?)),
        ("mkdir", home.join(".teneral/owner/.approved-too")),
        ("read", home.join(".teneral/auth/offer-key")),
        ("read", home.join(".teneral/auth/github-token")),
        ("remove", teneralctl::owner::approval_path(&home, &approved)),
    ];
    let mut plan = plan::generation(&home, &[], &host::host(&[&home]));
    // The parts of an individual this one lacks (no .git, no BACKLOG.md).
    plan.rules.retain(|r| r.path.exists());
    let mut args = plan.to_args();
    args.push("--".into());
    let mut cmd = Command::new(teneral());
    cmd.arg("confine").args(args).args(["/usr/bin/python3", "-c", PROBE]);
    for (verb, path) in &tries {
        cmd.arg(verb).arg(path);
    }
    let out =
        cmd.env("TMPDIR", home.join(".teneral/tmp")).current_dir(&home).output_within(SLOW)?;
    let all =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let line = |path: &std::path::Path| {
        let prefix = format!("{} ", path.display());
        all.lines().find(|l| l.starts_with(&prefix)).unwrap_or("(no line)").to_owned()
    };
    let want = [EACCES, EACCES, EXDEV, EACCES, ENOENT, ENOENT];
    for ((_, path), errno) in tries.iter().zip(want) {
        assert_eq!(line(path), format!("{} ERRNO {errno}", path.display()), "{all}");
    }
    // Removing one only withdraws it: a body can hold an offer back, never send one.
    assert_eq!(line(&tries[6].1), format!("{} OK", tries[6].1.display()), "{all}");
    assert!(!teneralctl::owner::is_approved(&home, &wanted), "no approval was made");
    Ok(())
}

const MESSAGE: &str = "A clearer mode\n\nWhat it changes: a comment\nWhy: clarity\n\
                       Evidence: its tests\nNot verified: anything else\n";

fn git(dir: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(["-c", "user.name=Agent", "-c", "user.email=agent@localhost"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output_within(SLOW)
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        false => Err(format!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr))),
    }
}

/// The agent's change to the fixture body at the species' head `base`,
/// committed on a detached head; its commit.
fn prepared(
    home: &std::path::Path,
    base: &str,
    from: &str,
    to: &str,
) -> Result<Commit, Box<dyn std::error::Error>> {
    git(home, &["switch", "-q", "--detach", base])?;
    let main = home.join("body/src/main.rs");
    let text = std::fs::read_to_string(&main)?;
    assert!(text.contains(from), "{from:?} in the fixture body");
    std::fs::write(&main, text.replacen(from, to, 1))?;
    git(home, &["commit", "-qam", MESSAGE])?;
    Ok(Commit::parse(&git(home, &["rev-parse", "HEAD"])?)?)
}

/// The mutation gate's checks on an offer, in the cage, as the kernel runs
/// them at the body's request: a good offer passes every one (the report,
/// the pull request's text and `teneralctl offer check` list them); one
/// whose body tests fail is failed with that check named, the smoke run
/// not run, and cannot be approved.
#[test]
fn an_offer_goes_through_the_gates_in_the_cage_and_a_failing_body_test_is_named() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let ind = Individual::new("", &[])?;
    let home = ind.path();
    let base = ind.head()?;
    let env = std::fs::read_to_string(home.join(".env"))?;
    std::fs::write(home.join(".env"), format!("{env}TENERAL_UPSTREAM={base}\n"))?;
    let settings = teneral::settings::Settings::load(home)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async { teneral::spawn::start_reaper_of_own_children() })?;
    let cage = teneral::confine::Cage::decide(false, &[], teneral())?;
    let runner = runtime
        .block_on(teneral::runner::Runner::choose(settings.runner, cage))?
        .for_individual(home);
    assert!(runner.caged(), "the gates run in the cage");
    let exe = teneral();
    let kernel = teneral::offer::gates::Kernel {
        home,
        settings: &settings,
        runner: &runner,
        kernel_exe: &exe,
    };
    let gates = |c: &Commit| runtime.block_on(teneral::offer::gates::run(&kernel, c));
    let report = |answer: &Value| -> Result<Value, Box<dyn std::error::Error>> {
        let path = answer["report"].as_str().unwrap_or_default();
        Ok(serde_json::from_slice(&std::fs::read(path)?)?)
    };

    let good = prepared(home, &base, "fn main() {\n", "// The body's entry.\nfn main() {\n")?;
    let (answer, done) = teneral::offer::answer_gated(home, 1, "clear", &good, Some(&gates));
    assert!(done.is_none(), "nothing went out unapproved");
    assert_eq!(answer["state"], "waits", "{answer}");
    let kept = report(&answer)?;
    assert_eq!(kept["passed"], true, "{kept:#}");
    assert_eq!(kept["gates"]["passed"], true, "{kept:#}");
    let names: Vec<&str> = kept["gates"]["steps"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, teneral_offer_order(), "{kept:#}");
    // Judged whole: no running generation vouches for an offer's kernel,
    // and this new individual keeps no pass of it.
    for name in ["typecheck-kernel", "kernel-tests"] {
        let result = kept["gates"]["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name))
            .and_then(|s| s["result"].as_str());
        assert_eq!(result, Some("passed"), "{name}: {kept:#}");
    }
    let (_, text) = teneralctl::offer::publish::pull_text(MESSAGE, &kept, "0123abcd");
    for want in ["on this branch as on a fresh seed", "body-tests passed", "smoke passed"] {
        assert!(text.contains(want), "{want:?} in the pull request's text:\n{text}");
    }
    let out = Command::new(teneralctl())
        .args(["offer", "check", "offer/clear", "--base", &base, "-d"])
        .arg(home)
        .output_within(SLOW)?;
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    for want in
        ["ok   gate typecheck-kernel", "ok   gate body-tests", "ok   gate smoke", "\npassed"]
    {
        assert!(printed.contains(want), "{want:?} in\n{printed}");
    }

    let failing = "        assert_eq!(super::MODE, \"never\", \"failing on purpose\");\n";
    let bad = prepared(home, &base, MODE_TEST, &format!("{MODE_TEST}{failing}"))?;
    let (answer, done) = teneral::offer::answer_gated(home, 2, "broken", &bad, Some(&gates));
    assert!(done.is_none());
    assert_eq!(answer["state"], "failed", "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains("FAIL gate body-tests"), "{message}");
    let kept = report(&answer)?;
    assert_eq!(kept["passed"], false, "{kept:#}");
    let step = |name: &str| {
        kept["gates"]["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name))
            .map(|s| s["result"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(step("body-tests").as_deref(), Some("failed"), "{kept:#}");
    assert_eq!(step("smoke").as_deref(), Some("not run"), "{kept:#}");
    let output = kept["gates"]["steps"].to_string();
    assert!(output.contains("failing on purpose"), "the failing test's words kept: {output}");
    let signed = answer["offer"].as_str().unwrap_or_default();
    let refused = teneralctl::offer::manage::approve(home, signed)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(refused.contains("failed its check"), "a failed offer cannot be approved: {refused}");
    Ok(())
}

/// The gate's steps in order.
fn teneral_offer_order() -> Vec<&'static str> {
    teneralctl::offer::gates::ORDER.to_vec()
}

/// The first line of the fixture body's one test (as in tests/gate.rs).
const MODE_TEST: &str = "    fn the_mode_is_one_of_the_known() {\n";
