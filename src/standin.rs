//! The stand-in model: an HTTP/1.1 server on loopback that answers as a model
//! provider does, on both wire protocols at once (`POST /v1/chat/completions`
//! and `POST /v1/responses`, whole or streamed as server-sent events when
//! the request says `stream: true`, see [`stream`]), and lists its model
//! (`GET /v1/models`, [`models`]). The gate's smoke run, the tests
//! and an owner with no account (`TENERAL_PROVIDER=standin`) talk to it.
//!
//! It is as strict as the real protocols read: a request that the provider
//! would refuse is refused here with the same status and an OpenAI-style error
//! body, so a body that builds a wrong request fails here first. What it
//! answers comes from an optional script (see [`script`]). Without one it
//! acts as an agent on four owner lines (`show me your code`, `change
//! yourself`, `break yourself`, `go back`; see [`showcase`]) and answers the
//! birth letter by naming them; every other request, and every request once
//! a script is used up, gets `Stand-in model here. You said: ...`.
//! Optionally every request is appended to a log file as one JSON line
//! (`{"path","status","body","at_us"}`), flushed before the answer is sent.
//!
//! The kernel never serves it in its own process: it starts `teneral
//! standin` as a caged child ([`child`]) and reaches it through its model
//! proxy. In-process serving ([`Standin::bind`]) is for that command and
//! for tests.
//!
//! Invariants: it binds only loopback addresses; the pure parts (checks,
//! script, answers) are in [`chat`], [`responses`], [`stream`], [`script`],
//! [`showcase`], [`service`]
//! and do no I/O; [`http`] is the only place that touches sockets and files
//! after start.
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;

pub mod chat;
pub mod child;
mod http;
pub mod image;
pub mod models;
pub mod responses;
pub mod script;
pub mod service;
pub mod showcase;
pub mod signin;
pub mod stream;
pub mod turn;
pub mod wire;

pub use script::{Script, ScriptError};

/// How a stand-in is started.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The key requests must bear; `None` accepts any non-empty key.
    pub key: Option<String>,
    /// A JSON Lines script of answers (see [`script`]).
    pub script: Option<PathBuf>,
    /// Answer from the script alone, even an empty one: no acts of
    /// [`showcase`] (see [`service::Service::from_script_alone`]).
    pub scripted: bool,
    /// A file to append every request to, one JSON line each.
    pub log: Option<PathBuf>,
    /// How long the sign-in stand-in's access tokens live, in seconds
    /// (default [`signin::ACCESS_LIFETIME`]).
    pub token_lifetime: Option<u64>,
}

/// Why a stand-in could not start.
#[derive(Debug, thiserror::Error)]
pub enum StandinError {
    #[error("the stand-in model serves only on loopback; {addr} is not (use 127.0.0.1:PORT)")]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source} (is the port taken? 127.0.0.1:0 picks a free one)")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot read the stand-in script {}: {source}", path.display())]
    ReadScript { path: PathBuf, source: std::io::Error },
    #[error("the stand-in script {} is not usable: {source}; mend that line", path.display())]
    Script { path: PathBuf, source: ScriptError },
    #[error("cannot open the stand-in request log {}: {source}", path.display())]
    OpenLog { path: PathBuf, source: std::io::Error },
}

/// A bound stand-in, ready to serve.
pub struct Standin {
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<http::Shared>,
}

impl Standin {
    /// Binds (use 127.0.0.1:0 for any free port), loads the script and opens
    /// the log.
    pub async fn bind(addr: SocketAddr, config: Config) -> Result<Standin, StandinError> {
        if !addr.ip().is_loopback() {
            return Err(StandinError::NotLoopback { addr });
        }
        let script = match &config.script {
            None => Script::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| StandinError::ReadScript { path: path.clone(), source })?;
                Script::parse(&text)
                    .map_err(|source| StandinError::Script { path: path.clone(), source })?
            }
        };
        let log = match &config.log {
            None => None,
            Some(path) => Some(
                http::RequestLog::open(path)
                    .map_err(|source| StandinError::OpenLog { path: path.clone(), source })?,
            ),
        };
        let listener =
            TcpListener::bind(addr).await.map_err(|source| StandinError::Bind { addr, source })?;
        let addr = listener.local_addr().map_err(|source| StandinError::Bind { addr, source })?;
        let mut service = service::Service::new(config.key, script);
        if config.scripted {
            service = service.from_script_alone();
        }
        let lifetime = config.token_lifetime.unwrap_or(signin::ACCESS_LIFETIME);
        let signin = std::sync::Mutex::new(signin::SignIn::new(lifetime));
        Ok(Standin { listener, addr, shared: Arc::new(http::Shared { service, log, signin }) })
    }

    /// The address it listens on (with the port chosen when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL a client is given: `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The sign-in server's address (its issuer): `http://ADDR`.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The plan's model endpoint: `http://ADDR/backend-api/codex`.
    pub fn plan_url(&self) -> String {
        format!("http://{}/backend-api/codex", self.addr)
    }

    /// A handle that replaces the accepted key while the stand-in serves.
    pub fn keys(&self) -> KeyHandle {
        KeyHandle { shared: Arc::clone(&self.shared) }
    }

    /// Serves until the future is dropped.
    pub async fn serve(self) {
        http::serve(self.listener, self.shared).await;
    }
}

/// Replaces the key a serving stand-in accepts (one per generation).
#[derive(Clone)]
pub struct KeyHandle {
    shared: Arc<http::Shared>,
}

impl KeyHandle {
    pub fn set(&self, key: &str) {
        self.shared.service.set_key(Some(key.to_owned()));
    }
}

/// Entry for `teneral standin --listen ADDR [--key K] [--script F] [--log F]`:
/// binds, prints `listening on http://ADDR/v1` to stdout (flushed) and serves
/// forever; with `end_with_stdout`, only until nothing reads its stdout any
/// longer (the kernel that started it, see [`child`], is gone).
pub async fn run_cli(
    listen: SocketAddr,
    config: Config,
    end_with_stdout: bool,
) -> anyhow::Result<()> {
    let standin = Standin::bind(listen, config).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", standin.base_url())?;
        out.flush()?;
    }
    if end_with_stdout {
        child::end_when_stdout_unread()?;
    }
    standin.serve().await;
    Ok(())
}
