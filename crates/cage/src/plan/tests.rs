//! The plan's round trip through the helper's command line.

use super::*;

#[test]
fn a_plan_survives_the_command_line() {
    let mut plan = Plan::empty("generation", Net::Loopback);
    let rule = |path: &str, access| Rule { path: PathBuf::from(path), access };
    plan.rules = vec![
        rule("/usr", Access::Exec),
        rule("/etc", Access::Read),
        rule("/i/soul", Access::Write),
        rule("/i/.teneral/owner", Access::Consume),
        rule("/dev/null", Access::ReadWrite),
        rule("/i", Access::List),
    ];
    plan.readonly.push("/i/journal".into());
    plan.socket_dirs.push("/run/events".into());
    plan.pretend_missing.push("landlock".into());
    plan.forward.push(8080);
    plan.fds.push(9);
    plan.limits = Rlimits { tasks: Some(64), address_space: Some(1 << 30), nice: Some(19) };
    plan.identity = Some(Identity { uid: 2_000_000_001, gid: 2_000_000_001 });
    let mut args = plan.to_args();
    args.extend(["--".into(), "/bin/true".into(), "x".into()]);
    let (back, argv) = Plan::from_args(&args).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(back, plan);
    assert_eq!(argv, vec![OsString::from("/bin/true"), OsString::from("x")]);
    let open = Plan::empty("model", Net::Open);
    let mut args = open.to_args();
    args.extend(["--".into(), "true".into()]);
    assert_eq!(Plan::from_args(&args).map(|(p, _)| p), Ok(open));
}

#[test]
fn malformed_command_lines_are_refused() {
    let bad: &[&[&str]] = &[
        &["--profile", "gate", "--write", "/c"],
        &["--profile", "gate", "--"],
        &["--write", "/c", "--", "true"],
        &["--profile", "gate", "--net", "wide", "--", "true"],
        &["--profile", "gate", "--bogus", "x", "--", "true"],
        &["--profile", "gate", "--keep-fd", "2", "--", "true"],
        &["--profile", "gate", "--keep-fd", "x", "--", "true"],
        &["--profile", "gate", "--tasks-max", "-1", "--", "true"],
        &["--profile", "gate", "--nice", "20", "--", "true"],
        &["--profile", "gate", "--nice", "-5", "--", "true"],
        &["--profile", "gate", "--identity", "0:5", "--", "true"],
        &["--profile", "gate", "--identity", "5", "--", "true"],
        &["--profile"],
    ];
    for args in bad {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        assert!(Plan::from_args(&args).is_err(), "{args:?}");
    }
}
