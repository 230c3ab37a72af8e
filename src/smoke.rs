//! The smoke run: the candidate started as a generation is, on an empty
//! throwaway individual with one message waiting, against a stand-in model
//! of its own (a caged child on loopback, its port forwarded into the smoke
//! run's loopback-only network) with a dummy key and the clock off. It passes when the
//! body reports ready and answers that message within the limit.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::events::{self, Channel, Seen};
use crate::generation::{self, Start};
use crate::runner::{self, Launch, Limits, Profile, Runner};
use crate::settings::Settings;
use crate::standin::child::{StandinChild, Start as StandinStart};
use teneral_core::commit::Commit;
use teneral_core::journal::{writer::Journal, JOURNAL_PATH};

/// Where the throwaway individual lives while the smoke run lasts.
pub const SMOKE_DIR: &str = ".teneral/gate/smoke";
/// The message waiting for the candidate.
pub const MESSAGE: &str = "This is the smoke run of a new generation: answer in one short line.";

/// One smoke run of `commit`, whose body is built at `binary`; the checkout
/// it came from gives the throwaway individual its `BIRTH.md`.
pub struct Smoke<'a> {
    pub home: &'a Path,
    pub checkout: &'a Path,
    pub binary: &'a Path,
    pub commit: &'a Commit,
    pub settings: &'a Settings,
    pub runner: &'a Runner,
    pub organs: Option<&'a Path>,
    pub limit: Option<Duration>,
    /// The kernel's own program (the stand-in model is one of its commands).
    pub kernel_exe: &'a Path,
}

/// What the smoke run has seen of the body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub ready: bool,
    /// The waiting message was taken in.
    pub line_taken: bool,
}

/// When, in seconds from the smoke run's start, the body was started (after
/// the throwaway individual and the stand-in model were set up), reported
/// ready, and answered.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timeline {
    pub started: f64,
    pub ready: Option<f64>,
    pub answered: f64,
}

/// Something that happened during the smoke run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    Seen(Seen),
    /// The body ended, as said.
    Ended(String),
    /// The limit of this many seconds ran out.
    TimeUp(u64),
}

/// The smoke run's rule: it passes when the body answers after taking in the
/// waiting message; it fails when the body ends first or the time runs out,
/// saying which of the two it had not done. `None`: go on watching.
pub fn rule(progress: &mut Progress, happened: Happened) -> Option<Result<(), String>> {
    match happened {
        Happened::Seen(Seen::Ready) => progress.ready = true,
        Happened::Seen(Seen::OwnerLine) => progress.line_taken = true,
        Happened::Seen(Seen::Replied) if progress.line_taken => return Some(Ok(())),
        Happened::Seen(_) => {}
        Happened::Ended(exit) => {
            return Some(Err(format!("the body ended ({exit}) before it answered")))
        }
        Happened::TimeUp(secs) => {
            let what = if progress.ready { "answer the waiting message" } else { "report ready" };
            return Some(Err(format!(
                "the body did not {what} within {secs} s (TENERAL_SMOKE_SECONDS in .env raises the limit)"
            )));
        }
    }
    None
}

impl Smoke<'_> {
    /// `Err` holds what went wrong and what the body last wrote to stderr.
    pub async fn run(&self) -> Result<Timeline, String> {
        let dir = self.home.join(SMOKE_DIR);
        let _ = std::fs::remove_dir_all(&dir);
        let result = self.smoke(&dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    async fn smoke(&self, dir: &Path) -> Result<Timeline, String> {
        let began = Instant::now();
        let setup =
            |e: std::io::Error| format!("cannot set up the smoke run in {}: {e}", dir.display());
        std::fs::create_dir_all(dir.join("memory")).map_err(setup)?;
        // The checks could write the checkout: read the letter beneath it,
        // following no link, a regular file only.
        let birth = Path::new("BIRTH.md");
        if let Ok(letter) = teneral_core::fsutil::read_beneath(self.checkout, birth, 1 << 20) {
            std::fs::write(dir.join("BIRTH.md"), letter).map_err(setup)?;
        }
        teneral_core::owner::write_line(dir, MESSAGE).map_err(setup)?;
        let journal = Journal::open(&dir.join(JOURNAL_PATH)).map_err(|e| e.to_string())?;

        let socket = events::socket_path(dir, self.commit, "smoke").map_err(setup)?;
        let listener = events::bind(&socket).map_err(setup)?;
        // The cage lets the smoke run execute only what lies in its own
        // places, so the candidate's binary runs from a copy inside them.
        let binary = dir.join(".teneral/teneral-body");
        std::fs::create_dir_all(dir.join(".teneral")).map_err(setup)?;
        std::fs::copy(self.binary, &binary).map_err(setup)?;

        // The throwaway stand-in: a caged child of its own, no script.
        let key = "tnl-smoke-dummy-key";
        let model_start = StandinStart {
            program: self.kernel_exe,
            individual: self.home,
            key,
            script: None,
            scripted: false,
            log: None,
            limits: Limits::for_body(self.settings),
        };
        let model_unit = runner::systemd::gate_unit(self.commit, "standin");
        let model = StandinChild::start(self.runner, &model_unit, model_start)
            .await
            .map_err(|e| format!("cannot serve the stand-in model: {e}"))?;
        let model_url = model.base_url().to_owned();
        let model_port = match model_port(&model_url) {
            Ok(port) => port,
            Err(e) => {
                model.stop().await;
                return Err(e);
            }
        };

        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let channel = Channel {
            home: dir.to_owned(),
            commit: self.commit.to_owned(),
            journal: Arc::new(Mutex::new(journal)),
            seen: seen_tx,
        };
        let admit = events::Admit::new();
        let channel_task = tokio::spawn(channel.serve_admitting(listener, admit.clone()));
        let start = Start {
            home: dir,
            commit: self.commit,
            events: &socket,
            model_url: &model_url,
            body_key: key,
            settings: self.settings,
            clock: false,
            organs: self.organs,
        };
        let unit = runner::systemd::gate_unit(self.commit, "smoke");
        let mut spec = crate::spawn::Spec::new(binary, dir);
        spec.env = generation::environment(&start);
        // Loopback only; the stand-in's port is relayed in at the same address.
        let profile = Profile::Smoke {
            checkout: self.checkout.to_owned(),
            individual: dir.to_owned(),
            writable: vec![],
            forward: vec![model_port],
        };
        let launch = Launch::new(spec, Limits::for_body(self.settings)).caged(profile);
        let mut body = match self.runner.start(&unit, launch).await {
            Ok(body) => body,
            Err(e) => {
                channel_task.abort();
                model.stop().await;
                return Err(format!("cannot start the body: {e}"));
            }
        };
        if let Some(pid) = body.pid() {
            admit.set_body(pid, body.is_unit().then(|| body.unit()));
        }

        let started = Instant::now();
        let mut timeline =
            Timeline { started: began.elapsed().as_secs_f64(), ..Timeline::default() };
        let deadline = self.limit.map(|l| tokio::time::Instant::from_std(started + l));
        let mut progress = Progress::default();
        let outcome = loop {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let happened = tokio::select! {
                biased;
                Some(event) = seen.recv() => Happened::Seen(event),
                ended = body.wait() => Happened::Ended(ended.exit.to_string()),
                () = sleep => Happened::TimeUp(self.limit.map(|l| l.as_secs()).unwrap_or_default()),
            };
            if happened == Happened::Seen(Seen::Ready) && timeline.ready.is_none() {
                timeline.ready = Some(began.elapsed().as_secs_f64());
            }
            if let Some(outcome) = rule(&mut progress, happened) {
                timeline.answered = began.elapsed().as_secs_f64();
                break outcome;
            }
        };
        body.stop(self.settings.test.timing.stop_grace).await;
        channel_task.abort();
        model.stop().await;
        let _ = std::fs::remove_file(&socket);
        outcome.map(|()| timeline).map_err(|why| {
            let tail = body.stderr_tail();
            if tail.is_empty() {
                why
            } else {
                format!("{why}; what it wrote to stderr:\n{tail}")
            }
        })
    }
}

/// The port of the stand-in's `http://127.0.0.1:PORT/v1`, to forward in.
fn model_port(url: &str) -> Result<u16, String> {
    url.strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .and_then(|addr| addr.parse::<std::net::SocketAddr>().ok())
        .map(|addr| addr.port())
        .ok_or_else(|| format!("the stand-in model announced {url}, which has no loopback port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[Happened]) -> Option<Result<(), String>> {
        let mut progress = Progress::default();
        events.iter().find_map(|h| rule(&mut progress, h.clone()))
    }

    #[test]
    fn the_smoke_rule() {
        use Happened::{Ended, Seen as S, TimeUp};
        let ok: Option<Result<(), String>> = Some(Ok(()));
        type Case = (&'static str, Vec<Happened>, Option<Result<(), String>>);
        let cases: Vec<Case> = vec![
            ("answers the waiting line", vec![S(Seen::Ready), S(Seen::OwnerLine), S(Seen::Replied)], ok.clone()),
            ("answers without saying ready", vec![S(Seen::OwnerLine), S(Seen::Replied)], ok),
            ("a reply before the line counts for nothing", vec![S(Seen::Ready), S(Seen::Replied)], None),
            ("still thinking", vec![S(Seen::Ready), S(Seen::OwnerLine), S(Seen::Thinking)], None),
            (
                "ends before answering",
                vec![S(Seen::Ready), Ended("exit status 1".into())],
                Some(Err("the body ended (exit status 1) before it answered".into())),
            ),
            (
                "never ready",
                vec![TimeUp(30)],
                Some(Err("the body did not report ready within 30 s (TENERAL_SMOKE_SECONDS in .env raises the limit)".into())),
            ),
            (
                "ready but silent",
                vec![S(Seen::Ready), S(Seen::OwnerLine), TimeUp(30)],
                Some(Err("the body did not answer the waiting message within 30 s (TENERAL_SMOKE_SECONDS in .env raises the limit)".into())),
            ),
        ];
        for (what, events, want) in cases {
            assert_eq!(run(&events), want, "{what}");
        }
    }
}
