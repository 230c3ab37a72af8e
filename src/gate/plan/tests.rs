use std::path::Path;
use std::time::Duration;

use super::*;

fn inputs<'a>(
    kernel_tree: &'a str,
    body_tree: &'a str,
    toolchain: &'a str,
    kernel: &'a str,
) -> Inputs<'a> {
    Inputs {
        checkout: Path::new("/ind/.teneral/gate/checkout"),
        kernel_tree,
        body_tree,
        running_kernel_tree: None,
        toolchain,
        kernel_identity: kernel,
        kernel_copy: Path::new("/ind/.teneral/gate/target/teneral-kernel"),
        socket_dir: Path::new("/tmp/teneral-0/g-abc"),
        limits: Limits::none(Duration::from_secs(5))
            .with_runtime_max(Some(Duration::from_secs(600))),
        test_threads: 8,
    }
}

fn keys(plan: &[PlannedCheck]) -> Vec<(&'static str, String)> {
    plan.iter().map(|c| (c.name, c.memo_key.clone())).collect()
}

#[test]
fn every_check_in_order_with_its_place_and_command() {
    let memo = memo::Memo::default();
    let plan = plan(&inputs("K", "B", "rustc 1", " kernel 1"), &memo);
    let table: Vec<(&str, &str, String, bool, Reads, bool)> = plan
        .iter()
        .map(|c| {
            let dir = if c.dir.ends_with("body") { "body" } else { "checkout" };
            (c.name, dir, c.args.join(" "), c.counts_tests, c.reads, !c.runs())
        })
        .collect();
    let want: Vec<(&str, &str, String, bool, Reads, bool)> = vec![
        (
            "typecheck-kernel",
            "checkout",
            "check --workspace --lib --bins --tests --offline --locked".into(),
            false,
            Reads::Kernel,
            false,
        ),
        ("format-body", "body", "fmt --check".into(), false, Reads::Body, false),
        (
            "lint-body",
            "body",
            "clippy --all-targets --offline --locked -- -D warnings".into(),
            false,
            Reads::Body,
            false,
        ),
        (
            "kernel-tests",
            "checkout",
            "test --workspace --lib --bins --tests --offline --locked".into(),
            true,
            Reads::Kernel,
            false,
        ),
        ("body-tests", "body", "test --offline --locked".into(), true, Reads::Body, false),
    ];
    assert_eq!(table, want);
    // The checks that compile the whole kernel get three times one check's.
    let limits: Vec<_> = plan.iter().map(|c| (c.name, c.limits.runtime_max)).collect();
    let minutes = |m: u64| Some(Duration::from_secs(m * 60));
    let want = [
        ("typecheck-kernel", minutes(30)),
        ("format-body", minutes(10)),
        ("lint-body", minutes(10)),
        ("kernel-tests", minutes(30)),
        ("body-tests", minutes(10)),
    ];
    assert_eq!(limits, want);
}

#[test]
fn each_check_gets_only_the_variables_it_needs() {
    let plan = plan(&inputs("K", "B", "rustc 1", " kernel 1"), &memo::Memo::default());
    let env = |name: &str| -> Vec<String> {
        let check = plan.iter().find(|c| c.name == name).expect("the check is planned");
        check.env.iter().map(|(k, v)| format!("{k}={}", v.to_string_lossy())).collect()
    };
    assert_eq!(
        env("kernel-tests"),
        ["TENERAL_TEST_NO_CAGE=1", "TENERAL_SOCKET_DIR=/tmp/teneral-0/g-abc"]
    );
    assert_eq!(
        env("body-tests"),
        ["TENERAL_BIN=/ind/.teneral/gate/target/teneral-kernel", "RUST_TEST_THREADS=8"]
    );
    assert_eq!([test_threads(1), test_threads(2), test_threads(16)], [8, 8, 64]);
    for name in ["typecheck-kernel", "format-body", "lint-body"] {
        assert_eq!(env(name), Vec::<String>::new(), "{name}");
    }
}

/// Which checks' keys change when one input changes: a key changes exactly
/// when something its verdict depends on changed.
#[test]
fn a_key_changes_exactly_with_what_the_check_reads() {
    let base = keys(&plan(&inputs("K", "B", "rustc 1", " kernel 1"), &memo::Memo::default()));
    let cases: &[(&str, Inputs<'_>, &[&str])] = &[
        ("nothing", inputs("K", "B", "rustc 1", " kernel 1"), &[]),
        (
            "the body's tree",
            inputs("K", "B2", "rustc 1", " kernel 1"),
            &["format-body", "lint-body", "body-tests"],
        ),
        (
            "the kernel's tree",
            inputs("K2", "B", "rustc 1", " kernel 1"),
            &["typecheck-kernel", "kernel-tests"],
        ),
        ("the kernel binary", inputs("K", "B", "rustc 1", " kernel 2"), &["body-tests"]),
        (
            "the toolchain",
            inputs("K", "B", "rustc 2", " kernel 1"),
            &["typecheck-kernel", "format-body", "lint-body", "kernel-tests", "body-tests"],
        ),
    ];
    for (what, changed, want) in cases {
        let now = keys(&plan(changed, &memo::Memo::default()));
        let differ: Vec<&str> =
            base.iter().zip(&now).filter(|(a, b)| a.1 != b.1).map(|(a, _)| a.0).collect();
        assert_eq!(&differ, want, "when {what} changes");
    }
    let distinct: std::collections::BTreeSet<&String> = base.iter().map(|(_, k)| k).collect();
    assert_eq!(distinct.len(), base.len(), "no two checks share a key");
}

#[test]
fn a_body_only_mutation_reuses_every_kernel_check() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut memo = memo::Memo::load(dir.path());
    for check in plan(&inputs("K", "B", "rustc 1", " kernel 1"), &memo) {
        memo.record(check.memo_key);
    }
    let memo = memo::Memo::load(dir.path());
    let next = plan(&inputs("K", "B2", "rustc 1", " kernel 1"), &memo);
    let skipped: Vec<(&str, Option<Skip>)> = next.iter().map(|c| (c.name, c.skip)).collect();
    assert_eq!(
        skipped,
        [
            ("typecheck-kernel", Some(Skip::Kept)),
            ("format-body", None),
            ("lint-body", None),
            ("kernel-tests", Some(Skip::Kept)),
            ("body-tests", None)
        ]
    );
}

#[test]
fn whether_a_check_runs() {
    let table = [
        // (reads, the kernel's tree is the running one, a pass kept) → skip
        (Reads::Kernel, true, false, Some(Skip::RunningKernel)),
        (Reads::Kernel, true, true, Some(Skip::RunningKernel)),
        (Reads::Kernel, false, true, Some(Skip::Kept)),
        (Reads::Kernel, false, false, None),
        (Reads::Body, true, false, None),
        (Reads::Body, true, true, Some(Skip::Kept)),
        (Reads::Body, false, true, Some(Skip::Kept)),
        (Reads::Body, false, false, None),
    ];
    for (reads, unchanged, kept, want) in table {
        assert_eq!(skip(reads, unchanged, kept), want, "{reads:?} {unchanged} {kept}");
    }
    assert_eq!(Skip::RunningKernel.words(), "the running generation's kernel");
}

/// A candidate whose kernel tree is the running one runs no kernel check,
/// with nothing kept; one whose kernel tree differs runs them all.
#[test]
fn the_running_kernel_needs_no_kernel_checks() {
    let memo = memo::Memo::default();
    let runs = |running: Option<&'static str>| -> Vec<(&'static str, Option<Skip>)> {
        let inputs = Inputs { running_kernel_tree: running, ..inputs("K", "B2", "rustc 1", " k") };
        plan(&inputs, &memo).iter().map(|c| (c.name, c.skip)).collect()
    };
    let unchanged = [
        ("typecheck-kernel", Some(Skip::RunningKernel)),
        ("format-body", None),
        ("lint-body", None),
        ("kernel-tests", Some(Skip::RunningKernel)),
        ("body-tests", None),
    ];
    assert_eq!(runs(Some("K")), unchanged, "a body-only change");
    let all = ["typecheck-kernel", "format-body", "lint-body", "kernel-tests", "body-tests"];
    let every: Vec<_> = all.iter().map(|n| (*n, None)).collect();
    assert_eq!(runs(Some("K0")), every, "a change outside body/");
    assert_eq!(runs(None), every, "the running tree itself, warmed");
}
