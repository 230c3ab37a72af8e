//! A witness with the mutation gate's checks and the owner's `--also`
//! command, against the stand-in forge: the kernel program runs both in the
//! cage on the pull request's tree; the posted report has a line for each
//! gate and one for the command (pass or fail, its exit status), and what
//! the command printed stays here, in the kept report.

use super::publish::{offered, run, strangers_pull};

#[test]
fn a_witness_runs_the_gates_then_the_owners_command_and_posts_its_exit_not_its_output() {
    // The gates and the command run in the cage, which cannot be made inside
    // a gate check (cages do not nest; the gate sets TENERAL_TEST_NO_CAGE).
    if std::env::var_os("TENERAL_TEST_NO_CAGE").is_some() {
        eprintln!("skipped: the witness's gates need the cage (TENERAL_TEST_NO_CAGE is set)");
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
