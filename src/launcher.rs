//! `teneral run`: the launcher, version [`LAUNCHER_VERSION`] of its contract
//! with a kernel ([`contract`], docs/contract.md).
//!
//! It is the program the unit starts, from the owner's install. It holds no
//! lock and keeps no state of its own: in a loop, it reads which generation
//! is current (`.teneral/state.json`; none yet: HEAD), chooses that
//! generation's kernel ([`kernels::which`]: the install's own binary, or the
//! generation's kernel built from `.teneral/live`), refuses to start a kernel
//! that needs a newer launcher (exit 78, no loop), and runs it
//! ([`child::run`]) until it ends. Exit 85 starts the next kernel; any other
//! end of a kernel not on trial ends the launcher with its status. A kernel
//! on trial ([`trial`]) that fails is rolled back by the launcher itself
//! ([`rollback`]) and the previous generation's kernel starts; a rollback
//! a kill cut short is finished before anything else.

pub mod child;
pub mod contract;
pub mod handover;
pub mod install;
pub mod kernels;
mod rollback;
pub mod trial;

use std::path::{Path, PathBuf};

use contract::{EXIT_NEXT_KERNEL, EXIT_UPDATE_INSTALL, LAUNCHER_VERSION};
use kernels::Which;
use trial::{After, End, Trial};

use crate::repo;
use crate::runner::{Limits, Runner};
use crate::settings::Settings;
use crate::spawn::Exit;
use teneral_core::commit::{short, Commit};
use teneral_core::log;

/// Why the launcher could not go on.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Lock(#[from] teneral_core::lock::LockError),
    #[error(transparent)]
    State(#[from] teneral_core::state::StateError),
    #[error(transparent)]
    Repo(#[from] repo::RepoError),
    #[error(transparent)]
    Journal(#[from] teneral_core::journal::writer::JournalError),
    #[error(transparent)]
    Trial(#[from] trial::TrialError),
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    #[error(transparent)]
    Cage(#[from] crate::confine::CageError),
    #[error("{0}")]
    Other(String),
}

fn other(what: &str) -> impl Fn(std::fmt::Arguments<'_>) -> LaunchError + '_ {
    move |e| LaunchError::Other(format!("{what}: {e}"))
}

/// The install's kernel run in the launcher's own process: the supervisor
/// (`teneral kernel` without a process of its own). Given by the binary, so
/// that the launcher does not depend on the supervisor, which depends on it.
pub type InProcess<'a> = Box<
    dyn FnOnce(
            &Path,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<i32, String>> + 'a>>
        + 'a,
>;

/// Launches the kernels of the individual at `home` until one ends the
/// launcher. Returns the exit status.
///
/// The first kernel, when it is the install's and not on trial (the common
/// start), runs in this process (`in_process`): the same process, pid and
/// exit status as a kernel started alone. Every kernel after an exit 85, and
/// any kernel on trial or built from a generation, is a child.
pub async fn run(home: &Path, in_process: InProcess<'_>) -> Result<i32, LaunchError> {
    let home = home
        .canonicalize()
        .map_err(|e| other("the individual's directory")(format_args!("{e}")))?;
    let install = std::env::current_exe()
        .map_err(|e| other("the launcher's own binary")(format_args!("{e}")))?;
    // Chosen once, when a generation's own kernel is first built.
    let mut runner: Option<Runner> = None;
    let mut in_process = Some(in_process);
    let mut reaping = false;
    loop {
        // A rollback of a trial a kill cut short is finished first.
        rollback::finish_cut(&home)?;
        let generation = current(&home)?;
        let trial = on_trial(&home, generation.as_deref())?;
        let which = match &generation {
            Some(commit) => which_of(&home, commit)?,
            None => Which::Install,
        };
        if let Some(status) = needs_newer(&home, generation.as_deref(), &which)? {
            return Ok(status);
        }
        if let Err(e) = kernels::note_running(&home, &which) {
            log::warn(format!("launcher: cannot note which kernel runs: {e}"));
        }
        if let Some(kernel) =
            in_process.take().filter(|_| which == Which::Install && trial.is_none())
        {
            // The supervisor becomes the subreaper and reaps every child.
            reaping = true;
            let status = kernel(&home).await.map_err(LaunchError::Other)?;
            crate::spawn::stop_keeping_groups();
            if status != EXIT_NEXT_KERNEL {
                return Ok(status);
            }
            if current(&home)? == generation {
                return Err(next_without_change());
            }
            continue;
        }
        if !reaping {
            crate::spawn::start_reaper()
                .map_err(|e| other("cannot become a child subreaper")(format_args!("{e}")))?;
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
                .map_err(|e| other("cannot make the launcher non-dumpable")(format_args!("{e}")))?;
            reaping = true;
        }
        let exe = match (&which, &generation) {
            (Which::Own(key), Some(commit)) => own_kernel(&home, commit, key, &mut runner).await,
            // Without a generation yet the kernel starts from HEAD: the install's.
            _ => Ok(install.clone()),
        };
        let trial_of = trial.as_ref().map(|t| (t.commit.as_str(), trial::window()));
        let ran = match exe {
            Ok(exe) => {
                log::info(format!(
                    "launcher: starting the kernel of generation {} ({}){}",
                    short(generation.as_deref().unwrap_or("HEAD")),
                    describe(&which),
                    if trial.is_some() { ", on trial" } else { "" }
                ));
                let start = child::Start { home: &home, exe: &exe, which: &which, trial: trial_of };
                let ended = |home: &Path| {
                    // The trial is over once the generation got ready.
                    if let Err(e) = Trial::remove(home) {
                        log::info(format!("launcher: {e}"));
                    }
                    log::info(
                        "launcher: the new kernel got its generation ready; its trial is over",
                    );
                };
                child::run(start, || ended(&home)).await.map_err(|e| e.to_string())
            }
            Err(why) => Err(why),
        };
        let after_gen = current(&home)?;
        let changed = after_gen != generation;
        match (trial, ran) {
            (Some(t), ran) if !ran.as_ref().is_ok_and(|r| r.ready) => {
                let (end, stderr, stop) = match ran {
                    Err(why) => (End::NotStarted(why), String::new(), false),
                    Ok(r) if r.missed => {
                        (End::NotReady(trial::window()), r.stderr, r.asked_to_stop)
                    }
                    Ok(r) => {
                        let end = End::Exited {
                            status: code(r.exit),
                            words: r.exit.to_string(),
                            generation_changed: changed,
                        };
                        (end, r.stderr, r.asked_to_stop)
                    }
                };
                match trial::verdict(&end, stop) {
                    After::Next => Trial::remove(&home)?,
                    After::Stop(status) => return Ok(status),
                    After::RollBack(reason) => rollback::roll_back(&home, &t, &reason, &stderr)?,
                }
            }
            (_, Err(why)) => {
                return Err(LaunchError::Other(format!(
                    "the kernel of generation {} could not be started: {why}; see the lines above, \
                     or go back a generation with `teneralctl back`",
                    short(generation.as_deref().unwrap_or("HEAD"))
                )))
            }
            (_, Ok(r)) => match code(r.exit) {
                Some(EXIT_NEXT_KERNEL) if changed => {}
                Some(EXIT_NEXT_KERNEL) => return Err(next_without_change()),
                Some(status) => return Ok(status),
                None => return Ok(128 + signal_of(r.exit)),
            },
        }
    }
}

fn next_without_change() -> LaunchError {
    LaunchError::Other(
        "the kernel asked for the next kernel (exit 85) without changing the generation; the \
         launcher stops rather than loop: see the lines above"
            .into(),
    )
}

/// The current generation, as the state says (none yet: the kernel starts
/// from HEAD).
fn current(home: &Path) -> Result<Option<Commit>, LaunchError> {
    Ok(teneral_core::state::State::load(home)?.generation)
}

/// The trial, when it is about `generation`. One about another generation
/// (a kill between its write and the state's) is passed over, not removed:
/// the kernel started next finishes that promotion from the journal and
/// hands over to the trial, or drops the trial when the journal holds no
/// such promotion (`supervisor::start`).
fn on_trial(home: &Path, generation: Option<&str>) -> Result<Option<Trial>, LaunchError> {
    Ok(Trial::load(home)?.filter(|t| Some(t.commit.as_str()) == generation))
}

fn which_of(home: &Path, commit: &Commit) -> Result<Which, LaunchError> {
    let git = repo::open(home)?;
    let oid = repo::commit_id(&git, home, commit)?;
    kernels::which(home, &git, oid)
        .map_err(|e| other("cannot tell which kernel runs the generation")(format_args!("{e}")))
}

/// `Some(78)` when the generation's kernel needs a newer launcher: said
/// once, nothing started.
fn needs_newer(
    home: &Path,
    generation: Option<&str>,
    which: &Which,
) -> Result<Option<i32>, LaunchError> {
    let (Some(commit), Which::Own(_)) = (generation, which) else { return Ok(None) };
    let git = repo::open(home)?;
    let oid = repo::commit_id(&git, home, commit)?;
    let text = kernels::launch_file(&git, oid)
        .map_err(|e| other("cannot read the generation's launch file")(format_args!("{e}")))?;
    let needed = contract::needs(text.as_deref())
        .map_err(|e| other("the generation's kernel")(format_args!("{e}")))?;
    if needed <= LAUNCHER_VERSION {
        return Ok(None);
    }
    let what = format!("the kernel of generation {}", short(commit));
    log::at(log::Priority::Error, contract::update_the_install(&what, needed, LAUNCHER_VERSION));
    Ok(Some(EXIT_UPDATE_INSTALL))
}

/// The generation's own kernel, built from `.teneral/live` if not kept.
async fn own_kernel(
    home: &Path,
    commit: &Commit,
    key: &str,
    runner: &mut Option<Runner>,
) -> Result<PathBuf, String> {
    let kept = kernels::kept(home, key);
    if kept.is_file() {
        return Ok(kept);
    }
    let settings = Settings::load(home).map_err(|e| e.to_string())?;
    let runner = match runner {
        Some(r) => r.clone(),
        None => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let cage = crate::confine::Cage::decide(
                settings.unsafe_unconfined,
                &settings.test.pretend_missing,
                exe,
            )
            .map_err(|e| e.to_string())?;
            let r = Runner::choose(settings.runner, cage)
                .await
                .map_err(|e| e.to_string())?
                .for_individual(home);
            runner.insert(r).clone()
        }
    };
    let git = repo::open(home).map_err(|e| e.to_string())?;
    let oid = repo::commit_id(&git, home, commit).map_err(|e| e.to_string())?;
    let live = repo::reset_live(&git, home, oid).map_err(|e| e.to_string())?;
    let limits = Limits::for_kernel_build(&settings);
    kernels::build(&runner, home, &live, key, limits).await.map_err(|e| e.to_string())
}

fn describe(which: &Which) -> String {
    match which {
        Which::Install => "the install's kernel".into(),
        Which::Own(key) => format!("its own kernel {}", short(key)),
    }
}

fn code(exit: Exit) -> Option<i32> {
    match exit {
        Exit::Code(c) => Some(c),
        Exit::Signal(_) => None,
    }
}

fn signal_of(exit: Exit) -> i32 {
    match exit {
        Exit::Signal(s) => s,
        Exit::Code(_) => 0,
    }
}
