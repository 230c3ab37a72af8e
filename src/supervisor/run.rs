//! One run of a body: start it with its event channel, watch it until the
//! lifecycle rules decide, the owner sends it back, or the kernel is asked
//! to stop.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::sync::mpsc;

use super::Kernel;
use crate::events::{self, kernel_event, Channel, Seen};
use crate::generation::{self, Start};
use crate::lifecycle::{Decision, Input, Lifecycle};
use crate::runner::Limits;
use crate::state::BodyProcess;
use crate::status::Doing;
use crate::{log, spawn};

/// How one run ended.
pub enum RunEnd {
    /// The rules decided; `requested` is the mutation the body asked for in
    /// this run, if any; `tail` is the end of its stderr.
    Decided { decision: Decision, requested: Option<String>, tail: String },
    /// SIGTERM or SIGINT: the body is stopped, the kernel ends.
    AskedToStop,
    /// The owner asked to go back to `to` (SIGHUP with a request); the body is stopped.
    SentBack { to: String },
}

/// What the run needs to start a body.
pub struct RunOf<'a> {
    pub binary: &'a Path,
    pub commit: &'a str,
    pub model_url: &'a str,
    pub body_key: &'a str,
    pub run: u32,
    /// The directory for `TENERAL_ORGANS`, when the commit pins organs.
    pub organs: Option<&'a Path>,
}

impl Kernel {
    /// Starts the body once and watches it.
    pub(super) async fn one_run(
        &mut self,
        of: RunOf<'_>,
        life: &mut Lifecycle,
    ) -> Result<RunEnd, super::KernelError> {
        let commit = of.commit;
        let socket = events::socket_path(&self.home, commit, &of.run.to_string())
            .map_err(super::io("the event socket"))?;
        let listener = events::bind(&socket).map_err(super::io("the event socket"))?;
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let channel = Channel {
            home: self.home.clone(),
            commit: commit.to_owned(),
            journal: Arc::clone(&self.journal),
            seen: seen_tx,
        };
        let admit = events::Admit::new();
        let server = tokio::spawn(channel.serve_admitting(listener, admit.clone()));
        let start = Start {
            home: &self.home,
            commit,
            events: &socket,
            model_url: of.model_url,
            body_key: of.body_key,
            settings: &self.settings,
            clock: true,
            organs: of.organs,
        };
        self.status.set(Doing::StartingBody);
        let limits = Limits::for_body(&self.settings);
        let mut body = generation::start(&self.runner, of.binary, &start, &limits).await?;
        let pid = body.pid().unwrap_or_default();
        let start_time = spawn::process_start_time(pid).unwrap_or_default();
        let unit = body.is_unit().then(|| body.unit().to_owned());
        // Only now is the body known: until here the channel admits no one.
        if let Some(pid) = body.pid() {
            admit.set_body(pid, unit.as_deref());
        }
        self.state.body = Some(BodyProcess { pid, start_time, unit: unit.clone() });
        self.state.save(&self.home)?;
        let mut started = json!({"pid": pid, "events": socket.to_string_lossy()});
        if let Some(unit) = &unit {
            started["unit"] = json!(unit);
        }
        kernel_event(&self.journal, commit, "generation.started", started);
        life.on(Input::Started, Instant::now());

        let grace = self.settings.timing.stop_grace;
        let mut requested = None;
        let end = loop {
            let deadline = life.deadline();
            let sleep = async move {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                Some(event) = seen.recv() => {
                    if let Some(doing) = event.doing() { self.status.set(doing); }
                    see(event, life, &mut requested);
                }
                ended = body.wait() => {
                    // Events the body sent before it ended count first.
                    while let Ok(event) = seen.try_recv() {
                        see(event, life, &mut requested);
                    }
                    let exit = ended.exit;
                    kernel_event(&self.journal, commit, "generation.exited", json!({"status": exit.to_string(), "result": ended.result}));
                    let code = match exit { spawn::Exit::Code(c) => Some(c), spawn::Exit::Signal(_) => None };
                    let decision = life.on(Input::Exited { code }, Instant::now());
                    // A cage step that failed says which, before the body's own words.
                    let cage = ended.cage_step().map(|d| format!("{d}\n")).unwrap_or_default();
                    break RunEnd::Decided { decision, requested, tail: format!("{cage}{}", body.stderr_tail()) };
                }
                () = sleep => {
                    if let Decision::Kill { reason } = life.on(Input::Deadline, Instant::now()) {
                        log::info(format!("stopping the body: {reason}"));
                        body.signal(rustix::process::Signal::KILL).await;
                    }
                }
                _ = self.sigterm.recv() => { self.asked_to_stop(); body.stop(grace).await; break RunEnd::AskedToStop; }
                _ = self.sigint.recv() => { self.asked_to_stop(); body.stop(grace).await; break RunEnd::AskedToStop; }
                _ = self.sighup.recv() => {
                    if let Some(to) = self.back_request(commit) {
                        body.stop(grace).await;
                        break RunEnd::SentBack { to };
                    }
                }
            }
        };
        server.abort();
        let _ = std::fs::remove_file(&socket);
        self.state.body = None;
        self.state.save(&self.home)?;
        Ok(end)
    }
}

impl Kernel {
    /// Says, before the body is stopped, that the kernel is on its way out.
    fn asked_to_stop(&self) {
        self.status.set(Doing::Stopping);
        self.status.stopping();
    }
}

/// Feeds what the channel saw into the rules.
fn see(event: Seen, life: &mut Lifecycle, requested: &mut Option<String>) {
    let input = match event {
        Seen::Ready => Input::Ready,
        Seen::Replied => Input::Replied,
        Seen::Interrupted => Input::Interrupted,
        Seen::MutationRequested { candidate } => {
            *requested = Some(candidate);
            return;
        }
        Seen::OwnerLine | Seen::TurnEnded | Seen::Thinking | Seen::Tool(_) => return,
    };
    life.on(input, Instant::now());
}
