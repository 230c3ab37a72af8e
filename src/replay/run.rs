//! One run of a generation's built body on one stimulus, as the gate's smoke
//! run starts a candidate ([`crate::smoke`]): a throwaway individual
//! of its own under `.teneral/replay/`, the body in the cage's `smoke`
//! profile (loopback only, the model's port forwarded in), the clock off, a
//! dummy key, and a stand-in model of its own, scripted with what the model
//! answered at the time, or (an evaluation of the owner's provider) a
//! metered proxy of the kernel's to that provider, which stops the run when
//! the reported usage passes the budget or the provider fails. The
//! throwaway journal starts with the birth already taken (so no body speaks
//! its letter first), then the stimulus waits: an owner line in
//! `.teneral/owner/`, or an envelope in `inbox/`. The run lasts until the
//! body's turn ends, the body ends, the kernel stops it, or the limit.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc;

use super::stimuli::{Kind, Stimulus};
use super::table::{actions_of, Ending, Run};
use crate::events::{self, Channel, Seen};
use crate::generation::{self, Start};
use crate::proxy::meter::Meter;
use crate::runner::{self, Launch, Limits, Profile, Runner};
use crate::settings::Settings;
use crate::standin::child::{StandinChild, Start as StandinStart};
use teneral_core::commit::Commit;
use teneral_core::journal::{writer::Journal, EventKind, JOURNAL_PATH};

/// Where the throwaway individuals live while a replay lasts.
pub const REPLAY_DIR: &str = ".teneral/replay";

/// What every run of one replay shares.
pub struct Ground<'a> {
    /// The real individual (no cage rule may cover it; runs live beneath).
    pub home: &'a Path,
    pub settings: &'a Settings,
    pub runner: &'a Runner,
    /// The kernel's own program (the stand-in is one of its commands).
    pub kernel_exe: &'a Path,
    pub limit: Duration,
}

/// How much of a file a run left is read back.
pub const LOOK_BYTES: u64 = 1 << 20;

/// How a run's workspace is set up beyond the stimulus, and what is read
/// back from it after the body stopped.
#[derive(Debug, Default, Clone, Copy)]
pub struct Workspace<'a> {
    /// Files placed in the throwaway individual first: relative path, text.
    pub files: &'a [(PathBuf, String)],
    /// The stand-in's script, in place of the stimulus's own.
    pub script: Option<&'a str>,
    /// Files read back after the run, relative to the throwaway individual.
    pub look: &'a [PathBuf],
    /// Owner commands run with `sh -c` after the body stopped, in the same
    /// cage profile, on the throwaway individual; each within [`COMMAND_LIMIT`].
    pub commands: &'a [String],
    /// `Some(tokens)`: the owner's provider answers instead of a stand-in,
    /// through a proxy of the kernel's that counts the usage each answer
    /// reports and stops the run once it passes this budget or the
    /// provider fails.
    pub budget: Option<u64>,
}

/// What the owner's provider spent on a run, as the kernel's proxy read it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Spent {
    /// The tokens, input and output, the provider's answers reported.
    pub tokens: u64,
    /// Why the kernel stopped the run: the budget passed, or the provider
    /// failed.
    pub stopped: Option<String>,
}

/// How long one owner command after a run may last.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// What a run left, read by the kernel after the body stopped.
#[derive(Debug, Default, Clone)]
pub struct Left {
    /// The throwaway journal's events after the stimulus.
    pub events: Vec<teneral_core::journal::Event>,
    /// Each file of [`Workspace::look`]: at most [`LOOK_BYTES`] of it,
    /// `None` when it is absent, a link, or larger.
    pub files: std::collections::BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// Each command of [`Workspace::commands`]: `Ok` when it exited 0, else
    /// how it ended.
    pub commands: std::collections::BTreeMap<String, Result<(), String>>,
    /// What the owner's provider spent, when it answered.
    pub spent: Option<Spent>,
}

/// The event the throwaway journal holds before the stimulus: the body
/// was born already.
const BIRTH: &str = "[replay: a throwaway individual for one stimulus]";

impl Ground<'_> {
    /// Runs `binary` (the body of `commit`) on `stimulus` in the throwaway
    /// individual `name`; a run that cannot be made is a [`Ending::NotRun`].
    pub async fn run(
        &self,
        commit: &Commit,
        binary: &Path,
        stimulus: &Stimulus,
        name: &str,
    ) -> Run {
        self.run_in(commit, binary, stimulus, name, &Workspace::default()).await.0
    }

    /// [`Ground::run`] in a workspace set up as `workspace` says, with what
    /// the run left there.
    pub async fn run_in(
        &self,
        commit: &Commit,
        binary: &Path,
        stimulus: &Stimulus,
        name: &str,
        workspace: &Workspace<'_>,
    ) -> (Run, Left) {
        let place = self.home.join(REPLAY_DIR).join(name);
        let _ = std::fs::remove_dir_all(&place);
        let began = Instant::now();
        let (mut run, left) = match self.caged(&place, commit, binary, stimulus, workspace).await {
            Ok(done) => done,
            Err(why) => (
                Run {
                    actions: vec![],
                    reply_seconds: None,
                    run_seconds: 0.0,
                    ending: Ending::NotRun(why),
                },
                Left::default(),
            ),
        };
        let _ = std::fs::remove_dir_all(&place);
        run.run_seconds = began.elapsed().as_secs_f64();
        (run, left)
    }

    async fn caged(
        &self,
        place: &Path,
        commit: &Commit,
        binary: &Path,
        stimulus: &Stimulus,
        workspace: &Workspace<'_>,
    ) -> Result<(Run, Left), String> {
        let dir = place.join("home");
        let checkout = place.join("checkout");
        let setup = |e: std::io::Error| format!("cannot set up {}: {e}", dir.display());
        for made in [dir.join("memory"), dir.join(".teneral"), checkout.clone()] {
            std::fs::create_dir_all(made).map_err(setup)?;
        }
        let mut journal = Journal::open(&dir.join(JOURNAL_PATH)).map_err(|e| e.to_string())?;
        let born = [(EventKind::Birth, json!({"text": BIRTH})), (EventKind::TurnEnded, json!({}))];
        for (kind, fields) in born {
            journal.append_kernel(commit.as_str(), kind, fields).map_err(|e| e.to_string())?;
        }
        let after = journal.next_seq() - 1;
        for (path, text) in workspace.files {
            let at = dir.join(path);
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent).map_err(setup)?;
            }
            std::fs::write(at, text).map_err(setup)?;
        }
        place_stimulus(&dir, stimulus).map_err(setup)?;
        // Empty where the turn had no answer of the model's: the stand-in,
        // told to answer from its script alone, gives the default reply.
        let text = workspace.script.map(str::to_owned).or_else(|| stimulus.script_text());
        let script = place.join("script.jsonl");
        std::fs::write(&script, text.unwrap_or_default()).map_err(setup)?;
        let socket = events::socket_path(&dir, commit, "replay").map_err(setup)?;
        let listener = events::bind(&socket).map_err(setup)?;
        // The cage executes only what lies in the run's own places.
        let body_copy = dir.join(".teneral/teneral-body");
        std::fs::copy(binary, &body_copy).map_err(setup)?;

        let key = "tnl-replay-dummy-key";
        let (model, meter) = match workspace.budget {
            None => (Model::Standin(Box::new(self.standin(commit, &script, key).await?)), None),
            Some(budget) => {
                let meter = Arc::new(Meter::new(budget));
                (Model::Proxy(self.provider(key, Arc::clone(&meter)).await?), Some(meter))
            }
        };
        let model_url = model.base_url();
        let Some(model_port) = loopback_port(&model_url) else {
            model.stop().await;
            return Err(format!("the model announced {model_url}, no loopback port"));
        };

        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let journal = Arc::new(Mutex::new(journal));
        let channel = Channel {
            home: dir.clone(),
            commit: commit.clone(),
            journal: Arc::clone(&journal),
            seen: seen_tx,
        };
        let admit = events::Admit::new();
        let channel_task = tokio::spawn(channel.serve_admitting(listener, admit.clone()));
        let start = Start {
            home: &dir,
            commit,
            events: &socket,
            model_url: &model_url,
            body_key: key,
            settings: self.settings,
            clock: false,
            organs: None,
        };
        let mut spec = crate::spawn::Spec::new(&body_copy, &dir);
        spec.env = generation::environment(&start);
        let profile = Profile::Smoke {
            checkout,
            individual: dir.clone(),
            writable: vec![],
            forward: vec![model_port],
        };
        let launch = Launch::new(spec, Limits::for_body(self.settings)).caged(profile);
        let unit = runner::systemd::gate_unit(commit, "replay");
        let started = Instant::now();
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
        let deadline = tokio::time::Instant::from_std(started + self.limit);
        let watched = meter.clone();
        let stopped = async move {
            match watched.as_deref() {
                Some(meter) => meter.stopped().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stopped);
        let mut taken: Option<Instant> = None;
        let mut reply_seconds = None;
        let ending = loop {
            tokio::select! {
                biased;
                Some(event) = seen.recv() => match event {
                    Seen::OwnerLine | Seen::Thinking if taken.is_none() => taken = Some(Instant::now()),
                    Seen::Replied if reply_seconds.is_none() => {
                        let from = taken.unwrap_or(started);
                        reply_seconds = Some(from.elapsed().as_secs_f64());
                    }
                    Seen::TurnEnded if taken.is_some() => break Ending::TurnEnded,
                    Seen::Interrupted => break Ending::Interrupted,
                    _ => {}
                },
                ended = body.wait() => break Ending::BodyEnded(ended.exit.to_string()),
                why = &mut stopped => break Ending::NotRun(why.to_string()),
                () = tokio::time::sleep_until(deadline) => break Ending::TimeUp(self.limit.as_secs()),
            }
        };
        body.stop(self.settings.test.timing.stop_grace).await;
        channel_task.abort();
        model.stop().await;
        let _ = std::fs::remove_file(&socket);
        let events = read_events(&dir.join(JOURNAL_PATH));
        let files = workspace
            .look
            .iter()
            .map(|path| {
                let bytes = teneral_core::fsutil::read_beneath(&dir, path, LOOK_BYTES).ok();
                (path.clone(), bytes)
            })
            .collect();
        let mut commands = std::collections::BTreeMap::new();
        for (i, command) in workspace.commands.iter().enumerate() {
            let ended = self.command(commit, &dir, place, command, i).await;
            commands.insert(command.clone(), ended);
        }
        let run =
            Run { actions: actions_of(&events, after), reply_seconds, run_seconds: 0.0, ending };
        let events = events.into_iter().filter(|e| e.seq > after).collect();
        let spent = meter.map(|meter| Spent {
            tokens: meter.used(),
            stopped: meter.stop_reason().map(|why| why.to_string()),
        });
        Ok((run, Left { events, files, commands, spent }))
    }

    /// The run's own stand-in model, scripted with `script`, taking `key`.
    async fn standin(
        &self,
        commit: &Commit,
        script: &Path,
        key: &str,
    ) -> Result<StandinChild, String> {
        let model_start = StandinStart {
            program: self.kernel_exe,
            individual: self.home,
            key,
            script: Some(script),
            // A turn the model never answered has an empty script: the
            // default reply, as then, not the stand-in's own acts.
            scripted: true,
            log: None,
            limits: Limits::for_body(self.settings),
        };
        let model_unit = runner::systemd::gate_unit(commit, "replay-standin");
        StandinChild::start(self.runner, &model_unit, model_start)
            .await
            .map_err(|e| format!("cannot serve the stand-in model: {e}"))
    }

    /// A proxy of the kernel's to the owner's provider, taking `key` and
    /// spending each answer's usage on `meter`; the owner's key stays in it.
    async fn provider(&self, key: &str, meter: Arc<Meter>) -> Result<ProviderProxy, String> {
        let upstream = crate::proxy::Upstream::from_settings(self.settings).ok_or_else(|| {
            "the owner's provider answers this run, and the kernel can reach only a compatible \
             or openai provider with TENERAL_BASE_URL and TENERAL_API_KEY set; set them in .env, \
             or write model = \"standin\""
                .to_owned()
        })?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let proxy = crate::proxy::Proxy::bind_metered(addr, upstream, key.to_owned(), meter)
            .await
            .map_err(|e| format!("cannot serve the model proxy: {e}"))?;
        let url = format!("http://{}/v1", proxy.local_addr());
        Ok(ProviderProxy { url, task: tokio::spawn(proxy.serve()) })
    }

    /// Runs the owner's `command` with `sh -c` in the run's cage profile,
    /// on the throwaway individual `dir` (its working directory), loopback
    /// only and nothing forwarded; `Ok` when it exited 0.
    async fn command(
        &self,
        commit: &Commit,
        dir: &Path,
        place: &Path,
        command: &str,
        i: usize,
    ) -> Result<(), String> {
        let mut spec = crate::spawn::Spec::new("sh", dir).arg("-c").arg(command);
        spec.env = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), dir.as_os_str().to_owned()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        let profile = Profile::Smoke {
            checkout: place.join("checkout"),
            individual: dir.to_owned(),
            writable: vec![],
            forward: vec![],
        };
        let limits = Limits::for_body(self.settings).with_runtime_max(Some(COMMAND_LIMIT));
        let unit = runner::systemd::gate_unit(commit, &format!("replay-command-{i}"));
        let (ended, _) = self
            .runner
            .run(&unit, Launch::new(spec, limits).caged(profile))
            .await
            .map_err(|e| format!("could not be started: {e}"))?;
        match (ended.over_time, ended.cage_step(), ended.exit.success()) {
            (true, _, _) => Err(format!("did not end within {} s", COMMAND_LIMIT.as_secs())),
            (false, Some(step), _) => Err(format!("could not be caged ({step})")),
            (false, None, true) => Ok(()),
            (false, None, false) => Err(format!("ended with {}", ended.exit)),
        }
    }
}

/// The model a run's body reaches.
enum Model {
    /// A stand-in of the run's own.
    Standin(Box<StandinChild>),
    /// The kernel's metered proxy to the owner's provider.
    Proxy(ProviderProxy),
}

struct ProviderProxy {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Model {
    fn base_url(&self) -> String {
        match self {
            Model::Standin(child) => child.base_url().to_owned(),
            Model::Proxy(proxy) => proxy.url.clone(),
        }
    }

    async fn stop(self) {
        match self {
            Model::Standin(child) => drop(child.stop().await),
            Model::Proxy(proxy) => proxy.task.abort(),
        }
    }
}

/// Leaves the stimulus where the body looks: an owner line as the owner's
/// client writes it, an envelope as a sender does (a dot-name renamed).
fn place_stimulus(dir: &Path, stimulus: &Stimulus) -> std::io::Result<()> {
    match &stimulus.kind {
        Kind::Line(text) => teneral_core::owner::write_line(dir, text).map(drop),
        Kind::Envelope(envelope) => {
            let inbox = dir.join("inbox");
            std::fs::create_dir_all(&inbox)?;
            let bytes = serde_json::to_vec(envelope).map_err(std::io::Error::other)?;
            let name = format!("replay-{}.json", stimulus.seq);
            let tmp: PathBuf = inbox.join(format!(".{name}"));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(tmp, inbox.join(name))
        }
    }
}

/// The port of the stand-in's `http://127.0.0.1:PORT/v1`, to forward in.
fn loopback_port(url: &str) -> Option<u16> {
    url.strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .and_then(|addr| addr.parse::<std::net::SocketAddr>().ok())
        .filter(|addr| addr.ip().is_loopback())
        .map(|addr| addr.port())
}

/// The throwaway journal's events (it is small: one turn). The body wrote
/// in that individual's `memory/`, so the journal is opened beneath it and
/// a link there is not followed.
fn read_events(path: &Path) -> Vec<teneral_core::journal::Event> {
    let mut bytes = Vec::new();
    if let Ok(mut file) =
        teneral_core::journal::open_file(path, teneral_core::journal::Access::Read)
    {
        let _ = std::io::Read::read_to_end(&mut file, &mut bytes);
    }
    bytes.split(|&b| b == b'\n').filter_map(teneral_core::journal::reader::parse_line).collect()
}
