//! The checks a candidate must pass in its checkout, as data: which command
//! runs where, which tree its verdict depends on, the key its pass is kept
//! under, its limits, and whether a pass of the same key is already kept.
//!
//! Pure: [`plan`] is a function of what the gate learnt about the candidate
//! ([`Inputs`]) and of the memo; the gate runs what it returns in order.
//! Whether a check runs at all is [`skip`]: not when a pass of its key is
//! kept, and not when it reads the kernel's tree and that tree is the
//! running generation's.
//! Every memo key is made here and only here, so a check's key always names
//! exactly what its verdict depends on: the check, the tree it reads (the
//! kernel's or the body's), the toolchain, and, for the body's tests, the
//! kernel binary they run against.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::memo;
use crate::runner::Limits;

/// Which tree of the candidate a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Everything outside `body/`.
    Kernel,
    /// `body/`.
    Body,
}

/// Which cargo lock a check would wait on. Checks of one lane run one after
/// the other; lanes run side by side ([`super::parallel`]). The check-mode
/// lints and type checks build in a target directory of their own
/// ([`CHECK_TARGET`] in the gate's), so they need not wait for the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// `cargo fmt`: no target directory.
    Format,
    /// `cargo check` and `cargo clippy`.
    Check,
    /// `cargo test`, in the dev profile.
    Test,
    /// The body's release build (not a planned check; [`super::build`]).
    Build,
}

/// The directory, in the gate's target directory, of the [`Lane::Check`] checks.
pub const CHECK_TARGET: &str = "check";

/// What the plan is made from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// The fresh checkout of the candidate.
    pub checkout: &'a Path,
    /// The tree ids of the candidate's kernel (outside `body/`) and body.
    pub kernel_tree: &'a str,
    pub body_tree: &'a str,
    /// The running generation's kernel tree, when the candidate is judged
    /// against it; `None` when the running tree itself is checked (the
    /// warm-up), whose kernel checks then run.
    pub running_kernel_tree: Option<&'a str>,
    /// The toolchain's version (`rustc -vV`'s release and commit).
    pub toolchain: &'a str,
    /// What identifies the kernel binary the body's tests run against.
    pub kernel_identity: &'a str,
    /// The kernel binary placed where the body's tests in the cage may run it.
    pub kernel_copy: &'a Path,
    /// The short directory for the sockets of kernels the kernel's tests start.
    pub socket_dir: &'a Path,
    /// The limits of one check (the kernel's checks get more:
    /// [`Limits::for_whole_kernel`]).
    pub limits: Limits,
    /// How many of the body's tests run at once ([`test_threads`]).
    pub test_threads: usize,
}

/// How many of the body's tests run at once on `cores` cores: four a core,
/// eight at least. They mostly wait (on a body they started, on its stand-in
/// model, on a clock), so libtest's default of one a core leaves the
/// cores idle while the check's time runs.
pub fn test_threads(cores: usize) -> usize {
    (4 * cores).max(8)
}

/// One check to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCheck {
    /// The name journaled and shown.
    pub name: &'static str,
    /// Where the command runs.
    pub dir: PathBuf,
    /// cargo's arguments.
    pub args: Vec<&'static str>,
    /// Variables added to the check's bare environment.
    pub env: Vec<(String, OsString)>,
    /// Whether its output must show tests that ran and none that failed.
    pub counts_tests: bool,
    pub reads: Reads,
    pub lane: Lane,
    pub memo_key: String,
    pub limits: Limits,
    /// Why the check need not run, if it need not.
    pub skip: Option<Skip>,
}

impl PlannedCheck {
    /// Whether it runs.
    pub fn runs(&self) -> bool {
        self.skip.is_none()
    }
}

/// Why a planned check need not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A pass under its memo key is kept.
    Kept,
    /// It reads the kernel's tree, and the candidate's is the running
    /// generation's: the owner's install, one admitted after passing these
    /// checks, or one the owner chose (`back`, `accept`).
    RunningKernel,
}

impl Skip {
    /// Why, as journaled with the step (`why`) and shown.
    pub fn words(self) -> &'static str {
        match self {
            Skip::Kept => "a pass of the same tree is kept",
            Skip::RunningKernel => "the running generation's kernel",
        }
    }
}

/// Whether a check that `reads` a tree need not run, and why: the running
/// generation's kernel needs no kernel checks (`kernel_unchanged`); any
/// other check is skipped only when a pass of its key is `kept`.
pub fn skip(reads: Reads, kernel_unchanged: bool, kept: bool) -> Option<Skip> {
    match (reads, kernel_unchanged, kept) {
        (Reads::Kernel, true, _) => Some(Skip::RunningKernel),
        (_, _, true) => Some(Skip::Kept),
        (_, _, false) => None,
    }
}

/// The checks of `inputs`, in plan order: the cheap ones first. They run
/// side by side, but a refusal names the first failure in this order, so a
/// candidate that does not even compile is refused for that.
pub fn plan(inputs: &Inputs<'_>, memo: &memo::Memo) -> Vec<PlannedCheck> {
    let checkout = inputs.checkout;
    let body = checkout.join("body");
    let offline = |args: &[&'static str]| {
        let mut args = args.to_vec();
        args.extend(["--offline", "--locked"]);
        args
    };
    // Cages do not nest: the kernel's tests run the bodies they start without
    // one, inside this check's, and put their sockets where they may.
    let kernel_test_env = vec![
        ("TENERAL_TEST_NO_CAGE".to_owned(), OsString::from("1")),
        (crate::events::SOCKET_DIR_VAR.to_owned(), inputs.socket_dir.as_os_str().to_owned()),
    ];
    let body_test_env = vec![
        ("TENERAL_BIN".to_owned(), inputs.kernel_copy.as_os_str().to_owned()),
        ("RUST_TEST_THREADS".to_owned(), OsString::from(inputs.test_threads.to_string())),
    ];
    let lint = ["clippy", "--all-targets", "--offline", "--locked", "--", "-D", "warnings"];
    // The kernel's library, programs and tests, not its examples: those are
    // the benchmarks of the kernel's own development, which a mutation's
    // verdict does not wait for (its ignored tests, the long crash and
    // power-cut runs, are never run here either).
    let kernel_targets = ["--workspace", "--lib", "--bins", "--tests"];
    let checks = [
        (
            "typecheck-kernel",
            checkout,
            offline(&[&["check"][..], &kernel_targets].concat()),
            vec![],
            false,
            Reads::Kernel,
        ),
        ("format-body", &body, vec!["fmt", "--check"], vec![], false, Reads::Body),
        ("lint-body", &body, lint.to_vec(), vec![], false, Reads::Body),
        (
            "kernel-tests",
            checkout,
            offline(&[&["test"][..], &kernel_targets].concat()),
            kernel_test_env,
            true,
            Reads::Kernel,
        ),
        ("body-tests", &body, offline(&["test"]), body_test_env, true, Reads::Body),
    ];
    let kernel_unchanged = inputs.running_kernel_tree == Some(inputs.kernel_tree);
    checks
        .into_iter()
        .map(|(name, dir, args, env, counts_tests, reads)| {
            let memo_key = match reads {
                Reads::Kernel => memo::key(name, inputs.kernel_tree, inputs.toolchain),
                Reads::Body if counts_tests => memo::key(
                    name,
                    &format!("{}{}", inputs.body_tree, inputs.kernel_identity),
                    inputs.toolchain,
                ),
                Reads::Body => memo::key(name, inputs.body_tree, inputs.toolchain),
            };
            let lane = match args.first().copied() {
                Some("fmt") => Lane::Format,
                Some("test") => Lane::Test,
                _ => Lane::Check,
            };
            PlannedCheck {
                name,
                lane,
                dir: dir.to_path_buf(),
                args,
                env,
                counts_tests,
                reads,
                skip: skip(reads, kernel_unchanged, memo.passed(&memo_key)),
                memo_key,
                limits: match reads {
                    Reads::Kernel => inputs.limits.for_whole_kernel(),
                    Reads::Body => inputs.limits,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
