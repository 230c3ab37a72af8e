//! The plans' table tests.

use std::ffi::OsString;

use teneral_cage::identity::Identity;
use teneral_cage::plan::Rlimits;

use super::*;

fn host() -> Host {
    Host {
        exec: vec!["/usr".into(), "/root/.cargo".into()],
        read: vec!["/etc".into()],
        devices: vec!["/dev/null".into()],
    }
}

fn access_of(plan: &Plan, path: &str) -> Vec<Access> {
    plan.rules.iter().filter(|r| r.path == Path::new(path)).map(|r| r.access).collect()
}

#[test]
fn generation_grants_each_part_as_the_design_table_says() {
    let tracked: Vec<String> = [
        "body",
        "src",
        "Cargo.toml",
        "BACKLOG.md",
        ".env",
        ".env.local",
        "memory",
        ".teneral",
        "evals",
    ]
    .map(String::from)
    .to_vec();
    let plan = generation(Path::new("/i"), &tracked, &host());
    let table = [
        ("/i/body", vec![Access::Read]),
        ("/i/src", vec![Access::Read]),
        ("/i/Cargo.toml", vec![Access::Read]),
        ("/i/.git", vec![Access::Read]),
        ("/i/.teneral/live", vec![Access::Exec]),
        ("/i/.teneral/candidate", vec![Access::Write]),
        ("/i/soul", vec![Access::Write]),
        ("/i/inbox", vec![Access::Write]),
        ("/i/memory", vec![Access::Write]),
        ("/i/BACKLOG.md", vec![Access::Read]),
        ("/i/.teneral/owner", vec![Access::Consume]),
        ("/i/.env", vec![]),
        ("/i/.env.local", vec![]),
        ("/i/.teneral", vec![]),
        ("/i/.teneral/auth", vec![]),
        ("/i/.teneral/state.json", vec![]),
        ("/i/evals", vec![]),
        ("/i", vec![Access::List]),
        ("/usr", vec![Access::Exec]),
        ("/dev/null", vec![Access::ReadWrite]),
    ];
    for (path, want) in table {
        assert_eq!(access_of(&plan, path), want, "{path}");
    }
    let readonly = ["/i/memory/journal.jsonl", "/i/memory/scorecard.json", "/i/memory/evals.json"]
        .map(PathBuf::from);
    assert_eq!(plan.readonly, readonly);
    assert_eq!(plan.net, Net::Loopback);
}

#[test]
fn gate_and_smoke_get_nothing_of_the_individual_and_only_loopback() {
    let plan = gate(Path::new("/c"), &["/cache".into()], &host());
    assert_eq!(access_of(&plan, "/c"), vec![Access::Write]);
    assert_eq!(access_of(&plan, "/cache"), vec![Access::Write]);
    assert_eq!(plan.net, Net::Loopback);
    assert!(plan.rules.iter().all(|r| !r.path.starts_with("/i")));
    let plan = smoke(Path::new("/c"), Path::new("/t"), &[], &host());
    assert_eq!(plan.profile, "smoke");
    assert_eq!(access_of(&plan, "/t"), vec![Access::Write]);
    assert_eq!(plan.net, Net::Loopback);
}

#[test]
fn the_model_gets_its_program_script_and_log_and_nothing_else_of_the_individual() {
    let plan = model(
        Path::new("/k/teneral"),
        &["/i/script.jsonl".into()],
        &["/i/standin.jsonl".into()],
        &host(),
    );
    let table = [
        ("/k/teneral", vec![Access::Exec]),
        ("/i/script.jsonl", vec![Access::Read]),
        ("/i/standin.jsonl", vec![Access::Write]),
        ("/i", vec![]),
        ("/i/.env", vec![]),
        ("/i/memory", vec![]),
        ("/i/soul", vec![]),
        ("/i/.teneral", vec![]),
        ("/i/.teneral/state.json", vec![]),
        ("/usr", vec![Access::Exec]),
        ("/etc", vec![Access::Read]),
        ("/dev/null", vec![Access::ReadWrite]),
    ];
    for (path, want) in table {
        assert_eq!(access_of(&plan, path), want, "{path}");
    }
    let individual: Vec<&Rule> = plan.rules.iter().filter(|r| r.path.starts_with("/i")).collect();
    assert_eq!(individual.len(), 2, "only the script and the log: {individual:?}");
    assert_eq!(plan.profile, "model");
    assert_eq!(plan.net, Net::Open, "the kernel and the bodies reach it on the host's loopback");
    assert!(plan.readonly.is_empty());
    let bare = model(Path::new("/k/teneral"), &[], &[], &host());
    assert!(bare.rules.iter().all(|r| !r.path.starts_with("/i")));
    let mut args = plan.to_args();
    args.extend(["--".into(), "/k/teneral".into(), "standin".into()]);
    assert_eq!(Plan::from_args(&args).map(|(p, _)| p), Ok(plan));
}

#[test]
fn every_profile_of_the_table_has_its_network_and_the_system_rows_first() {
    let table = [
        ("gate", Net::Loopback),
        ("smoke", Net::Loopback),
        ("organ", Net::Loopback),
        ("pack", Net::Loopback),
        ("unpack", Net::Loopback),
        ("model", Net::Open),
    ];
    let given = [PathBuf::from("/given")];
    for (profile, net) in table {
        let plan = of(profile, &[(&given, Access::Read)], &host());
        assert_eq!(plan.net, net, "{profile}");
        assert_eq!(plan.profile, profile);
        let last = plan.rules.last().map(|r| (r.path.clone(), r.access));
        assert_eq!(last, Some((PathBuf::from("/given"), Access::Read)), "{profile}");
        assert_eq!(plan.rules.len(), system(&host()).len() + 1, "{profile}");
    }
}

#[test]
fn pack_reads_the_clone_writes_only_its_output_and_has_loopback() {
    let plan = pack(Path::new("/i/.teneral/candidate"), Path::new("/i/.teneral/f"), &host());
    assert_eq!(access_of(&plan, "/i/.teneral/candidate"), vec![Access::Read]);
    assert_eq!(access_of(&plan, "/i/.teneral/f"), vec![Access::Write]);
    assert_eq!(access_of(&plan, "/i/.git"), vec![]);
    assert_eq!(access_of(&plan, "/i"), vec![]);
    assert_eq!(plan.net, Net::Loopback);
}

#[test]
fn unpack_writes_only_its_staging_directory_and_has_loopback() {
    let staging = "/i/.teneral/organs/trees/.unpack-ab-1-0";
    let plan = unpack(Path::new("/k/teneral"), Path::new(staging), &host());
    let table = [
        (staging, vec![Access::Write]),
        ("/k/teneral", vec![Access::Exec]),
        ("/i/.teneral/organs/trees", vec![]),
        ("/i/.teneral/organs/archives", vec![]),
        ("/i/.teneral/organs", vec![]),
        ("/i", vec![]),
    ];
    for (path, want) in table {
        assert_eq!(access_of(&plan, path), want, "{path}");
    }
    let granted: Vec<&Path> = plan.rules.iter().map(|r| r.path.as_path()).collect();
    let system: Vec<PathBuf> = system(&host()).into_iter().map(|r| r.path).collect();
    let beyond: Vec<&&Path> = granted.iter().filter(|p| !system.iter().any(|s| s == **p)).collect();
    assert_eq!(beyond, [&Path::new("/k/teneral"), &Path::new(staging)]);
    assert_eq!(plan.net, Net::Loopback);
    assert!(plan.readonly.is_empty() && plan.fds.is_empty());
}

#[test]
fn a_plan_survives_the_command_line() {
    let mut plan = generation(Path::new("/i"), &["src".into()], &host());
    plan.pretend_missing.push("landlock".into());
    plan.forward.push(8080);
    plan.fds.push(9);
    plan.limits = Rlimits { tasks: Some(64), address_space: Some(1 << 30), nice: None };
    plan.identity = Some(Identity { uid: 2_000_000_001, gid: 2_000_000_001 });
    let mut args = plan.to_args();
    args.extend(["--".into(), "/bin/true".into(), "x".into()]);
    let (back, argv) = Plan::from_args(&args).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(back, plan);
    assert_eq!(argv, vec![OsString::from("/bin/true"), OsString::from("x")]);
    let gate = gate(Path::new("/c"), &[], &host());
    let mut args = gate.to_args();
    args.extend(["--".into(), "true".into()]);
    assert_eq!(Plan::from_args(&args).map(|(p, _)| p), Ok(gate));
}
