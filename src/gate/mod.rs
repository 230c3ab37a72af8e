//! The gate: what a candidate commit must pass before it may run.
//!
//! In order, each step timed and journaled as `mutation.check`, the first
//! failure ending the gate with its name and the tail of its output:
//! 1. `paths`: only `body/` and `BACKLOG.md` changed; `body/` holds only
//!    regular files ([`rules`]);
//! 2. `organs`: in a fresh checkout of exactly that commit, each pinned organ
//!    is in the cache with its hash, unpacked, and passes its own check
//!    ([`crate::organs::gate`]); nothing of the candidate has run yet;
//! 3. in that checkout, with a bare environment and
//!    a temp dir inside the checkout, each limited by the check limit: the
//!    type checks of the kernel and the body, the kernel's tests, the body's
//!    tests, all `--offline --locked`; a check whose tree already passed is
//!    reused ([`memo`]);
//! 4. `smoke`: the candidate started on a throwaway individual ([`smoke`]).
//!
//! The organ set, when the candidate pins organs, is `TENERAL_ORGANS` for its
//! tests and its smoke run.

pub mod checks;
pub mod memo;
pub mod rules;
pub mod smoke;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use git2::Repository;
use serde_json::json;

use crate::confine::{self, Mode, Profile};
use crate::events::{kernel_event, SharedJournal};
use crate::runner::Runner;
use crate::settings::Settings;
use crate::status::{Doing, Reporter};
use crate::{generation, log, repo};
use checks::{Check, Outcome};
use memo::Memo;

/// The gate's working directories.
pub const CHECKOUT_DIR: &str = ".teneral/gate/checkout";
pub const TARGET_DIR: &str = ".teneral/gate/target";

/// What the gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every check passed; the body is built at `binary`.
    Accepted { binary: PathBuf },
    /// `check` failed; `output` ends with what it printed.
    Rejected { check: String, output: String },
}

/// One judgement of a candidate against the running generation.
pub struct Gate<'a> {
    pub home: &'a Path,
    pub repo: &'a Repository,
    pub settings: &'a Settings,
    pub journal: &'a SharedJournal,
    /// The running generation's commit.
    pub running: &'a str,
    /// The kernel binary the body's tests talk to (`TENERAL_BIN`): the
    /// stand-in model and the event channel they test against.
    pub kernel_exe: &'a Path,
    /// How checks and the smoke run are started (transient units under systemd).
    pub runner: &'a Runner,
    /// Where the step under way is said (systemd's STATUS), if anywhere.
    pub status: Option<&'a Reporter>,
}

fn reject(check: &str, output: impl Into<String>) -> Verdict {
    Verdict::Rejected { check: check.to_owned(), output: output.into() }
}

impl Gate<'_> {
    /// Judges `candidate`. Dropping the future kills the check in progress.
    pub async fn judge(&self, candidate: &str) -> Verdict {
        let started = Instant::now();
        let running = match repo::commit_id(self.repo, self.home, self.running) {
            Ok(oid) => oid,
            Err(e) => return reject("fetch", e.to_string()),
        };
        let oid = match repo::fetch_candidate(self.repo, self.home, candidate) {
            Ok(oid) => oid,
            Err(e) => {
                return reject(
                    "fetch",
                    format!("{e}; commit in .teneral/candidate on lineage/local and ask again"),
                )
            }
        };
        self.doing(candidate, "paths");
        let paths = repo::changed_paths(self.repo, self.home, running, oid)
            .map_err(|e| e.to_string())
            .and_then(|changed| rules::check_paths(&changed))
            .and_then(|()| repo::body_entries(self.repo, self.home, oid).map_err(|e| e.to_string()))
            .and_then(|entries| rules::check_body_entries(&entries));
        self.step(candidate, "paths", paths.is_ok(), false, started.elapsed());
        if let Err(why) = paths {
            return reject("paths", why);
        }
        let checkout = self.home.join(CHECKOUT_DIR);
        let fresh = repo::checkout_at(self.repo, &checkout, oid)
            .map_err(|e| e.to_string())
            .and_then(|()| generation::touch_tree(&checkout).map_err(|e| e.to_string()));
        if let Err(e) = fresh {
            return reject("checkout", e);
        }
        let verdict = self.checks(candidate, oid, &checkout).await;
        let _ = std::fs::remove_dir_all(checkout.join(".tmp"));
        log::info(format!(
            "gate: {} for {} after {:.1} s",
            match &verdict {
                Verdict::Accepted { .. } => "accepted".to_owned(),
                Verdict::Rejected { check, .. } => format!("rejected at {check}"),
            },
            generation::short(candidate),
            started.elapsed().as_secs_f64()
        ));
        verdict
    }

    async fn checks(&self, candidate: &str, oid: git2::Oid, checkout: &Path) -> Verdict {
        let (kernel_tree, body_tree) = match repo::tree_ids(self.repo, self.home, oid) {
            Ok(ids) => ids,
            Err(e) => return reject("checkout", e.to_string()),
        };
        let tmp = checkout.join(".tmp");
        if let Err(e) = std::fs::create_dir_all(&tmp) {
            return reject("checkout", format!("cannot make {}: {e}", tmp.display()));
        }
        let target = self.home.join(TARGET_DIR);
        let mut env = checks::bare_env(&tmp, &target);
        let mode = match confine::decide(
            self.settings.unsafe_unconfined,
            &self.settings.pretend_missing,
        ) {
            Ok(mode) => mode,
            Err(e) => return reject("cage", e.to_string()),
        };
        let cage: checks::Cage = match mode {
            Mode::Unconfined => None,
            Mode::Confined => {
                if let Err(e) = std::fs::create_dir_all(&target) {
                    return reject("checkout", format!("cannot make {}: {e}", target.display()));
                }
                let options = confine::Options {
                    pretend_missing: self.settings.pretend_missing.clone(),
                    exe: Some(self.kernel_exe.to_owned()),
                    ..confine::Options::default()
                };
                Some((
                    Profile::Gate { checkout: checkout.to_owned(), writable: vec![target.clone()] },
                    options,
                ))
            }
        };
        let started = Instant::now();
        let organ_cage = cage.as_ref().map(|(_, options)| options);
        let organ_limit = crate::organs::CHECK_LIMIT;
        let organ_set =
            match crate::organs::gate_within(self.home, checkout, &env, organ_limit, organ_cage)
                .await
            {
                Ok(set) => set,
                Err(e) => {
                    self.step(candidate, "organs", false, false, started.elapsed());
                    return reject("organs", e.to_string());
                }
            };
        if let Some(set) = &organ_set {
            self.step(candidate, "organs", true, false, started.elapsed());
            env.push(("TENERAL_ORGANS".into(), set.as_os_str().to_owned()));
        }
        let toolchain = toolchain(&env).await;
        let kernel_exe = kernel_identity(self.kernel_exe);
        let limits = checks::limits(self.settings);
        let body_dir = checkout.join("body");
        // The body's tests run the kernel's stand-in and event channel; in the
        // cage they may execute only what lies in the check's own places.
        let kernel_copy = match place_kernel(self.kernel_exe, &target) {
            Ok(path) => path,
            Err(e) => {
                return reject(
                    "checkout",
                    format!("cannot place the kernel for the body's tests: {e}"),
                )
            }
        };
        let exe = vec![("TENERAL_BIN".to_owned(), kernel_copy.into_os_string())];
        if cage.is_some() {
            for dir in [checkout, body_dir.as_path()] {
                if let Err(why) = checks::fetch(dir, &env).await {
                    return reject("fetch", why);
                }
            }
        }
        // Cages do not nest: the kernel's tests run the bodies they start
        // without one, inside this check's.
        let mut no_cage = vec![("TENERAL_TEST_NO_CAGE".to_owned(), OsString::from("1"))];
        match socket_dir(self.home, &target) {
            Ok(dir) => {
                no_cage.push((crate::events::SOCKET_DIR_VAR.to_owned(), dir.into_os_string()))
            }
            Err(e) => {
                return reject(
                    "checkout",
                    format!("cannot make a place for the tests' sockets: {e}"),
                )
            }
        }
        let plan = [
            (
                check("typecheck-kernel", checkout, &["check", "--all-targets"], false, vec![]),
                &kernel_tree,
                "",
            ),
            (
                check("typecheck-body", &body_dir, &["check", "--all-targets"], false, vec![]),
                &body_tree,
                "",
            ),
            (check("kernel-tests", checkout, &["test"], true, no_cage), &kernel_tree, ""),
            (check("body-tests", &body_dir, &["test"], true, exe), &body_tree, kernel_exe.as_str()),
        ];
        let mut memo = Memo::load(self.home);
        for (check, tree, extra) in &plan {
            let key = memo::key(check.name, &format!("{tree}{extra}"), &toolchain);
            if memo.passed(&key) {
                self.step(candidate, check.name, true, true, Duration::ZERO);
                continue;
            }
            log::info(format!("gate: {} of {}", check.name, generation::short(candidate)));
            self.doing(candidate, check.name);
            match checks::run(self.runner, candidate, check, &env, &limits, &cage).await {
                Outcome::Passed { seconds } => {
                    self.step(candidate, check.name, true, false, Duration::from_secs_f64(seconds));
                    memo.record(key);
                }
                Outcome::Failed { seconds, output } | Outcome::OverTime { seconds, output } => {
                    self.step(
                        candidate,
                        check.name,
                        false,
                        false,
                        Duration::from_secs_f64(seconds),
                    );
                    return reject(check.name, output);
                }
            }
        }
        let started = Instant::now();
        self.doing(candidate, "smoke");
        let binary = match generation::build(self.home, checkout, candidate, mode).await {
            Ok(binary) => binary,
            Err(e) => {
                self.step(candidate, "smoke", false, false, started.elapsed());
                return reject("smoke", e.to_string());
            }
        };
        let limit = match self.settings.smoke_seconds {
            0 => None,
            s => Some(Duration::from_secs(u64::from(s))),
        };
        let run = smoke::Smoke {
            home: self.home,
            checkout,
            binary: &binary,
            commit: candidate,
            settings: self.settings,
            runner: self.runner,
            organs: organ_set.as_deref(),
            limit,
            cage: cage.map(|(_, options)| options),
        };
        let smoke = run.run().await;
        self.step(candidate, "smoke", smoke.is_ok(), false, started.elapsed());
        match smoke {
            Ok(()) => Verdict::Accepted { binary },
            Err(why) => reject("smoke", why),
        }
    }

    /// Says which step is under way.
    fn doing(&self, candidate: &str, step: &str) {
        if let Some(status) = self.status {
            status.set(Doing::Checking { candidate: candidate.to_owned(), step: step.to_owned() });
        }
    }

    fn step(&self, candidate: &str, check: &str, passed: bool, reused: bool, took: Duration) {
        let result = match (passed, reused) {
            (true, true) => "reused",
            (true, false) => "passed",
            (false, _) => "failed",
        };
        let seconds = (took.as_secs_f64() * 100.0).round() / 100.0;
        kernel_event(
            self.journal,
            self.running,
            "mutation.check",
            json!({"candidate": candidate, "check": check, "result": result, "seconds": seconds}),
        );
    }
}

fn check(
    name: &'static str,
    dir: &Path,
    args: &[&'static str],
    counts_tests: bool,
    env: Vec<(String, OsString)>,
) -> Check {
    let mut args = args.to_vec();
    args.extend(["--offline", "--locked"]);
    Check { name, dir: dir.to_owned(), args, counts_tests, env }
}

/// The toolchain's version, part of every memo key (`rustc -vV`).
async fn toolchain(env: &[(String, OsString)]) -> String {
    let mut spec = crate::spawn::Spec::new("rustc", std::env::temp_dir()).arg("-vV");
    spec.env = env.to_vec();
    spec.stdout = crate::spawn::Output::Pipe;
    let Ok(mut child) = crate::spawn::spawn(spec) else { return "unknown rustc".into() };
    let mut out = String::new();
    if let Some(pipe) = child.stdout.take() {
        use tokio::io::AsyncReadExt;
        let _ = tokio::io::BufReader::new(pipe).read_to_string(&mut out).await;
    }
    child.wait().await;
    out.lines()
        .filter(|l| l.starts_with("release:") || l.starts_with("commit-hash:"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A short path for the event sockets of the kernels the kernel's tests
/// start inside a check: `/tmp/teneral-<uid>/g-<home id>`, a link to
/// `<target>/sockets`. A Unix socket's path has at most 107 bytes, the
/// check's own places lie deeper, and /tmp is not the check's to write;
/// through the link the sockets are made in the check's cache.
fn socket_dir(home: &Path, target: &Path) -> std::io::Result<PathBuf> {
    // A kernel that was itself given one (it runs under test in a check)
    // passes it on: it cannot make links in /tmp either.
    if let Some(given) = std::env::var_os(crate::events::SOCKET_DIR_VAR).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(given));
    }
    let real = target.join("sockets");
    std::fs::create_dir_all(&real)?;
    let uid = rustix::process::getuid().as_raw();
    let base = PathBuf::from(format!("/tmp/teneral-{uid}"));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&base)?;
    }
    let link = base.join(format!("g-{}", crate::events::home_id(home)));
    if std::fs::read_link(&link).ok().as_deref() != Some(real.as_path()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link)?;
    }
    Ok(link)
}

/// The kernel binary as `<target>/teneral-kernel`, a hard link when the
/// two lie on one filesystem, else a copy; replaced when the kernel changed.
fn place_kernel(exe: &Path, target: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(target)?;
    let placed = target.join("teneral-kernel");
    let (from, to) = (std::fs::metadata(exe)?, std::fs::metadata(&placed).ok());
    let same = to.is_some_and(|t| {
        (t.dev(), t.ino()) == (from.dev(), from.ino())
            || (t.size(), t.mtime()) == (from.size(), from.mtime())
    });
    if same {
        return Ok(placed);
    }
    let tmp = target.join(".teneral-kernel.tmp");
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(exe, &tmp).is_err() {
        std::fs::copy(exe, &tmp)?;
        std::fs::File::options().write(true).open(&tmp)?.set_modified(from.modified()?)?;
    }
    std::fs::rename(&tmp, &placed)?;
    Ok(placed)
}

/// What identifies the kernel binary the body's tests run against.
fn kernel_identity(exe: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(exe)
        .map(|m| format!(" kernel {}:{}:{}:{}", m.dev(), m.ino(), m.size(), m.mtime()))
        .unwrap_or_default()
}
