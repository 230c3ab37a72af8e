//! The smoke run: the candidate started as a generation is, on an empty
//! throwaway individual with one message waiting, against a stand-in model
//! served on loopback with a dummy key and the clock off. It passes when the
//! body reports ready and answers that message within the limit.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::confine::{self, Profile};
use crate::events::{self, Channel, Seen};
use crate::generation::{self, Start};
use crate::journal::{writer::Journal, JOURNAL_PATH};
use crate::runner::{Limits, Runner};
use crate::settings::Settings;
use crate::standin;

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
    pub commit: &'a str,
    pub settings: &'a Settings,
    pub runner: &'a Runner,
    pub organs: Option<&'a Path>,
    pub limit: Option<Duration>,
    /// The cage's options (the helper program); `None` runs it unconfined.
    pub cage: Option<confine::Options>,
}

impl Smoke<'_> {
    /// `Err` holds what went wrong and what the body last wrote to stderr.
    pub async fn run(&self) -> Result<(), String> {
        let dir = self.home.join(SMOKE_DIR);
        let _ = std::fs::remove_dir_all(&dir);
        let result = self.smoke(&dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    async fn smoke(&self, dir: &Path) -> Result<(), String> {
        let setup =
            |e: std::io::Error| format!("cannot set up the smoke run in {}: {e}", dir.display());
        std::fs::create_dir_all(dir.join("memory")).map_err(setup)?;
        if let Ok(letter) = std::fs::read(self.checkout.join("BIRTH.md")) {
            std::fs::write(dir.join("BIRTH.md"), letter).map_err(setup)?;
        }
        crate::owner::write_line(dir, MESSAGE).map_err(setup)?;
        let journal = Journal::open(&dir.join(JOURNAL_PATH)).map_err(|e| e.to_string())?;

        let key = "tnl-smoke-dummy-key";
        let config = standin::Config { key: Some(key.into()), script: None, log: None };
        let model = standin::Standin::bind(([127, 0, 0, 1], 0).into(), config)
            .await
            .map_err(|e| format!("cannot serve the stand-in model: {e}"))?;
        let model_url = model.base_url();
        let model_port = model.local_addr().port();
        let model_task = tokio::spawn(model.serve());

        let socket = events::socket_path(dir, self.commit, "smoke").map_err(setup)?;
        let listener = events::bind(&socket).map_err(setup)?;
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let channel = Channel {
            home: dir.to_owned(),
            commit: self.commit.to_owned(),
            journal: Arc::new(Mutex::new(journal)),
            seen: seen_tx,
        };
        let channel_task = tokio::spawn(channel.serve(listener));
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
        let unit = crate::systemd::gate_unit(self.commit, "smoke");
        let limits = Limits::from_settings(self.settings);
        // The cage lets the smoke run execute only what lies in its own
        // places, so the candidate's binary runs from a copy inside them.
        let binary = dir.join(".teneral/teneral-body");
        std::fs::create_dir_all(dir.join(".teneral")).map_err(setup)?;
        std::fs::copy(self.binary, &binary).map_err(setup)?;
        let mut argv = vec![binary.into_os_string()];
        if let Some(options) = &self.cage {
            // Loopback only; the stand-in's port is relayed in at the same address.
            let options = confine::Options { forward: vec![model_port], ..options.clone() };
            let profile = Profile::Smoke {
                checkout: self.checkout.to_owned(),
                individual: dir.to_owned(),
                writable: vec![],
            };
            argv = confine::wrap_with(&profile, &options, argv)
                .map_err(|e| format!("cannot cage the smoke run: {e}"))?;
        } else {
            confine::host::prepare_generation(dir).map_err(setup)?;
        }
        let Some((program, args)) = argv.split_first() else {
            return Err("nothing to start".into());
        };
        let mut spec = crate::spawn::Spec::new(program, dir);
        spec.args = args.to_vec();
        spec.env = generation::environment(&start);
        let mut body = self
            .runner
            .start(&unit, spec, &limits)
            .await
            .map_err(|e| format!("cannot start the body: {e}"))?;

        let started = Instant::now();
        let deadline = self.limit.map(|l| tokio::time::Instant::from_std(started + l));
        let (mut ready, mut line_taken) = (false, false);
        let outcome = loop {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                Some(event) = seen.recv() => match event {
                    Seen::Ready => ready = true,
                    Seen::OwnerLine => line_taken = true,
                    Seen::Replied if line_taken => break Ok(()),
                    _ => {}
                },
                ended = body.wait() => break Err(format!("the body ended ({}) before it answered", ended.exit)),
                () = sleep => {
                    let secs = self.limit.map(|l| l.as_secs()).unwrap_or_default();
                    let what = if ready { "answer the waiting message" } else { "report ready" };
                    break Err(format!(
                        "the body did not {what} within {secs} s (TENERAL_SMOKE_SECONDS in .env raises the limit)"
                    ));
                }
            }
        };
        body.stop(self.settings.timing.stop_grace).await;
        channel_task.abort();
        model_task.abort();
        let _ = std::fs::remove_file(&socket);
        outcome.map_err(|why| {
            let tail = body.stderr_tail();
            if tail.is_empty() {
                why
            } else {
                format!("{why}; what it wrote to stderr:\n{tail}")
            }
        })
    }
}
