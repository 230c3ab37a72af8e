//! The model the bodies reach: always the kernel's proxy, bound anew for
//! each generation's key, forwarding to the owner's provider or to the
//! stand-in model, which runs as a caged child of the kernel for its whole
//! life (its script goes on across generations) with one key of its own
//! that only the kernel knows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use teneral_core::chatgpt;

use super::KernelError;
use crate::events::{kernel_event, SharedJournal};
use crate::proxy;
use crate::runner::{Limits, Runner};
use crate::settings::{Provider, Secret, Settings};
use crate::standin::child::{self, StandinChild};
use teneral_core::commit::Commit;
use teneral_core::journal::EventKind;
use teneral_core::log;

pub(super) struct Model {
    /// The stand-in child, when the provider is `standin`.
    standin: Option<Standin>,
    /// The proxy of the current generation.
    task: Option<tokio::task::JoinHandle<()>>,
    /// The ChatGPT sign-in, when the provider is `chatgpt`.
    signin: Option<Arc<proxy::signin::Session>>,
}

struct Standin {
    child: StandinChild,
    key: String,
    runner: Runner,
    home: PathBuf,
}

impl Model {
    /// Starts the stand-in child when the provider is `standin`; `runner`
    /// starts it (caged, with the body's limits).
    pub(super) async fn start(
        settings: &Settings,
        home: &Path,
        runner: &Runner,
    ) -> Result<Model, KernelError> {
        let standin = match settings.provider {
            Provider::Standin => {
                let key = random_key()?;
                let child = start_standin(settings, home, runner, &key).await?;
                Some(Standin { child, key, runner: runner.clone(), home: home.to_owned() })
            }
            _ => None,
        };
        let signin = match settings.provider {
            Provider::ChatGpt => Some(Arc::new(
                proxy::signin::Session::load(home).map_err(|e| KernelError::Io(e.to_string()))?,
            )),
            _ => None,
        };
        Ok(Model { standin, task: None, signin })
    }

    /// Stops the stand-in child (SIGTERM, its grace, SIGKILL) and the
    /// current proxy; the kernel is on its way out.
    pub(super) async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(standin) = self.standin.take() {
            standin.child.stop().await;
        }
    }

    /// The base URL a generation with `key` uses: a proxy that accepts only
    /// `key` from now on (the previous generation's proxy is closed).
    pub(super) async fn url_for(
        &mut self,
        key: &str,
        settings: &Settings,
        journal: &SharedJournal,
        commit: &Commit,
    ) -> Result<String, KernelError> {
        if let Some(old) = self.task.take() {
            old.abort();
        }
        if let Some(session) = &self.signin {
            // The end of the sign-in is told to the owner as a notice of the
            // generation that was running, which `talk` shows.
            let (journal, commit) = (Arc::clone(journal), commit.clone());
            session.set_notice(Arc::new(move |text: &str| {
                kernel_event(&journal, &commit, EventKind::KernelNotice, json!({"text": text}));
            }));
            let base_url =
                settings.base_url.clone().unwrap_or_else(|| chatgpt::BACKEND_URL.to_owned());
            let server = proxy::Proxy::bind_signed_in(
                ([127, 0, 0, 1], 0).into(),
                &base_url,
                Arc::clone(session),
                key.to_owned(),
            )
            .await
            .map_err(|e| KernelError::Io(format!("the model proxy: {e}")))?;
            let url = format!("http://{}/v1", server.local_addr());
            self.task = Some(tokio::spawn(server.serve()));
            return Ok(url);
        }
        let upstream = match &mut self.standin {
            Some(standin) => {
                if let Some(ended) = standin.child.ended() {
                    log::at(
                        log::Priority::Warning,
                        format!(
                            "the stand-in model ended ({}); starting it again, its script from \
                             the start. What it wrote last:\n{}",
                            ended.exit,
                            standin.child.stderr_tail()
                        ),
                    );
                    standin.child =
                        start_standin(settings, &standin.home, &standin.runner, &standin.key)
                            .await?;
                }
                proxy::Upstream {
                    base_url: standin.child.base_url().to_owned(),
                    api_key: Secret::new(standin.key.clone()),
                }
            }
            None => proxy::Upstream::from_settings(settings).ok_or_else(|| {
                KernelError::Io("TENERAL_BASE_URL and TENERAL_API_KEY are needed".into())
            })?,
        };
        let server = proxy::Proxy::bind(([127, 0, 0, 1], 0).into(), upstream, key.to_owned())
            .await
            .map_err(|e| KernelError::Io(format!("the model proxy: {e}")))?;
        let url = format!("http://{}/v1", server.local_addr());
        self.task = Some(tokio::spawn(server.serve()));
        Ok(url)
    }
}

async fn start_standin(
    settings: &Settings,
    home: &Path,
    runner: &Runner,
    key: &str,
) -> Result<StandinChild, KernelError> {
    let program = std::env::current_exe()
        .map_err(|e| KernelError::Io(format!("the kernel's own binary: {e}")))?;
    let script = settings.standin_script.as_ref().map(|p| home.join(p));
    let log_file = settings.standin_log.as_ref().map(|p| home.join(p));
    let start = child::Start {
        program: &program,
        individual: home,
        key,
        script: script.as_deref(),
        scripted: false,
        log: log_file.as_deref(),
        limits: Limits::for_body(settings),
    };
    let unit = format!("teneral-standin-{}.service", std::process::id());
    let child = StandinChild::start(runner, &unit, start)
        .await
        .map_err(|e| KernelError::Io(e.to_string()))?;
    log::info(format!(
        "the stand-in model serves at {} (pid {}), caged, reached through the model proxy",
        child.base_url(),
        child.pid().map(|p| p.to_string()).unwrap_or_else(|| "unknown".into())
    ));
    Ok(child)
}

/// A key made for one generation: 32 random bytes, hex.
pub(super) fn random_key() -> Result<String, KernelError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| KernelError::Io(format!("no random bytes for a key: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("tnl-gen-{hex}"))
}
