//! The model proxy: how a body reaches its model without ever holding the
//! owner's credentials (design, section 3).
//!
//! The kernel serves one proxy per generation on loopback and hands the body
//! a stand-in key made for that generation. The proxy forwards a request to
//! the configured provider only after checking that key, and puts the real
//! credential on it itself.
//!
//! Invariants:
//! - It listens on a loopback address and nowhere else.
//! - A request without the generation's stand-in key (compared in constant
//!   time) is answered 401 and never forwarded.
//! - Only `POST /v1/chat/completions`, `POST /v1/responses` and
//!   `GET /v1/models` are forwarded; anything else is a 404.
//! - Upstream, the `Authorization` header is always the owner's, and of the
//!   body's headers only `content-type`, `accept` and `openai-beta` pass, so
//!   the stand-in key, cookies and hop-by-hop headers never leave. Back to the
//!   body only the status, the body and a few headers (`content-type`, rate
//!   limits, `retry-after`, the request id) pass; never a cookie.
//! - A request body over [`MAX_REQUEST_BYTES`] is a 413 and is not forwarded.
//! - Every answer of the proxy's own is in OpenAI's error shape, so a body's
//!   client reads it like a provider's; an upstream that cannot be reached is
//!   a 502 that names its host and the cause.
//! - The answer is relayed as it arrives, so a streamed reply stays streamed:
//!   each frame leaves as the provider sends it, and the token counts in a
//!   stream's last chunk or `response.completed` event reach the body, which
//!   journals them, unchanged by the proxy.
//! - A metered proxy ([`Proxy::bind_metered`]) reads the usage each answer
//!   reports as it passes and spends it on its [`meter::Meter`]; a 5xx
//!   answer or an upstream out of reach fails the meter; once the meter
//!   stopped, a request is refused (429, `token_budget_spent`) and never
//!   forwarded.

pub mod meter;
mod relay;
mod rules;
pub mod signin;
#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use meter::Meter;
use relay::{relay, Relay, Tap};
use rules::{authorized, causes, host_of, on_loopback, passes_up, route};

use crate::settings::{Provider, Secret, Settings};
use teneral_core::chatgpt;

/// The largest request body the proxy forwards.
pub const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// The provider the proxy forwards to, with the credential it adds.
///
/// A base address and an API key; a ChatGPT plan is reached with its
/// sign-in instead ([`Proxy::bind_signed_in`], [`signin`]).
/// `Upstream::authorization` is the one place that reads the key.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The provider's base address, such as `https://host/v1`.
    pub base_url: String,
    pub api_key: Secret,
}

impl Upstream {
    /// The upstream the settings describe, when they describe one the proxy
    /// can serve: compatible or openai, with an address and a key.
    pub fn from_settings(settings: &Settings) -> Option<Upstream> {
        match settings.provider {
            Provider::Compatible | Provider::OpenAi => Some(Upstream {
                base_url: settings.base_url.clone()?,
                api_key: settings.api_key.clone()?,
            }),
            Provider::Standin | Provider::ChatGpt => None,
        }
    }

    /// The `Authorization` header sent upstream, marked sensitive.
    fn authorization(&self) -> Result<HeaderValue, ProxyError> {
        let mut value = HeaderValue::try_from(format!("Bearer {}", self.api_key.expose()))
            .map_err(|_| ProxyError::BadKey)?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("the model proxy must listen on a loopback address, not {addr}")]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen for the model proxy on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the stand-in key for the body is empty; the kernel must make a key for each generation"
    )]
    EmptyBodyKey,
    #[error(
        "TENERAL_API_KEY holds characters an HTTP header cannot carry; \
         write the key exactly as the provider shows it"
    )]
    BadKey,
    #[error(
        "{base_url} is not an http:// or https:// address with a host; \
         write e.g. TENERAL_BASE_URL=https://host/v1"
    )]
    BadBaseUrl { base_url: String },
    #[error("cannot set up the HTTPS client that reaches the model: {0}")]
    Client(#[source] reqwest::Error),
}

/// A bound proxy, ready to [`serve`](Proxy::serve).
pub struct Proxy {
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// What the proxy puts on a request upstream.
enum Credential {
    /// `Authorization: Bearer <the owner's key>`.
    Key(HeaderValue),
    /// The ChatGPT sign-in's access token and account.
    SignIn(Arc<signin::Session>),
}

/// What every connection of one proxy reads.
struct Shared {
    client: reqwest::Client,
    /// The base address without a trailing slash.
    base_url: String,
    /// `host:port` of the upstream, for messages.
    host: String,
    credential: Credential,
    body_key: Vec<u8>,
    limit: usize,
    /// What the answers spend, when the proxy is metered.
    meter: Option<Arc<Meter>>,
}

impl Proxy {
    /// Listens on `addr` (a loopback address; port 0 picks one) for requests
    /// carrying `body_key`, to be forwarded to `upstream`.
    pub async fn bind(
        addr: SocketAddr,
        upstream: Upstream,
        body_key: String,
    ) -> Result<Proxy, ProxyError> {
        let mut builder = client_builder();
        // A model on this machine (the stand-in child) is reached directly,
        // whatever HTTP_PROXY the kernel's environment names.
        if on_loopback(&upstream.base_url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(ProxyError::Client)?;
        Proxy::bind_with(addr, upstream, body_key, client, MAX_REQUEST_BYTES).await
    }

    /// Like [`Proxy::bind`], every answer's reported usage spent on `meter`
    /// and every provider failure told to it.
    pub async fn bind_metered(
        addr: SocketAddr,
        upstream: Upstream,
        body_key: String,
        meter: Arc<Meter>,
    ) -> Result<Proxy, ProxyError> {
        let mut builder = client_builder();
        if on_loopback(&upstream.base_url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(ProxyError::Client)?;
        let credential = Credential::Key(upstream.authorization()?);
        let base_url = upstream.base_url.as_str();
        let limit = MAX_REQUEST_BYTES;
        Proxy::bind_credential(addr, base_url, credential, body_key, client, limit, Some(meter))
            .await
    }

    /// Like [`Proxy::bind`], for a ChatGPT plan at `base_url` reached with
    /// the kernel's sign-in.
    pub async fn bind_signed_in(
        addr: SocketAddr,
        base_url: &str,
        session: Arc<signin::Session>,
        body_key: String,
    ) -> Result<Proxy, ProxyError> {
        let mut builder = client_builder();
        if on_loopback(base_url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(ProxyError::Client)?;
        let credential = Credential::SignIn(session);
        let limit = MAX_REQUEST_BYTES;
        Proxy::bind_credential(addr, base_url, credential, body_key, client, limit, None).await
    }

    async fn bind_with(
        addr: SocketAddr,
        upstream: Upstream,
        body_key: String,
        client: reqwest::Client,
        limit: usize,
    ) -> Result<Proxy, ProxyError> {
        let credential = Credential::Key(upstream.authorization()?);
        let base_url = upstream.base_url.as_str();
        Proxy::bind_credential(addr, base_url, credential, body_key, client, limit, None).await
    }

    async fn bind_credential(
        addr: SocketAddr,
        base_url: &str,
        credential: Credential,
        body_key: String,
        client: reqwest::Client,
        limit: usize,
        meter: Option<Arc<Meter>>,
    ) -> Result<Proxy, ProxyError> {
        if !addr.ip().is_loopback() {
            return Err(ProxyError::NotLoopback { addr });
        }
        if body_key.is_empty() {
            return Err(ProxyError::EmptyBodyKey);
        }
        let base_url = base_url.trim_end_matches('/').to_owned();
        let host = host_of(&base_url)
            .ok_or_else(|| ProxyError::BadBaseUrl { base_url: base_url.clone() })?;
        let listener =
            TcpListener::bind(addr).await.map_err(|source| ProxyError::Bind { addr, source })?;
        let addr = listener.local_addr().map_err(|source| ProxyError::Bind { addr, source })?;
        let body_key = body_key.into_bytes();
        let shared = Shared { client, base_url, host, credential, body_key, limit, meter };
        Ok(Proxy { listener, addr, shared: Arc::new(shared) })
    }

    /// The address the proxy listens on; the body's `TENERAL_MODEL_URL` is
    /// `http://<this>/v1`.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers requests until the returned future is dropped. Dropping it
    /// also ends every open connection.
    pub async fn serve(self) {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(connection(stream, Arc::clone(&self.shared)));
                    }
                    // Out of file descriptors or the like: let it pass, then
                    // go on accepting.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

/// The HTTPS client: rustls, no redirects followed (the body sees them as
/// they are), a bounded time to connect and none to answer, since a model
/// may think for minutes. An idle connection stays in the pool until the
/// provider closes it: the pool's own idle timeout is a timer that woke the
/// kernel at rest (three times a minute, at each step of tokio's timer
/// wheel), and a peer gone quietly is found by Linux's TCP keepalive
/// (reqwest's, every 15 s), which wakes no process.
fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(30))
        .pool_idle_timeout(None)
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    // Small writes of a streamed reply should leave at once.
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |request| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(answer(&shared, request).await) }
    });
    // A connection that fails (the body hung up) concerns that body alone.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

type Answer = Response<Either<Full<Bytes>, Relay>>;

async fn answer(shared: &Shared, request: Request<Incoming>) -> Answer {
    if !authorized(request.headers(), &shared.body_key) {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "the model proxy did not get this generation's key; \
             send Authorization: Bearer $TENERAL_API_KEY as the kernel gave it"
                .to_owned(),
        );
    }
    if let Some(stopped) = shared.meter.as_ref().and_then(|m| m.stop_reason()) {
        let message = format!(
            "the kernel stopped this run's requests ({stopped}); the evaluation decides nothing"
        );
        return refusal(StatusCode::TOO_MANY_REQUESTS, "token_budget_spent", message);
    }
    let Some(suffix) = route(request.method(), request.uri().path()) else {
        let message = format!(
            "the model proxy serves POST /v1/chat/completions, POST /v1/responses and \
             GET /v1/models, not {} {}",
            request.method(),
            request.uri().path()
        );
        return refusal(StatusCode::NOT_FOUND, "unknown_url", message);
    };
    let too_large = || {
        refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!(
                "the request body is over the model proxy's limit of {} bytes; send less",
                shared.limit
            ),
        )
    };
    let declared = request.headers().get(header::CONTENT_LENGTH);
    let declared = declared.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > shared.limit as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let mut body = match Limited::new(body, shared.limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Err(e) => {
            let message = format!("the model proxy could not read the request body: {e}");
            return refusal(StatusCode::BAD_REQUEST, "invalid_request_body", message);
        }
    };
    let mut url = format!("{}{suffix}", shared.base_url);
    if let Some(query) = parts.uri.query() {
        url.push('?');
        url.push_str(query);
    }
    let mut headers = HeaderMap::new();
    for (name, value) in parts.headers.iter().filter(|(name, _)| passes_up(name)) {
        headers.append(name.clone(), value.clone());
    }
    let session = match &shared.credential {
        Credential::Key(key) => {
            headers.insert(header::AUTHORIZATION, key.clone());
            None
        }
        Credential::SignIn(session) => Some(session),
    };
    // The plan takes Responses requests streamed only.
    let mut whole = false;
    if session.is_some() && suffix == "/responses" {
        if let Some((streamed, wants_whole)) = chatgpt::as_streamed(&body) {
            (body, whole) = (Bytes::from(streamed), wants_whole);
        }
    }
    let send = |signed: Option<&signin::Headers>| {
        let mut headers = headers.clone();
        if let Some(signed) = signed {
            headers.insert(header::AUTHORIZATION, signed.authorization.clone());
            headers.insert(chatgpt::ACCOUNT_HEADER, signed.account.clone());
        }
        let request = shared.client.request(parts.method.clone(), url.as_str());
        request.headers(headers).body(body.clone()).send()
    };
    let sent = match session {
        None => send(None).await,
        Some(session) => match signin::send(session, &send).await {
            Ok(sent) => sent,
            Err(e) => return refusal(StatusCode::UNAUTHORIZED, "signin_ended", e.to_string()),
        },
    };
    let meter = shared.meter.as_ref();
    match sent {
        Ok(response) if whole && response.status().is_success() => signin::whole(response).await,
        Ok(response) => {
            if let (Some(meter), true) = (meter, response.status().is_server_error()) {
                meter.fail(format!("the provider answered {}", response.status()));
            }
            relay(response, meter.map(|m| Tap::new(Arc::clone(m))))
        }
        Err(e) => {
            let message =
                format!("the kernel could not reach the model at {}: {}", shared.host, causes(&e));
            if let Some(meter) = meter {
                meter.fail(message.clone());
            }
            refusal(StatusCode::BAD_GATEWAY, "upstream_unreachable", message)
        }
    }
}

/// An answer of the proxy's own, in OpenAI's error shape.
fn refusal(status: StatusCode, code: &str, message: String) -> Answer {
    let kind = if status.is_server_error() { "upstream_error" } else { "invalid_request_error" };
    let body = serde_json::json!({
        "error": { "message": message, "type": kind, "param": null, "code": code }
    });
    let mut answer = Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *answer.status_mut() = status;
    answer.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    answer
}
