//! The kernel's hold on the ChatGPT sign-in: the tokens of
//! `.teneral/auth/chatgpt.json`, the `Authorization` and `chatgpt-account-id`
//! headers the proxy puts on a request to the plan, and the renewal of the
//! access token (before it expires, and when the plan answers 401).
//!
//! Invariants: one renewal at a time (the tokens are behind one lock, held
//! across the renewal), so a rotated refresh token is never used twice; the
//! rotated tokens are on disk (atomically, 0600) before they are used; a
//! refused renewal ends the sign-in once, says so in the log and to the
//! owner ([`Session::set_notice`]), and from then on only a token file that
//! `teneralctl setup` wrote anew is taken up; the tokens never leave this
//! module except in the two headers.
use std::path::{Path, PathBuf};
use std::sync::Mutex as StdMutex;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::header::HeaderValue;
use serde_json::json;
use teneral_core::chatgpt::{self, Granted, Tokens};
use tokio::sync::Mutex;

use teneral_core::log;

/// What the owner is told when the sign-in ended (the kernel journals it
/// as a notice, so `talk` shows it).
pub type Notice = Arc<dyn Fn(&str) + Send + Sync>;

/// The headers of one request to the plan.
pub struct Headers {
    pub authorization: HeaderValue,
    pub account: HeaderValue,
    /// The access token they carry, to name it when it is refused.
    pub access: String,
}

/// Why the sign-in cannot be used now.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("{0}")]
    Tokens(#[from] chatgpt::TokensError),
    #[error(
        "the ChatGPT sign-in has ended ({0}); sign in again with `teneralctl setup`, \
         then restart the kernel"
    )]
    Ended(String),
    #[error("the ChatGPT tokens hold characters an HTTP header cannot carry; sign in again with `teneralctl setup`")]
    BadHeader,
}

/// The sign-in the proxy uses, one for the kernel's life.
pub struct Session {
    path: PathBuf,
    tokens: Mutex<Tokens>,
    /// Set once the sign-in ended: the refresh token that was refused.
    ended: StdMutex<Option<String>>,
    client: OnceLock<reqwest::Client>,
    notice: StdMutex<Option<Notice>>,
}

impl Session {
    /// Reads the tokens `teneralctl setup` wrote under `home`.
    pub fn load(home: &Path) -> Result<Session, SignInError> {
        let path = chatgpt::tokens_path(home);
        let tokens = chatgpt::read(&path)?;
        Ok(Session {
            path,
            tokens: Mutex::new(tokens),
            ended: StdMutex::new(None),
            client: OnceLock::new(),
            notice: StdMutex::new(None),
        })
    }

    /// Who is told when the sign-in ends (replaced for each generation).
    pub fn set_notice(&self, notice: Notice) {
        *self.notice.lock().unwrap_or_else(|p| p.into_inner()) = Some(notice);
    }

    /// The headers for a request now, the access token renewed first when
    /// it expires within [`chatgpt::RENEW_BEFORE_SECS`].
    pub async fn headers(&self) -> Result<Headers, SignInError> {
        let mut tokens = self.tokens.lock().await;
        self.take_up_new_file(&mut tokens)?;
        if tokens.due(now()) {
            self.renew(&mut tokens).await?;
        }
        headers(&tokens)
    }

    /// The plan refused `stale` (401): renew, unless another request did
    /// already, and give the new headers.
    pub async fn refused(&self, stale: &str) -> Result<Headers, SignInError> {
        let mut tokens = self.tokens.lock().await;
        if tokens.access_token == stale {
            self.renew(&mut tokens).await?;
        }
        headers(&tokens)
    }

    /// After the end: a token file setup wrote since is taken up.
    fn take_up_new_file(&self, tokens: &mut Tokens) -> Result<(), SignInError> {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let Some(refused) = ended.clone() else { return Ok(()) };
        match chatgpt::read(&self.path) {
            Ok(fresh) if fresh.refresh_token != refused => {
                log::info("a new ChatGPT sign-in was written by `teneralctl setup`; using it");
                *tokens = fresh;
                *ended = None;
                Ok(())
            }
            _ => Err(SignInError::Ended("the sign-in server refused its renewal".into())),
        }
    }

    async fn renew(&self, tokens: &mut Tokens) -> Result<(), SignInError> {
        let url = format!("{}/oauth/token", tokens.issuer);
        let client = self.client.get_or_init(|| {
            let mut builder = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(15))
                .timeout(Duration::from_secs(60))
                // A renewal comes about once an hour: no connection is kept
                // for it, and so no timer to close one wakes the kernel.
                .pool_max_idle_per_host(0);
            if super::on_loopback(&url) {
                builder = builder.no_proxy();
            }
            builder.build().unwrap_or_default()
        });
        let body = json!({
            "client_id": chatgpt::CLIENT_ID,
            "grant_type": "refresh_token",
            "refresh_token": tokens.refresh_token,
        });
        let sent = client
            .post(&url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                // Not the end of the sign-in: the request goes on with the
                // token it has, and the next one tries again.
                log::warn(format!(
                    "cannot renew the ChatGPT access token at {url}: {}; trying again with the next request",
                    super::causes(&e)
                ));
                return Ok(());
            }
        };
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        match status {
            200..=299 => match serde_json::from_str::<Granted>(&text) {
                Ok(granted) => {
                    let renewed = tokens.renewed(granted, now());
                    if let Err(e) = chatgpt::write(&self.path, &renewed) {
                        // The old refresh token is spent: keep the new ones
                        // in memory and say the file is behind.
                        log::warn(format!(
                            "renewed the ChatGPT access token but cannot write {}: {e}; \
                             a restarted kernel will need `teneralctl setup` again",
                            self.path.display()
                        ));
                    }
                    *tokens = renewed;
                    log::info("renewed the ChatGPT access token");
                    Ok(())
                }
                Err(e) => {
                    log::warn(format!("the sign-in server's renewal is not usable ({e}); trying again with the next request"));
                    Ok(())
                }
            },
            400 | 401 | 403 => {
                let reason =
                    format!("the sign-in server answered {status}: {}", token_error(&text));
                let ended = SignInError::Ended(reason);
                let text = ended.to_string();
                *self.ended.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(tokens.refresh_token.clone());
                log::at(log::Priority::Warning, &text);
                let notice = self.notice.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(notice) = notice {
                    notice(&text);
                }
                Err(ended)
            }
            _ => {
                log::warn(format!(
                    "the sign-in server could not renew the ChatGPT access token now ({status}: {}); \
                     trying again with the next request",
                    token_error(&text)
                ));
                Ok(())
            }
        }
    }
}

/// Sends a request with the sign-in's headers (`send` builds it); when the
/// plan refuses the access token (401), renews it and sends once more, so
/// the body does not notice. A limit reached (429) is logged with where the
/// owner reviews the plan's usage, and passed back.
pub(super) async fn send<F, Fut>(
    session: &Session,
    send: F,
) -> Result<Result<reqwest::Response, reqwest::Error>, SignInError>
where
    F: Fn(Option<&Headers>) -> Fut,
    Fut: std::future::Future<Output = Result<reqwest::Response, reqwest::Error>>,
{
    let signed = session.headers().await?;
    let sent = match send(Some(&signed)).await {
        Ok(r) if r.status() == hyper::StatusCode::UNAUTHORIZED => {
            match session.refused(&signed.access).await {
                Ok(renewed) => send(Some(&renewed)).await,
                Err(_) => Ok(r),
            }
        }
        other => other,
    };
    match sent {
        Ok(r) if r.status() == hyper::StatusCode::TOO_MANY_REQUESTS => {
            Ok(Ok(limit_reached(r).await))
        }
        other => Ok(other),
    }
}

/// Logs a reached limit with the plan's own message and the usage page, and
/// gives the answer back as it came (status, headers, body).
async fn limit_reached(response: reqwest::Response) -> reqwest::Response {
    let (status, version, headers) =
        (response.status(), response.version(), response.headers().clone());
    let body = response.bytes().await.unwrap_or_default();
    log::warn(limit_line(&body));
    let mut rebuilt = hyper::Response::new(reqwest::Body::from(body));
    *rebuilt.status_mut() = status;
    *rebuilt.version_mut() = version;
    *rebuilt.headers_mut() = headers;
    reqwest::Response::from(rebuilt)
}

/// Pure: the log line for a plan's 429 answer `body`.
pub(super) fn limit_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let said = if text.trim().is_empty() { "no message".to_owned() } else { token_error(&text) };
    format!(
        "the ChatGPT plan's limit is reached (429, the plan said: {said}); the body waits and \
         tries again. Review or limit this app's use at {}",
        chatgpt::USAGE_PAGE
    )
}

/// The plan's streamed answer made whole for a body that asked for a whole
/// one: the `response` of its `response.completed` event, as JSON; a
/// stream that failed is a 502 with the plan's message.
pub(super) async fn whole(response: reqwest::Response) -> super::Answer {
    let events = match response.text().await {
        Ok(events) => events,
        Err(e) => {
            let message = format!("the plan's answer broke off: {}", super::causes(&e));
            return super::refusal(hyper::StatusCode::BAD_GATEWAY, "upstream_broken", message);
        }
    };
    match chatgpt::whole_response(&events) {
        Ok(whole) => {
            let bytes = bytes::Bytes::from(whole.to_string());
            let mut answer = hyper::Response::new(http_body_util::Either::Left(
                http_body_util::Full::new(bytes),
            ));
            answer
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            answer
        }
        Err(message) => super::refusal(
            hyper::StatusCode::BAD_GATEWAY,
            "upstream_failed",
            format!("the plan's answer failed: {message}"),
        ),
    }
}

fn headers(tokens: &Tokens) -> Result<Headers, SignInError> {
    let mut authorization = HeaderValue::try_from(format!("Bearer {}", tokens.access_token))
        .map_err(|_| SignInError::BadHeader)?;
    authorization.set_sensitive(true);
    let account =
        HeaderValue::try_from(tokens.account_id.as_str()).map_err(|_| SignInError::BadHeader)?;
    Ok(Headers { authorization, account, access: tokens.access_token.clone() })
}

/// An OAuth error answer in words (`error_description`, OpenAI's
/// `error.message`, the code), never the request's tokens.
fn token_error(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.trim().chars().take(200).collect();
    };
    let error = &json["error"];
    let code = error.as_str().or(error["code"].as_str()).unwrap_or("no code");
    let words = json["error_description"].as_str().or(error["message"].as_str());
    match words {
        Some(words) => format!("{code}: {words}"),
        None => code.to_owned(),
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
