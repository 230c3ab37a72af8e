//! The kernel's side of an offer: the body asks with `offer.requested`
//! (`name`, `head`: the last commit of the change it prepared at the species'
//! head, docs/contract.md section 3), and the kernel, which alone can read
//! `.teneral/auth/`, signs the offer's commits with the individual's key
//! (making `offer/<name>`), checks the branch as a stranger would, keeps
//! the report, and publishes it when `TENERAL_PUBLISH` and the owner's
//! approval allow. It answers each request exactly once, with the fields
//! of one `offer.answered` event naming the request's `seq`.
//!
//! Blocking (git, the forge's API): the supervisor runs [`answer`] off its
//! event loop (`tokio::task::spawn_blocking`) and journals what it returns;
//! when the answer says `published`, it journals `offer.published` with
//! [`teneral_offer::publish::event`]'s fields as well.

pub mod cli;
pub mod gates;
mod git;
pub mod reconcile;

use std::path::Path;

use serde_json::{json, Value};
use teneral_offer::approve::Refused;
use teneral_offer::publish::{self, PublishError};
use teneral_offer::{key, sign};

use crate::runner::{Limits, Runner};
use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;

/// What an answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The check failed: nothing goes out; the report says what to put right.
    Failed,
    /// Checked and passed; it waits for the owner's approval.
    Waits,
    /// It went out: a pull request is open.
    Published,
    /// It cannot be signed, checked or published (the setting is off, the
    /// species moved on, the forge refused, ...): `message` says why.
    Refused,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Failed => "failed",
            State::Waits => "waits",
            State::Published => "published",
            State::Refused => "refused",
        }
    }
}

fn answered(request: u64, state: State, message: String, more: Value) -> Value {
    let mut fields = json!({"request": request, "state": state.as_str(), "message": message});
    if let (Value::Object(f), Value::Object(m)) = (&mut fields, more) {
        f.extend(m);
    }
    fields
}

/// Signs, checks and (when allowed) publishes the offer `name` at `commit`
/// of the individual at `home`, for the request journaled with `request`;
/// the `offer.answered` event's fields, and the publish's outcome when it
/// went out. The mutation gate's checks are not run (the report says so):
/// [`answer_gated`] runs them.
pub fn answer(
    home: &Path,
    request: u64,
    name: &str,
    commit: &Commit,
) -> (Value, Option<publish::Published>) {
    answer_gated(home, request, name, commit, None)
}

/// Runs the gate's checks on an offer's signed head (blocking).
pub type RunGates<'a> = &'a dyn Fn(&Commit) -> teneral_offer::gates::Gates;

/// [`answer`], with the mutation gate's checks (`gates`) run on the signed
/// offer once the offer crate's own check passed; a failed gate fails the
/// check, named in the message.
pub fn answer_gated(
    home: &Path,
    request: u64,
    name: &str,
    commit: &Commit,
    gates: Option<RunGates<'_>>,
) -> (Value, Option<publish::Published>) {
    let refused = |m: String| (answered(request, State::Refused, m, json!({})), None);
    let base = match teneral_offer::base_ref(home, None) {
        Ok(base) => base,
        Err(e) => return refused(e.to_string()),
    };
    let signed = key::ensure(home)
        .map_err(|e| e.to_string())
        .and_then(|k| sign::sign(home, commit, &base, name, &k).map_err(|e| e.to_string()));
    let signed = match signed {
        Ok(signed) => signed,
        Err(e) => return refused(e),
    };
    let branch = format!("offer/{name}");
    let mut report = match teneral_offer::check(home, &branch, None) {
        Ok(r) => r,
        Err(e) => return refused(e.to_string()),
    };
    if let Some(run) = gates.filter(|_| report.passed_before_gates()) {
        report.gates = Some(run(&signed));
    }
    let kept = teneral_offer::keep(home, &report).map(|p| p.display().to_string());
    let facts = json!({"branch": branch, "offer": signed.as_str(),
                       "report": kept.unwrap_or_default()});
    if !report.passed() {
        let text = teneral_offer::to_text(&report);
        let failed: Vec<&str> =
            text.lines().filter(|l| l.starts_with("FAIL")).map(str::trim_end).collect();
        let message = format!("the check failed: {}", failed.join("; "));
        return (answered(request, State::Failed, message, facts), None);
    }
    match publish::publish(home, &signed) {
        Ok(done) => {
            let message = format!("published as {}: {}", done.branch, done.pull.url);
            let mut more = facts;
            more["pull"] = json!(done.pull.url);
            (answered(request, State::Published, message, more), Some(done))
        }
        Err(PublishError::Refused(Refused::NotApproved(_))) => {
            let message = format!(
                "checked and passed; it waits for the owner's approval of {} (teneralctl offer approve, /approve in talk)",
                signed.short()
            );
            (answered(request, State::Waits, message, facts), None)
        }
        Err(e) => (answered(request, State::Refused, e.to_string(), facts), None),
    }
}

/// Answers the request off the event loop and journals the answer (and
/// `offer.published` when it went out) as the generation `generation`'s.
/// The commit is first taken from the agent's workspace into the main
/// repository the way a mutation's is (`gate::fetch::take`: packed in the
/// cage, never opened with the kernel's rights), then [`answer`] runs.
pub fn spawn_answer(
    kernel: (&Path, &crate::events::SharedJournal, &Runner, Limits),
    generation: &Commit,
    request: u64,
    name: String,
    offered: Commit,
) {
    let (home, journal, runner, limits) = kernel;
    let (home, journal, runner) = (home.to_owned(), journal.clone(), runner.clone());
    let generation = generation.clone();
    let handle = tokio::runtime::Handle::current();
    teneral_offer::git::start_with(git::through_spawn);
    tokio::task::spawn_blocking(move || {
        teneral_core::crash::point("offer.answering");
        let gates = |signed: &Commit| handle.block_on(run_gates(&home, &runner, signed));
        let (fields, done) = match take(&handle, &runner, &home, &generation, &offered, limits) {
            Ok(()) => answer_gated(&home, request, &name, &offered, Some(&gates)),
            Err(why) => (answered(request, State::Refused, why, json!({})), None),
        };
        if let Some(done) = done {
            let mut event = publish::event(&done);
            event["request"] = json!(request);
            crate::events::kernel_event(&journal, &generation, EventKind::OfferPublished, event);
            teneral_core::crash::point("offer.published.journaled");
        }
        crate::events::kernel_event(&journal, &generation, EventKind::OfferAnswered, fields);
    });
}

/// Brings `offered` from `.teneral/candidate` into the main repository.
fn take(
    handle: &tokio::runtime::Handle,
    runner: &Runner,
    home: &Path,
    generation: &Commit,
    offered: &Commit,
    limits: Limits,
) -> Result<(), String> {
    let repo = crate::repo::open(home).map_err(|e| e.to_string())?;
    let running = crate::repo::commit_id(&repo, home, generation.as_str()).ok();
    let bases: Vec<git2::Oid> = running.into_iter().collect();
    let taken = crate::gate::fetch::take(runner, &repo, home, offered, &bases, limits);
    handle.block_on(taken).map(|_| ()).map_err(|e| format!("the offer's commit: {e}"))
}

/// The gate's checks on `signed`, with the individual's settings and this
/// kernel's program.
async fn run_gates(home: &Path, runner: &Runner, signed: &Commit) -> teneral_offer::gates::Gates {
    let failed =
        |why: String| teneral_offer::gates::Gates::from_steps(&[], Some(("checkout", &why)), 0.0);
    let settings = match crate::settings::Settings::load(home) {
        Ok(s) => s,
        Err(e) => return failed(e.to_string()),
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return failed(format!("the kernel's own program: {e}")),
    };
    let kernel = gates::Kernel { home, settings: &settings, runner, kernel_exe: &exe };
    gates::run(&kernel, signed).await
}
