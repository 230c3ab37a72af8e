//! `teneralctl fleet`: many individuals at a glance, one line each: its
//! name, whether its kernel runs (and serves), its generation and how long
//! it has been that one, what it is doing, its replies and failures today
//! (UTC), and its last mutation's verdict. From directories given, or from
//! the pods of a Kubernetes namespace (`--kube`), each asked through
//! `kubectl exec ... teneralctl fleet --json .` (docs/kubernetes.md).
//!
//! Invariants: what a line says is decided by [`Tally`] from the journal's
//! events and the day given, and by [`crate::report::facts`] from what the
//! kernel left, so both forms say the same; a failure is a generation that
//! exited by itself or was rolled back. Every `kubectl` runs under a time
//! limit, and a pod that cannot be asked is listed as such, not left out.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use teneral_core::journal::{EventKind, Forwards, JOURNAL_PATH};

use crate::commit::short;
use crate::when::{duration, parse_ts, rfc3339};

/// How long one `kubectl` may take.
const KUBECTL_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("name the individuals' directories, or --kube NAMESPACE for the pods of a namespace")]
    Nothing,
    #[error(
        "{0}; is kubectl installed and pointed at the cluster (kubectl config current-context)?"
    )]
    Kubectl(String),
    #[error("cannot write to stdout: {0}")]
    Out(io::Error),
}

/// One individual's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Its directory, or `namespace/pod`.
    pub place: String,
    pub running: bool,
    /// Running and serving (`teneralctl status` exits 0).
    pub serving: bool,
    pub generation: Option<String>,
    /// When the current generation first reported ready (RFC 3339).
    pub generation_since: Option<String>,
    /// What the kernel last said it does.
    pub doing: Option<String>,
    pub replies_today: u64,
    pub failures_today: u64,
    /// `accepted` or `rejected`, and when (RFC 3339).
    pub last_mutation: Option<(String, String)>,
    /// Why the line is short: the journal or the pod could not be read.
    pub problem: Option<String>,
}

/// What the journal says of today and of the last mutation: a fold over
/// its events, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// The day counted, `YYYY-MM-DD` (UTC).
    pub today: String,
    pub replies_today: u64,
    pub failures_today: u64,
    pub last_mutation: Option<(String, String)>,
}

impl Tally {
    pub fn new(today: &str) -> Tally {
        Tally { today: today.to_owned(), ..Tally::default() }
    }

    /// Takes one event in.
    pub fn take(&mut self, kind: Option<EventKind>, ts: &str) {
        let today = ts.starts_with(&self.today);
        match kind {
            Some(EventKind::Reply) if today => self.replies_today += 1,
            Some(EventKind::GenerationExited | EventKind::GenerationRolledback) if today => {
                self.failures_today += 1;
            }
            Some(EventKind::MutationAccepted) => {
                self.last_mutation = Some(("accepted".into(), ts.to_owned()));
            }
            Some(EventKind::MutationRejected) => {
                self.last_mutation = Some(("rejected".into(), ts.to_owned()));
            }
            _ => {}
        }
    }
}

/// The line of the individual at `home`, on day `today` (`YYYY-MM-DD`).
pub fn member(home: &Path, today: &str) -> Member {
    let facts = crate::report::facts(home);
    let mut tally = Tally::new(today);
    let mut lineage = teneral_core::generations::Lineage::new();
    let mut problem = None;
    match std::fs::File::open(home.join(JOURNAL_PATH)) {
        Ok(file) => {
            let mut lines = Forwards::new(file);
            loop {
                match lines.next_line() {
                    Ok(Some(line)) => {
                        if let Some(event) = teneral_core::journal::parse_line(line) {
                            tally.take(event.known_kind(), &event.ts);
                            lineage.take(&event);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        problem = Some(format!("the journal cannot be read: {e}"));
                        break;
                    }
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => problem = Some(format!("the journal cannot be read: {e}")),
    }
    let generation_since = facts
        .generation
        .as_ref()
        .and_then(|g| lineage.generations().iter().find(|x| &x.commit == g))
        .and_then(|g| g.ready_at.clone());
    let name = home
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| home.display().to_string());
    Member {
        name,
        place: home.display().to_string(),
        running: facts.running,
        serving: facts.serving,
        generation: facts.generation,
        generation_since,
        doing: facts.doing.map(|(doing, _)| doing),
        replies_today: tally.replies_today,
        failures_today: tally.failures_today,
        last_mutation: tally.last_mutation,
        problem: problem.or(facts.state_error),
    }
}

impl Member {
    /// The member as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "place": self.place,
            "running": self.running,
            "serving": self.serving,
            "generation": self.generation,
            "generation_since": self.generation_since,
            "doing": self.doing,
            "replies_today": self.replies_today,
            "failures_today": self.failures_today,
            "last_mutation": self.last_mutation.as_ref().map(|(verdict, at)| {
                json!({"verdict": verdict, "at": at})
            }),
            "problem": self.problem,
        })
    }

    /// A member from [`Member::to_json`]'s object; `None` when it is not one.
    pub fn from_json(value: &Value) -> Option<Member> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
        let count = |name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
        let flag = |name: &str| value.get(name).and_then(Value::as_bool).unwrap_or(false);
        let mutation = value.get("last_mutation").filter(|v| !v.is_null());
        Some(Member {
            name: text("name")?,
            place: text("place")?,
            running: flag("running"),
            serving: flag("serving"),
            generation: text("generation"),
            generation_since: text("generation_since"),
            doing: text("doing"),
            replies_today: count("replies_today"),
            failures_today: count("failures_today"),
            last_mutation: mutation.and_then(|m| {
                Some((m.get("verdict")?.as_str()?.to_owned(), m.get("at")?.as_str()?.to_owned()))
            }),
            problem: text("problem"),
        })
    }
}

/// One line for people, at `now` (ms since the epoch).
pub fn line(m: &Member, now: i64) -> String {
    let ago = |ts: &str| parse_ts(ts).map(|t| duration((now - t).max(0)));
    let state = match (m.running, m.serving) {
        (true, true) => "serving",
        (true, false) => "starting",
        (false, _) => "not running",
    };
    let generation = match (&m.generation, m.generation_since.as_deref().and_then(ago)) {
        (Some(g), Some(age)) => format!("{} for {age}", short(g)),
        (Some(g), None) => short(g).to_owned(),
        (None, _) => "no generation".to_owned(),
    };
    let mut parts = vec![format!("{}: {state}", m.name), generation];
    if m.running {
        parts.push(m.doing.clone().unwrap_or_else(|| "doing nothing said".to_owned()));
    }
    parts.push(format!("today {} replies, {} failures", m.replies_today, m.failures_today));
    parts.push(match &m.last_mutation {
        Some((verdict, at)) => match ago(at) {
            Some(a) => format!("last mutation {verdict} {a} ago"),
            None => format!("last mutation {verdict}"),
        },
        None => "no mutation yet".to_owned(),
    });
    if let Some(problem) = &m.problem {
        parts.push(problem.clone());
    }
    parts.join("; ")
}

/// What the owner asked for.
#[derive(Debug, Clone, Default)]
pub struct FleetOptions {
    pub dirs: Vec<PathBuf>,
    pub kube: Option<String>,
    pub json: bool,
}

/// Lists the individuals; exit status 0 when every one serves, 3 otherwise.
pub fn run(options: &FleetOptions, out: &mut impl Write) -> Result<i32, FleetError> {
    let now = crate::when::now_ms();
    let today = rfc3339(now).chars().take(10).collect::<String>();
    let mut members: Vec<Member> = options.dirs.iter().map(|d| member(d, &today)).collect();
    if let Some(namespace) = &options.kube {
        members.extend(pods(namespace)?);
    }
    if members.is_empty() && options.kube.is_none() {
        return Err(FleetError::Nothing);
    }
    let text = if options.json {
        Value::Array(members.iter().map(Member::to_json).collect()).to_string()
    } else {
        members.iter().map(|m| line(m, now)).collect::<Vec<_>>().join("\n")
    };
    writeln!(out, "{text}").map_err(FleetError::Out)?;
    Ok(if members.iter().all(|m| m.serving) { 0 } else { 3 })
}

/// The individuals of the pods of `namespace` that run teneral: each pod's
/// own `teneralctl fleet --json .`.
fn pods(namespace: &str) -> Result<Vec<Member>, FleetError> {
    let names = kubectl(&[
        "get",
        "pods",
        "-n",
        namespace,
        "-l",
        "app.kubernetes.io/name=teneral",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])
    .map_err(FleetError::Kubectl)?;
    let mut members = Vec::new();
    for pod in names.split_whitespace() {
        let asked = kubectl(&[
            "exec",
            "-n",
            namespace,
            pod,
            "-c",
            "kernel",
            "--",
            "teneralctl",
            "fleet",
            "--json",
            ".",
        ]);
        let parsed = asked.and_then(|text| {
            let value: Value = serde_json::from_str(text.trim())
                .map_err(|e| format!("its answer is not JSON ({e})"))?;
            value
                .as_array()
                .and_then(|all| all.iter().map(Member::from_json).collect::<Option<Vec<_>>>())
                .ok_or_else(|| "its answer is not the fleet's JSON".to_owned())
        });
        match parsed {
            Ok(found) => members.extend(found.into_iter().map(|m| Member {
                name: pod.to_owned(),
                place: format!("{namespace}/{pod}"),
                ..m
            })),
            Err(why) => members.push(Member {
                name: pod.to_owned(),
                place: format!("{namespace}/{pod}"),
                running: false,
                serving: false,
                generation: None,
                generation_since: None,
                doing: None,
                replies_today: 0,
                failures_today: 0,
                last_mutation: None,
                problem: Some(format!("cannot be asked: {why}")),
            }),
        }
    }
    Ok(members)
}

/// Runs `kubectl args` under [`KUBECTL_LIMIT`]; its stdout, or why not.
fn kubectl(args: &[&str]) -> Result<String, String> {
    let shown = format!("kubectl {}", args.join(" "));
    let mut child = Command::new("kubectl")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{shown} cannot start: {e}"))?;
    let end = Instant::now() + KUBECTL_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{shown} did not end within {KUBECTL_LIMIT:?}"));
            }
            Err(e) => return Err(format!("{shown}: {e}")),
        }
    }
    let out = child.wait_with_output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        Err(format!("{shown} failed ({}): {}", out.status, said.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_counts_today_and_keeps_the_last_verdict() {
        let mut tally = Tally::new("2026-12-07");
        let table = [
            (EventKind::Reply, "2026-12-06T23:59:59.000Z"),
            (EventKind::Reply, "2026-12-07T00:00:01.000Z"),
            (EventKind::Reply, "2026-12-07T10:00:00.000Z"),
            (EventKind::GenerationExited, "2026-12-06T10:00:00.000Z"),
            (EventKind::GenerationExited, "2026-12-07T10:00:00.000Z"),
            (EventKind::GenerationRolledback, "2026-12-07T10:01:00.000Z"),
            (EventKind::MutationRejected, "2026-12-06T09:00:00.000Z"),
            (EventKind::MutationAccepted, "2026-12-07T11:00:00.000Z"),
            (EventKind::MutationRejected, "2026-12-07T12:00:00.000Z"),
            (EventKind::OwnerLine, "2026-12-07T12:00:00.000Z"),
        ];
        for (kind, ts) in table {
            tally.take(Some(kind), ts);
        }
        tally.take(None, "2026-12-07T12:00:00.000Z");
        assert_eq!(tally.replies_today, 2);
        assert_eq!(tally.failures_today, 2);
        assert_eq!(
            tally.last_mutation,
            Some(("rejected".to_owned(), "2026-12-07T12:00:00.000Z".to_owned()))
        );
    }

    #[test]
    fn a_line_says_each_part() {
        let now = parse_ts("2026-12-07T12:00:00.000Z").unwrap_or_default();
        let m = Member {
            name: "teneral-0".into(),
            place: "agents/teneral-0".into(),
            running: true,
            serving: true,
            generation: Some("0123456789abcdef0123456789abcdef01234567".into()),
            generation_since: Some("2026-12-07T10:00:00.000Z".into()),
            doing: Some("generation 0123456: resting".into()),
            replies_today: 3,
            failures_today: 1,
            last_mutation: Some(("accepted".into(), "2026-12-07T11:50:00.000Z".into())),
            problem: None,
        };
        assert_eq!(
            line(&m, now),
            "teneral-0: serving; 0123456 for 2 h; generation 0123456: resting; \
             today 3 replies, 1 failures; last mutation accepted 10 min ago"
        );
        assert_eq!(Member::from_json(&m.to_json()).as_ref(), Some(&m), "JSON and back");
        let stopped = Member { running: false, serving: false, last_mutation: None, ..m };
        assert_eq!(
            line(&stopped, now),
            "teneral-0: not running; 0123456 for 2 h; today 3 replies, 1 failures; no mutation yet"
        );
    }
}
