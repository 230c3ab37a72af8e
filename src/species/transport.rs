//! The species' fetch over `http://` and `https://`, spoken by the kernel's
//! own HTTP client (reqwest with rustls) instead of libgit2's.
//!
//! Why: libgit2's https needs OpenSSL, and git2 initialises it (and reads
//! the system's CA bundle) the first time any repository is opened, which
//! the kernel does at start. Linking `libssl`/`libcrypto` and that start
//! cost the idle kernel megabytes of resident memory (scripts/bench-latency
//! prints them) for a fetch that runs only when a mutation brings a new
//! species. The kernel already links rustls for its egress proxy; this
//! module speaks git's smart HTTP protocol over it, so git2 is built without
//! `https` and OpenSSL is not in the kernel at all.
//!
//! Only fetching is spoken: `info/refs?service=git-upload-pack` (GET) and
//! `git-upload-pack` (POST). Pushing is refused. No credentials are sent and
//! a server that asks for some is refused; no proxy is used (libgit2's
//! default too). The first request follows at most [`REDIRECTS`] redirects,
//! never from https to http, and the later requests go where it led; the
//! POSTs follow none. Certificates are checked against the roots the egress
//! proxy trusts (reqwest's `rustls-tls`).

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use git2::transport::{Service, SmartSubtransport, SmartSubtransportStream, Transport};

/// The most redirects the first request of a fetch follows.
pub const REDIRECTS: usize = 5;

const LIST_SUFFIX: &str = "/info/refs?service=git-upload-pack";
const PACK_SUFFIX: &str = "/git-upload-pack";

/// Makes git2 fetch `http://` and `https://` remotes through this module,
/// each request given at most `limit`. Registers once (git2 keeps the
/// transports for the life of the process); later calls return the first
/// call's outcome.
pub(super) fn install(limit: Duration) -> Result<(), git2::Error> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        for scheme in ["http", "https"] {
            super::sys::register_transport(scheme, move |remote| {
                Transport::smart(remote, true, Http::new(limit)?)
            })
            .map_err(|e| e.message().to_owned())?;
        }
        Ok(())
    });
    done.clone().map_err(|e| git2::Error::from_str(&e))
}

/// What one remote's fetch shares among its requests.
#[derive(Clone)]
struct Shared {
    /// Follows the first request's redirects.
    list: reqwest::Client,
    /// Follows none.
    pack: reqwest::Client,
    /// The fetch runs on a plain thread of its own (`upstream::tip`), which
    /// drives this small runtime; it ends with the fetch.
    runtime: Arc<tokio::runtime::Runtime>,
    /// Where the first request's redirects led, when they did.
    base: Arc<Mutex<Option<String>>>,
}

/// One remote's subtransport.
struct Http(Shared);

fn error(what: impl std::fmt::Display) -> git2::Error {
    git2::Error::from_str(&what.to_string())
}

impl Http {
    fn new(limit: Duration) -> Result<Self, git2::Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| error(format!("cannot start the fetch's runtime: {e}")))?;
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let downgrade = attempt.url().scheme() == "http"
                && attempt.previous().iter().any(|u| u.scheme() == "https");
            if downgrade {
                attempt.error("the remote redirects from https to http; the kernel does not follow")
            } else if attempt.previous().len() > REDIRECTS {
                attempt.error("the remote redirects too often")
            } else {
                attempt.follow()
            }
        });
        let runtime = Arc::new(runtime);
        // reqwest builds its connector inside a runtime.
        let _inside = runtime.enter();
        let client = |policy| {
            reqwest::Client::builder()
                .no_proxy()
                .redirect(policy)
                .timeout(limit)
                .user_agent(concat!("git/2.0 (teneral ", env!("CARGO_PKG_VERSION"), ")"))
                .build()
                .map_err(|e| error(format!("cannot make the HTTP client: {e}")))
        };
        Ok(Self(Shared {
            list: client(redirects)?,
            pack: client(reqwest::redirect::Policy::none())?,
            runtime: Arc::clone(&runtime),
            base: Arc::new(Mutex::new(None)),
        }))
    }
}

impl SmartSubtransport for Http {
    fn action(
        &self,
        url: &str,
        action: Service,
    ) -> Result<Box<dyn SmartSubtransportStream>, git2::Error> {
        let led_to = self.0.base.lock().map_err(|_| error("the fetch's state was lost"))?.clone();
        let base = led_to.unwrap_or_else(|| url.trim_end_matches('/').to_owned());
        let request = match action {
            Service::UploadPackLs => Request::List(format!("{base}{LIST_SUFFIX}")),
            Service::UploadPack => Request::Pack(format!("{base}{PACK_SUFFIX}")),
            Service::ReceivePackLs | Service::ReceivePack => {
                return Err(error("the kernel never pushes"))
            }
        };
        let shared = self.0.clone();
        let stream = Stream { shared, request: Some(request), sent: Vec::new(), answer: None };
        Ok(Box::new(stream))
    }

    fn close(&self) -> Result<(), git2::Error> {
        Ok(())
    }
}

enum Request {
    List(String),
    Pack(String),
}

/// One request: what git writes is its body, sent at the first read; the
/// answer's body is what git reads.
struct Stream {
    shared: Shared,
    /// Until it is sent.
    request: Option<Request>,
    sent: Vec<u8>,
    answer: Option<(reqwest::Response, bytes::Bytes)>,
}

fn io_error(what: impl std::fmt::Display) -> io::Error {
    io::Error::other(what.to_string())
}

impl Stream {
    fn send(&mut self, request: Request) -> io::Result<reqwest::Response> {
        let shared = &self.shared;
        let (url, want) = match &request {
            Request::List(url) => (url, "application/x-git-upload-pack-advertisement"),
            Request::Pack(url) => (url, "application/x-git-upload-pack-result"),
        };
        let builder = match &request {
            Request::List(url) => shared.list.get(url),
            Request::Pack(url) => shared
                .pack
                .post(url)
                .header("Content-Type", "application/x-git-upload-pack-request")
                .header("Accept", want)
                .body(std::mem::take(&mut self.sent)),
        };
        // Made inside the runtime: the request's timer needs one.
        let answer = shared.runtime.block_on(async { builder.send().await });
        let answer = answer.map_err(|e| io_error(describe(&e)))?;
        verdict(url, answer.status(), header(&answer), want).map_err(io_error)?;
        if let Request::List(_) = request {
            let reached = answer.url().as_str();
            if reached != url {
                if let Some(base) = reached.strip_suffix(LIST_SUFFIX) {
                    let mut led_to = shared.base.lock().map_err(|_| io_error("state lost"))?;
                    *led_to = Some(base.to_owned());
                }
            }
        }
        Ok(answer)
    }
}

fn header(answer: &reqwest::Response) -> Option<&str> {
    answer.headers().get("content-type").and_then(|v| v.to_str().ok())
}

/// A reqwest error with its causes (its own text names only the first).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Whether an answer is one git can read: a success, of the content type
/// the smart protocol names (a "dumb" server's plain files are refused).
pub(super) fn verdict(
    url: &str,
    status: reqwest::StatusCode,
    content_type: Option<&str>,
    want: &str,
) -> Result<(), String> {
    if status == reqwest::StatusCode::UNAUTHORIZED
        || status == reqwest::StatusCode::PROXY_AUTHENTICATION_REQUIRED
    {
        return Err(format!(
            "{url} asks for credentials; the kernel fetches the species only from a remote \
             that needs none"
        ));
    }
    if !status.is_success() {
        return Err(format!("{url} answered {status}; see that the remote's address is right"));
    }
    let kind = content_type.unwrap_or("").split(';').next().unwrap_or("").trim();
    if kind != want {
        return Err(format!(
            "{url} answered {kind:?}, not {want:?}: it is not a git server speaking the smart \
             HTTP protocol, the only one the kernel fetches from"
        ));
    }
    Ok(())
}

impl Write for Stream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.request.is_none() {
            return Err(io_error("git wrote after reading the answer"));
        }
        self.sent.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(request) = self.request.take() {
            self.answer = Some((self.send(request)?, bytes::Bytes::new()));
        }
        let Some((answer, pending)) = &mut self.answer else { return Ok(0) };
        while pending.is_empty() {
            match self.shared.runtime.block_on(async { answer.chunk().await }) {
                Ok(Some(chunk)) => *pending = chunk,
                Ok(None) => return Ok(0),
                Err(e) => return Err(io_error(describe(&e))),
            }
        }
        let n = pending.len().min(buf.len());
        buf[..n].copy_from_slice(&pending.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    const ADS: &str = "application/x-git-upload-pack-advertisement";

    #[test]
    fn which_answers_git_can_read() {
        let url = "https://example.org/s.git/info/refs";
        let table: [(StatusCode, Option<&str>, Result<(), &str>); 7] = [
            (StatusCode::OK, Some(ADS), Ok(())),
            (
                StatusCode::OK,
                Some("application/x-git-upload-pack-advertisement; charset=x"),
                Ok(()),
            ),
            (StatusCode::UNAUTHORIZED, Some(ADS), Err("asks for credentials")),
            (StatusCode::PROXY_AUTHENTICATION_REQUIRED, None, Err("asks for credentials")),
            (StatusCode::NOT_FOUND, Some(ADS), Err("answered 404 Not Found")),
            // A "dumb" server serves the file itself.
            (StatusCode::OK, Some("text/plain"), Err("not a git server speaking the smart")),
            (StatusCode::OK, None, Err("answered \"\"")),
        ];
        for (status, kind, want) in table {
            let got = verdict(url, status, kind, ADS);
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(text), Err(words)) => {
                    assert!(text.contains(words), "{status} {kind:?}: {text}");
                    assert!(text.contains(url), "{text}");
                }
                (got, want) => panic!("{status} {kind:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
