//! The start's edges: reading what the last kernel left (the journal since
//! its start, the state, `lineage/local`, the owner's waiting files),
//! acting on what [`reconcile`] decides, and sweeping what a killed kernel
//! leaves lying (event sockets, temporary files, process groups).

use std::path::Path;
use std::time::SystemTime;

use git2::{BranchType, Repository};
use serde_json::json;

use super::reconcile::{reconcile, Action, CutLine, Found, MoveKind, Tail, CUT_TURN};
use super::verdict::answer_undecided;
use super::{io, KernelError};
use crate::events::{kernel_event, SharedJournal};
use crate::lifecycle::RunCounts;
use crate::repo;
use teneral_core::commit::{short, Commit};
use teneral_core::journal::reader::{parse_line, Backwards, Event};
use teneral_core::journal::{EventKind, JOURNAL_PATH};
use teneral_core::owner::OWNER_DIR;
use teneral_core::state::{Refused, State, Trial};
use teneral_core::{crash, log};

/// Types the start never reads: a body's own words, which it may journal
/// by the thousand between two starts.
const PASSED_AT_START: &[EventKind] = &[
    EventKind::Note,
    EventKind::Reply,
    EventKind::Reasoning,
    EventKind::ToolCall,
    EventKind::ToolResult,
    EventKind::Birth,
    EventKind::Stimulus,
    EventKind::Usage,
    EventKind::ModelRetry,
    EventKind::GenerationReady,
];

/// Types that only say a turn was answered or over: a run of them between
/// two events the start keeps is kept as one, a `reply` if any of the run is
/// one (`reconcile::Tail`'s cut turn and `counts::carried` read no more).
const ANSWERED: &[EventKind] =
    &[EventKind::Reply, EventKind::TurnEnded, EventKind::TurnInterrupted];

/// The fields the start reads of an event it keeps (`reconcile::Tail`,
/// `offer::reconcile::Offers`, `lifecycle::journaled_row`); a string is
/// kept up to [`FIELD_KEPT`] bytes. So what a body journaled since the last
/// start costs the start a few hundred bytes an event, whatever it sent.
const READ_AT_START: &[&str] = &[
    "file",
    "candidate",
    "to",
    "from",
    "request",
    "refusals",
    "name",
    "offer",
    "branch",
    "pull",
    "number",
    super::reconcile::CUT_TURN,
    super::counts::CRASHES_IN_ROW,
    super::counts::RESTARTS,
];
const FIELD_KEPT: usize = 4096;

/// `event` with only the fields the start reads.
fn slim(mut event: Event) -> Event {
    event.fields.retain(|name, value| {
        READ_AT_START.contains(&name.as_str())
            && match value {
                serde_json::Value::String(text) => text.len() <= FIELD_KEPT,
                serde_json::Value::Number(_) | serde_json::Value::Bool(_) => true,
                _ => false,
            }
    });
    event
}

/// The journal's last `kernel.started`, if any, and the events after it,
/// oldest first, each as much as the start reads of it ([`slim`]; the
/// body's words are passed over, a run of [`ANSWERED`] kept as one).
fn since_last_start(home: &Path) -> Result<(Option<Event>, Vec<Event>), KernelError> {
    let path = home.join(JOURNAL_PATH);
    let file = match teneral_core::journal::open_file(&path, teneral_core::journal::Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => return Err(io("the journal")(e)),
    };
    let mut lines = Backwards::new(file).map_err(io("the journal"))?;
    let mut events = Vec::new();
    let mut started = None;
    while let Some(line) = lines.next_line().map_err(io("the journal"))? {
        let Some(event) = parse_line(&line) else { continue };
        if event.is(EventKind::KernelStarted) {
            started = Some(event);
            break;
        }
        let answered = |e: &Event| e.known_kind().is_some_and(|k| ANSWERED.contains(&k));
        if answered(&event) {
            // Read backwards: the last kept is the next one in time.
            if let Some(next) =
                events.last_mut().filter(|n: &&mut Event| answered(n) && n.commit == event.commit)
            {
                if event.is(EventKind::Reply) {
                    next.kind = event.kind;
                }
                continue;
            }
        }
        if !event.known_kind().is_some_and(|k| PASSED_AT_START.contains(&k)) {
            events.push(slim(event));
        }
    }
    if lines.skipped() > 0 {
        log::warn(format!(
            "passed over {} journal lines over what a reader takes ({} bytes, {} deep, {} elements)",
            lines.skipped(),
            teneral_core::journal::READ.bytes,
            teneral_core::journal::READ.depth,
            teneral_core::journal::READ.elements
        ));
    }
    events.reverse();
    Ok((started, events))
}

fn waiting_owner_files(home: &Path) -> Vec<String> {
    std::fs::read_dir(home.join(OWNER_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

fn lineage_head(git: &Repository) -> Option<String> {
    let branch = git.find_branch(repo::LINEAGE_BRANCH, BranchType::Local).ok()?;
    branch.get().target().map(|o| o.to_string())
}

/// What the start found that the rest of the start acts on.
#[derive(Debug, Default)]
pub(super) struct Reconciled {
    /// A move it finished brought the individual to a generation another
    /// kernel runs: the kernel then ends with exit 85 (the trial file of a
    /// promotion written before the state, as a switch does).
    pub hand_over: bool,
    /// The owner line whose turn the last kernel's end cut, for
    /// [`tell_cut_turn`] once `kernel.started` is journaled.
    pub cut_line: Option<CutLine>,
    /// The lifecycle's counts of the generation to start, as the journal
    /// left them.
    pub counts: RunCounts,
}

/// Finishes or undoes what the last kernel left half done, with `state`
/// naming the generation to start from, and journals what it did (one
/// `kernel.notice` holding `reconciled`). Call before `kernel.started`.
pub(super) fn reconcile_at_start(
    home: &Path,
    git: &Repository,
    state: &mut State,
    journal: &SharedJournal,
) -> Result<Reconciled, KernelError> {
    let mut hand_over = false;
    let (started, events) = since_last_start(home)?;
    let tail = Tail::since(started.as_ref(), &events);
    let found = Found {
        generation: state.generation.as_ref().map(Commit::to_string).unwrap_or_default(),
        trial: state.trial.as_ref().map(|t| t.commit.to_string()),
        lineage: lineage_head(git),
        owner_files: waiting_owner_files(home),
    };
    let mut done = Vec::new();
    for action in reconcile(&tail, &found) {
        match action {
            Action::Finish(m) => {
                // The journal is the kernel's own, but it is read as text.
                let Ok(to) = Commit::parse(&m.to) else {
                    log::info(format!("the journal moved to {:?}, which is not a commit", m.to));
                    continue;
                };
                let accepted = m.kind == MoveKind::Accepted;
                hand_over = prepare_handover(home, git, &m.from, &to, accepted)?;
                state.generation = Some(to.clone());
                state.previous = Commit::parse(&m.from).ok().filter(|_| accepted);
                state.trial = accepted.then_some(Trial { commit: to, reply_by: None });
                state.pending = None;
                if accepted {
                    state.refused = None;
                }
                state.save(home)?;
                crash::point("switched");
                let what = if accepted { "promotion" } else { "return" };
                done.push(format!(
                    "finished the {what} from {} to {} that the journal held and the state did not",
                    short(&m.from),
                    short(&m.to)
                ));
            }
            Action::DropTrial => {
                state.trial = None;
                done.push("ended a trial of a generation that is no longer current".into());
            }
            Action::MoveLineage { to } => {
                let oid = repo::commit_id(git, home, &to)?;
                repo::move_lineage(git, home, oid)?;
                crash::point("lineage.moved");
                done.push(format!("moved lineage/local to {}, the state's generation", short(&to)));
            }
            Action::RemoveOwnerFile(name) => {
                let dir = home.join(OWNER_DIR);
                match std::fs::remove_file(dir.join(&name)) {
                    Ok(()) => {
                        let _ = teneral_core::fsutil::sync_dir(&dir);
                        crash::point("owner.removed");
                        done.push(format!(
                            "removed owner file {name}, whose line the journal already holds"
                        ));
                    }
                    Err(e) => log::warn(format!("cannot remove owner file {name}: {e}")),
                }
            }
            Action::AnswerUndecided(request) => {
                let Ok(asked_by) = Commit::parse(&request.commit) else {
                    log::info(format!("a request journaled by {:?}, not a commit", request.commit));
                    continue;
                };
                answer_undecided(
                    journal,
                    &asked_by,
                    &request.candidate,
                    Some(request.seq),
                    "the kernel stopped before it decided",
                );
                done.push(format!(
                    "answered the request for {} (seq {}): nothing decided",
                    short(&request.candidate),
                    request.seq
                ));
            }
            Action::AnswerOffer(owed) => {
                done.extend(crate::offer::reconcile::journal_answer(home, journal, &owed));
            }
        }
    }
    if let Some(counted) = refusals_the_state_missed(&events, state) {
        done.push(counted);
    }
    if let Some(stale) = stale_kernel_trial(home, state.generation.as_ref())? {
        done.push(format!(
            "dropped the kernel trial of generation {}, which never became current",
            short(&stale)
        ));
    }
    state.pending = None;
    state.save(home)?;
    if let (false, Some(commit)) = (done.is_empty(), &state.generation) {
        let text = format!("at start, the kernel {}", done.join("; "));
        log::info(&text);
        kernel_event(
            journal,
            commit,
            EventKind::KernelNotice,
            json!({"text": text, "reconciled": done}),
        );
    }
    crash::point("reconciled");
    if let (true, Some(to)) = (hand_over, &state.generation) {
        log::info(format!("generation {} runs another kernel: handing over", short(to)));
    }
    let generation = state.generation.as_ref().map(Commit::to_string).unwrap_or_default();
    let counts = super::counts::carried(started.as_ref(), &events, &generation);
    Ok(Reconciled { hand_over, cut_line: tail.cut_line, counts })
}

/// Tells the agent and its owner that the turn of an owner line was cut by
/// the kernel's end before any reply: one `kernel.notice` naming the line's
/// seq in `cut_turn`, journaled after `kernel.started` so that the next
/// start finds it again if this kernel too ends before the body answers.
/// The body reads it from the journal and takes the turn again.
pub(super) fn tell_cut_turn(journal: &SharedJournal, commit: &Commit, line: &CutLine) {
    let text = format!(
        "the kernel restarted before the agent answered the owner's line (seq {}); \
         the agent is asked to take that turn again",
        line.seq
    );
    log::info(&text);
    let fields = json!({"text": text, CUT_TURN: line.seq});
    kernel_event(journal, commit, EventKind::KernelNotice, fields);
}

/// At the kernel's end (a stop, or the hand-over to the next kernel): the
/// owner line whose turn is still unanswered, if any, is named to the
/// owner at once (one `kernel.notice` with `cut_turn`), so that no owner
/// waits in silence until the next start. That start names the line again,
/// and the agent takes the turn then.
pub(super) fn tell_cut_turn_at_end(home: &Path, journal: &SharedJournal, commit: &Commit) {
    let line = match since_last_start(home) {
        Ok((started, events)) => Tail::since(started.as_ref(), &events).cut_line,
        Err(e) => {
            log::warn(format!("cannot tell whether the end cuts a turn: {e}"));
            return;
        }
    };
    let Some(line) = line else { return };
    let text = format!(
        "the kernel ended before the agent answered the owner's line (seq {}); \
         the agent is asked to take that turn again when the kernel starts",
        line.seq
    );
    log::info(&text);
    kernel_event(
        journal,
        commit,
        EventKind::KernelNotice,
        json!({"text": text, CUT_TURN: line.seq}),
    );
}

/// Takes the refusals in a row from the journal when a kill fell between
/// journaling a refusal and saving its count: what it did, if anything.
fn refusals_the_state_missed(events: &[Event], state: &mut State) -> Option<String> {
    let times = |e: &Event| e.fields.get("refusals").and_then(|v| v.as_u64());
    let row = crate::lifecycle::journaled_row(events.iter().map(|e| {
        (e.known_kind(), e.text("candidate"), times(e).and_then(|t| u32::try_from(t).ok()))
    }));
    let Some(Some((candidate, times))) = row else { return None };
    let commit = Commit::parse(candidate).ok()?;
    let journaled = Some(Refused { commit, times });
    if state.refused == journaled {
        return None;
    }
    state.refused = journaled;
    Some(format!(
        "counted {times} refusal(s) in a row of {} that the state had not",
        short(candidate)
    ))
}

/// The hand-over of a move the start finishes (`crate::launcher::handover`).
/// A move whose `from` is not a commit (a journal from before moves named
/// it) is taken as bringing no new kernel.
fn prepare_handover(
    home: &Path,
    git: &Repository,
    from: &str,
    to: &Commit,
    promoted: bool,
) -> Result<bool, KernelError> {
    let to = repo::commit_id(git, home, to)?;
    let from = Commit::parse(from).ok().and_then(|f| repo::commit_id(git, home, &f).ok());
    crate::launcher::handover::prepare(home, git, from.unwrap_or(to), to, promoted)
        .map_err(|e| KernelError::Io(e.to_string()))
}

/// Removes `.teneral/trial.json` when it names another generation than the
/// current one (its promotion was never journaled, or the generation has
/// moved on): the generation it names, if any.
fn stale_kernel_trial(
    home: &Path,
    current: Option<&Commit>,
) -> Result<Option<Commit>, KernelError> {
    use crate::launcher::trial::Trial as KernelTrial;
    let trial = KernelTrial::load(home).map_err(|e| KernelError::Io(e.to_string()))?;
    match trial {
        Some(t) if Some(&t.commit) != current => {
            KernelTrial::remove(home).map_err(|e| KernelError::Io(e.to_string()))?;
            Ok(Some(t.commit))
        }
        _ => Ok(None),
    }
}

/// Says once per generation (`crate::launcher::install`) that the
/// generation's units, Containerfile or SIGNERS differ from the install's:
/// one log line and one `kernel.notice` holding `install_differs`.
pub(super) fn say_if_install_differs(
    home: &Path,
    git: &Repository,
    journal: &SharedJournal,
    commit: &Commit,
) {
    use crate::launcher::install;
    if install::said_for(home, commit.as_str()) {
        return;
    }
    let paths = repo::commit_id(git, home, commit)
        .map_err(|e| e.to_string())
        .and_then(|g| Ok((g, repo::head_commit(git, home).map_err(|e| e.to_string())?)))
        .and_then(|(g, i)| install::differs(git, g, i).map_err(|e| e.to_string()));
    let paths = match paths {
        Ok(p) if p.is_empty() => return,
        Ok(p) => p,
        Err(e) => {
            log::warn(format!(
                "cannot compare the generation's install files with the install's: {e}"
            ));
            return;
        }
    };
    let text = install::words(commit.as_str(), &paths);
    log::warn(&text);
    kernel_event(
        journal,
        commit,
        EventKind::KernelNotice,
        json!({"text": text, "install_differs": paths}),
    );
    if let Err(e) = install::mark_said(home, commit.as_str()) {
        log::warn(format!("cannot note that the install's difference was said: {e}"));
    }
}

/// Removes what a killed kernel of this individual left lying: its event
/// sockets, the temporary files of its (and its clients') atomic writes
/// anywhere in `.teneral/` but its checkouts and build targets, the words
/// of a reply it was streaming, and a send-back request no client waits for.
/// Call holding the lock.
pub(super) fn sweep_files(home: &Path) {
    match crate::events::sweep_stale(home) {
        Ok(0) => {}
        Ok(n) => log::info(format!("removed {n} event socket(s) a killed kernel left behind")),
        Err(e) => log::warn(format!("cannot sweep old event sockets: {e}")),
    }
    match teneral_core::fsutil::remove_temp_files(&home.join(".teneral")) {
        Ok(0) => {}
        Ok(n) => log::info(format!("removed {n} temporary file(s) a killed writer left behind")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn(format!("cannot sweep temporary files in .teneral: {e}")),
    }
    // The words of a reply a killed kernel's body was streaming: its turn
    // is taken again, so they are no reply in progress.
    if let Err(e) = teneral_core::live::clear(home) {
        log::warn(format!("cannot empty the reply in progress: {e}"));
    }
    // A send-back request written before this kernel took the lock was
    // left by a `teneralctl back` that ended (killed, or its kernel gone)
    // before a kernel took it: no client waits for it, and a later SIGHUP
    // must not act on it. One written since was written for this kernel
    // (`back` read its pid from the lock) and waits for its answer.
    let request = home.join(teneral_core::back_request::BACK_REQUEST);
    let written = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified());
    let (asked, locked) = (written(&request), written(&home.join(teneral_core::lock::LOCK_PATH)));
    match (asked, locked) {
        (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => {}
        (Ok(asked), Ok(locked)) if !left_before_the_lock(asked, locked) => {}
        _ => match std::fs::remove_file(&request) {
            Ok(()) => log::info(
                "removed a send-back request that no `teneralctl back` waits for any more; \
                 run `teneralctl back` again to go back",
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn(format!("cannot remove {}: {e}", request.display())),
        },
    }
}

/// Whether a send-back request written at `asked` was left before the
/// kernel that took the lock at `locked` (the lock file's time, when it
/// wrote its pid). File times are coarse (a clock tick): a request of the
/// same tick counts as this kernel's.
pub(super) fn left_before_the_lock(asked: SystemTime, locked: SystemTime) -> bool {
    asked < locked
}

/// Names the individual and its generation (commit and ordinal) on every
/// line the kernel logs from now on: the generation the state file says, or
/// HEAD at a first start, until the start settles which one runs.
pub(super) fn name_in_the_log(home: &Path) {
    log::set_individual(home);
    match teneral_core::back_request::lineage(home) {
        Ok(lineage) => log::set_lineage(&lineage),
        Err(e) => log::warn(format!("the log's generation numbers may be off: {e}")),
    }
    let head = || repo::open(home).ok().and_then(|git| repo::head_commit(&git, home).ok());
    let commit =
        State::load(home).ok().and_then(|s| s.generation).or_else(|| head().map(repo::commit_of));
    if let Some(commit) = commit {
        log::set_commit(&commit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_send_back_request_is_stale_only_when_written_before_the_lock() {
        let locked = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let table = [
            (locked - Duration::from_secs(60), true),
            (locked - Duration::from_nanos(1), true),
            (locked, false),
            (locked + Duration::from_millis(3), false),
        ];
        for (asked, stale) in table {
            assert_eq!(left_before_the_lock(asked, locked), stale, "{asked:?}");
        }
    }
}
