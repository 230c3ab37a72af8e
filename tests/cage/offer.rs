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
    let out = cmd.env("TMPDIR", home.join(".teneral/tmp")).current_dir(&home).output()?;
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
