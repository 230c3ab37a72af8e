//! The "Sign in with ChatGPT" flow of `teneralctl setup` (docs/chatgpt.md):
//! authorization code with PKCE S256, the owner's own browser, a callback
//! on this machine's loopback for the time of the sign-in only.
//!
//! Invariants: the callback port is open only between the address being
//! shown and the sign-in ending, however it ends (the listener lives in
//! [`wait`] and its thread); a callback is believed only with the state this
//! sign-in sent; the verifier never leaves this process except to the token
//! endpoint; [`authorize_url`] and [`judge_callback`] are pure.
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use teneral_core::chatgpt::{self, Granted, Tokens};

use super::ask::{Asker, Quiet};

/// Names the sign-in server (tests point it at the stand-in).
pub const ISSUER_VARIABLE: &str = "TENERAL_CHATGPT_ISSUER";
/// Names the plan's model endpoint (tests point it at the stand-in).
pub const URL_VARIABLE: &str = "TENERAL_CHATGPT_URL";
/// Another callback port when 1455 is taken.
pub const PORT_VARIABLE: &str = "TENERAL_CALLBACK_PORT";

/// Why the sign-in did not give tokens. Nothing is written after any.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(
        "port {port} on 127.0.0.1 is taken (another sign-in, or another program), so the \
         sign-in cannot be called back there; run setup again with another port, \
         e.g. {PORT_VARIABLE}=1457 teneralctl setup"
    )]
    PortTaken { port: u16 },
    #[error("{PORT_VARIABLE}={0:?} is not a port number; give one from 1024 to 65535")]
    BadPort(String),
    #[error("cannot listen for the sign-in's callback on 127.0.0.1:{port}: {source}")]
    Listen { port: u16, source: std::io::Error },
    #[error("you gave up waiting for the sign-in")]
    GaveUp,
    #[error("the sign-in was refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused { error: String, description: Option<String> },
    #[error(
        "the browser came back with a state that is not this sign-in's (an old address, or \
         one that someone else opened); the callback was not believed. Run setup again and \
         open the new address"
    )]
    WrongState,
    #[error("the browser came back without a code; run setup again")]
    NoCode,
    #[error("cannot reach the sign-in server at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the sign-in server refused the code: it answered {status}: {message}")]
    Token { status: u16, message: String },
    #[error("the sign-in server's answer is not usable: {0}")]
    Grant(String),
    #[error("no random numbers for the sign-in: {0}")]
    Random(String),
}

/// What the callback's request said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callback {
    Code(String),
    WrongState,
    Refused {
        error: String,
        description: Option<String>,
    },
    NoCode,
    /// Another path (a favicon): answered 404, the wait goes on.
    Elsewhere,
}

/// The address the owner opens.
pub fn authorize_url(issuer: &str, redirect_uri: &str, challenge: &str, state: &str) -> String {
    let base = format!("{}/oauth/authorize", issuer.trim_end_matches('/'));
    let pairs = [
        ("response_type", "code"),
        ("client_id", chatgpt::CLIENT_ID),
        ("redirect_uri", redirect_uri),
        ("scope", chatgpt::SCOPES),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("id_token_add_organizations", "true"),
        ("state", state),
    ];
    match reqwest::Url::parse_with_params(&base, pairs) {
        Ok(url) => url.to_string(),
        Err(_) => base,
    }
}

/// Judges a request target (`/auth/callback?...`) against the state sent.
/// The state is checked before anything else the callback says.
pub fn judge_callback(target: &str, state: &str) -> Callback {
    let Ok(url) = reqwest::Url::parse(&format!("http://localhost{target}")) else {
        return Callback::Elsewhere;
    };
    if url.path() != chatgpt::CALLBACK_PATH {
        return Callback::Elsewhere;
    }
    let get = |name: &str| url.query_pairs().find(|(n, _)| n == name).map(|(_, v)| v.into_owned());
    if get("state").as_deref() != Some(state) {
        return Callback::WrongState;
    }
    if let Some(error) = get("error") {
        return Callback::Refused { error, description: get("error_description") };
    }
    match get("code").filter(|c| !c.is_empty()) {
        Some(code) => Callback::Code(code),
        None => Callback::NoCode,
    }
}

/// The callback port: [`PORT_VARIABLE`] or 1455.
pub fn port_from(value: Option<&str>) -> Result<u16, SignInError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(chatgpt::CALLBACK_PORT),
        Some(v) => v
            .parse::<u16>()
            .ok()
            .filter(|p| *p >= 1024)
            .ok_or_else(|| SignInError::BadPort(v.to_owned())),
    }
}

/// A sign-in begun: the callback listening, the address to open.
pub struct Pending {
    listener: TcpListener,
    issuer: String,
    verifier: String,
    state: String,
    redirect_uri: String,
    /// The address the owner opens.
    pub url: String,
    pub port: u16,
}

/// Begins a sign-in: listens for the callback and makes the address.
pub fn begin() -> Result<Pending, SignInError> {
    let issuer = std::env::var(ISSUER_VARIABLE).unwrap_or_else(|_| chatgpt::ISSUER.to_owned());
    let issuer = issuer.trim_end_matches('/').to_owned();
    let port = port_from(std::env::var(PORT_VARIABLE).ok().as_deref())?;
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Err(SignInError::PortTaken { port })
        }
        Err(source) => return Err(SignInError::Listen { port, source }),
    };
    let verifier = chatgpt::b64url(&random()?);
    let state = chatgpt::b64url(&random()?);
    let redirect_uri = chatgpt::redirect_uri(port);
    let url = authorize_url(&issuer, &redirect_uri, &chatgpt::challenge(&verifier), &state);
    Ok(Pending { listener, issuer, verifier, state, redirect_uri, url, port })
}

impl Pending {
    /// Waits for the browser, asking `gave_up` every 50 ms whether the
    /// owner gave up. The port is closed when this returns.
    pub fn wait(self, gave_up: impl FnMut() -> bool) -> Result<Called, SignInError> {
        let code = wait(self.listener, &self.state, gave_up)?;
        Ok(Called {
            issuer: self.issuer,
            verifier: self.verifier,
            redirect_uri: self.redirect_uri,
            code,
        })
    }
}

/// The browser came back with a code.
pub struct Called {
    issuer: String,
    verifier: String,
    redirect_uri: String,
    code: String,
}

impl Called {
    /// The code for tokens.
    pub fn exchange(self) -> Result<Tokens, SignInError> {
        exchange(&self.issuer, &self.redirect_uri, &self.verifier, &self.code)
    }
}

/// Signs in: shows the address, waits for the browser (or for the owner to
/// give up), exchanges the code. Returns the tokens, written nowhere yet.
pub fn sign_in<R: BufRead, W: Write>(asker: &mut Asker<R, W>) -> Result<Tokens, SignInError> {
    let pending = begin()?;
    let (url, port) = (pending.url.clone(), pending.port);
    asker.say("Open this address in your browser, sign in to ChatGPT and approve the app:");
    asker.say(&url);
    if asker.terminal {
        // OSC 8: a link the terminal can open with a click, where it can.
        asker.say(&format!("\x1b]8;;{url}\x1b\\(or click here to open it)\x1b]8;;\x1b\\"));
        asker.say(&format!(
            "Waiting for your browser to come back to 127.0.0.1:{port}; Esc gives up."
        ));
    } else {
        asker.say(&format!("Waiting for your browser to come back to 127.0.0.1:{port}; a line (or the end of input) gives up."));
    }
    let quiet = asker.terminal.then(Quiet::new);
    let called = pending.wait(|| asker.gave_up());
    drop(quiet);
    let called = called?;
    asker.say("Signed in; asking for the tokens ...");
    called.exchange()
}

fn random() -> Result<[u8; 32], SignInError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| SignInError::Random(e.to_string()))?;
    Ok(bytes)
}

/// Serves the callback on a thread until it decides, while watching the
/// owner's input for giving up. The listener is closed when this returns.
fn wait(
    listener: TcpListener,
    state: &str,
    mut gave_up: impl FnMut() -> bool,
) -> Result<String, SignInError> {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (stop, state) = (Arc::clone(&stop), state.to_owned());
        std::thread::spawn(move || serve(listener, &state, &stop, &tx))
    };
    let outcome = loop {
        if let Ok(decided) = rx.recv_timeout(Duration::from_millis(50)) {
            break decided;
        }
        if gave_up() {
            break Callback::Refused { error: String::new(), description: None };
        }
    };
    stop.store(true, Ordering::SeqCst);
    let _ = server.join();
    match outcome {
        Callback::Code(code) => Ok(code),
        Callback::WrongState => Err(SignInError::WrongState),
        Callback::Refused { error, .. } if error.is_empty() => Err(SignInError::GaveUp),
        Callback::Refused { error, description } => {
            Err(SignInError::Refused { error, description })
        }
        Callback::NoCode | Callback::Elsewhere => Err(SignInError::NoCode),
    }
}

/// The callback server's loop: one request a connection, until a callback
/// decides or `stop` is set.
fn serve(listener: TcpListener, state: &str, stop: &AtomicBool, tx: &mpsc::Sender<Callback>) {
    if listener.set_nonblocking(true).is_err() {
        let _ = tx.send(Callback::NoCode);
        return;
    }
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(decided) = answer(stream, state) {
                    let _ = tx.send(decided);
                    return;
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(30)),
        }
    }
}

fn answer(mut stream: TcpStream, state: &str) -> Option<Callback> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let target = text.lines().next().and_then(|l| l.split(' ').nth(1)).unwrap_or("/");
    let judged = judge_callback(target, state);
    let (status, body) = match &judged {
        Callback::Code(_) => {
            ("200 OK", "Signed in. Go back to the terminal: teneralctl setup goes on there.")
        }
        Callback::WrongState => (
            "400 Bad Request",
            "This sign-in's state does not match; nothing was done. Run teneralctl setup again.",
        ),
        Callback::Refused { .. } => {
            ("200 OK", "The sign-in was refused; teneralctl setup says why.")
        }
        Callback::NoCode => ("400 Bad Request", "No code came back; run teneralctl setup again."),
        Callback::Elsewhere => ("404 Not Found", "Not here."),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
    (judged != Callback::Elsewhere).then_some(judged)
}

/// The code for tokens at the token endpoint (form, as the Codex CLI sends).
fn exchange(
    issuer: &str,
    redirect_uri: &str,
    verifier: &str,
    code: &str,
) -> Result<Tokens, SignInError> {
    let url = format!("{issuer}/oauth/token");
    let unreachable =
        |e: reqwest::Error| SignInError::Unreachable { url: url.clone(), reason: e.to_string() };
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(unreachable)?;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("client_id", chatgpt::CLIENT_ID),
        ("code_verifier", verifier),
    ];
    let response = client.post(&url).form(&form).send().map_err(unreachable)?;
    let status = response.status().as_u16();
    let text = response.text().map_err(unreachable)?;
    if !(200..300).contains(&status) {
        return Err(SignInError::Token { status, message: token_error(&text) });
    }
    let granted: Granted =
        serde_json::from_str(&text).map_err(|e| SignInError::Grant(e.to_string()))?;
    Tokens::from_grant(issuer, granted, now()).map_err(|e| SignInError::Grant(e.to_string()))
}

/// An OAuth error answer in words: `error_description`, `error`, or
/// OpenAI's `error.message`.
pub fn token_error(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return body.trim().chars().take(300).collect();
    };
    let error = &json["error"];
    let words = [json["error_description"].as_str(), error["message"].as_str(), error.as_str()];
    let code = error.as_str().or(error["code"].as_str());
    let said = match (words.into_iter().flatten().next(), code) {
        (Some(w), Some(c)) if w != c => format!("{c}: {w}"),
        (Some(w), _) => w.to_owned(),
        (None, _) => body.trim().chars().take(300).collect(),
    };
    said
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
