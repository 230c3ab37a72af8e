//! A stand-in forge on loopback: the species' bare repositories served by
//! git's own `git http-backend` (through [`crate::git_http`]), and the REST
//! endpoints a publish and a witness use, answering as GitHub documents
//! them: a repository, create a pull request (201; 422 "already exists"),
//! the open pull requests of a branch, a comment. Every request must carry
//! the token: git's as HTTP Basic (asked for with a 401), the API's as
//! `Authorization: Bearer`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{json, Value};

use crate::git_http::{self, respond, serve_git, Request};
use crate::limit::{run_within, QUICK};

/// What the forge saw and holds.
#[derive(Default)]
pub struct State {
    pub token: String,
    pub pulls: Vec<Value>,
    pub comments: Vec<Value>,
    /// `git-receive-pack` requests that were let in (pushes).
    pub pushes: usize,
    /// Requests refused for their credentials.
    pub refused: usize,
    /// The next pull request is made, but answered 502 (a failure after the push).
    pub fail_next_pull: bool,
    /// How long each git request is held before it is served, so that a
    /// watcher of `/proc` surely sees the client's processes alive.
    pub hold_git: std::time::Duration,
}

pub struct Forge {
    pub port: u16,
    pub root: PathBuf,
    pub state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Forge {
    pub fn start(root: &Path, token: &str) -> Forge {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let state = Arc::new(Mutex::new(State { token: token.to_owned(), ..State::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s, f) = (root.to_owned(), state.clone(), stop.clone());
        let backend = git_http::backend();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if f.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    if let Err(e) = serve(stream, &r, &backend, &s, port) {
                        eprintln!("forge: {e}");
                    }
                }
            }
        });
        Forge { port, root: root.to_owned(), state, stop, thread: Some(thread) }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    pub fn api(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }
}

impl Drop for Forge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn respond_json(stream: &mut TcpStream, status: &str, body: &Value) -> std::io::Result<()> {
    respond(stream, status, "Content-Type: application/json\r\n", body.to_string().as_bytes())
}

fn serve(
    mut stream: TcpStream,
    root: &Path,
    backend: &Path,
    state: &Mutex<State>,
    port: u16,
) -> std::io::Result<()> {
    let request = Request::read(&stream)?;
    let (method, path, query) = (&request.method, request.path.as_str(), &request.query);
    let auth = request.header("authorization").unwrap_or_default();
    let token = state.lock().expect("the state").token.clone();
    if let Some(api) = path.strip_prefix("/api") {
        if auth != format!("Bearer {token}") {
            state.lock().expect("the state").refused += 1;
            let answer = json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"});
            return respond_json(&mut stream, "401 Unauthorized", &answer);
        }
        return rest(&mut stream, method, api, query, &request.body, root, state, port);
    }
    if auth != format!("Basic {}", base64(format!("x-access-token:{token}").as_bytes())) {
        if !auth.is_empty() {
            state.lock().expect("the state").refused += 1;
        }
        return respond(
            &mut stream,
            "401 Unauthorized",
            "WWW-Authenticate: Basic realm=\"forge\"\r\n",
            b"",
        );
    }
    if path.ends_with("/git-receive-pack") {
        state.lock().expect("the state").pushes += 1;
    }
    let hold = state.lock().expect("the state").hold_git;
    std::thread::sleep(hold);
    serve_git(&mut stream, request, root, backend, Some("x-access-token"))
}

#[allow(clippy::too_many_arguments)]
fn rest(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
    root: &Path,
    state: &Mutex<State>,
    port: u16,
) -> std::io::Result<()> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut s = state.lock().expect("the state");
    match (method, parts.as_slice()) {
        ("GET", ["repos", o, r]) => {
            let answer = json!({"full_name": format!("{o}/{r}"), "permissions": {"push": true, "pull": true}});
            respond_json(stream, "200 OK", &answer)
        }
        ("POST", ["repos", o, r, "pulls"]) => {
            let asked: Value = serde_json::from_slice(body).unwrap_or_default();
            let head = asked["head"].as_str().unwrap_or_default().to_owned();
            if s.pulls.iter().any(|p| p["head"]["ref"] == head.as_str() && p["state"] == "open") {
                let answer = json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest",
                    "code": "custom", "message": format!("A pull request already exists for {o}:{head}.")}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"});
                return respond_json(stream, "422 Unprocessable Entity", &answer);
            }
            let repo = root.join(format!("{o}/{r}.git"));
            let number = s.pulls.len() as u64 + 1;
            let mut update = Command::new("git");
            update
                .args([
                    "update-ref",
                    &format!("refs/pull/{number}/head"),
                    &format!("refs/heads/{head}"),
                ])
                .current_dir(&repo);
            let made = run_within(&mut update, QUICK, "making the pull request's ref")
                .map_err(std::io::Error::other)?;
            if !made.status.success() {
                let answer = json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest",
                    "field": "head", "code": "invalid"}]});
                return respond_json(stream, "422 Unprocessable Entity", &answer);
            }
            let mut parse = Command::new("git");
            parse.args(["rev-parse", &format!("refs/pull/{number}/head")]).current_dir(&repo);
            let sha = run_within(&mut parse, QUICK, "reading the pull request's commit")
                .map_err(std::io::Error::other)?;
            let sha = String::from_utf8_lossy(&sha.stdout).trim().to_owned();
            let pull = json!({"number": number, "state": "open",
                "html_url": format!("http://127.0.0.1:{port}/{o}/{r}/pull/{number}"),
                "title": asked["title"], "body": asked["body"],
                "head": {"ref": head, "sha": sha}, "base": {"ref": asked["base"]}});
            s.pulls.push(pull.clone());
            if s.fail_next_pull {
                s.fail_next_pull = false;
                return respond(stream, "502 Bad Gateway", "", b"");
            }
            respond_json(stream, "201 Created", &pull)
        }
        ("GET", ["repos", o, _, "pulls"]) => {
            let head = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("head="))
                .and_then(|h| h.strip_prefix(&format!("{o}:")))
                .unwrap_or_default();
            let open: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| p["state"] == "open" && (head.is_empty() || p["head"]["ref"] == head))
                .cloned()
                .collect();
            respond_json(stream, "200 OK", &Value::Array(open))
        }
        ("GET", ["repos", _, _, "pulls", n]) => {
            match s.pulls.iter().find(|p| n.parse::<u64>().ok() == p["number"].as_u64()) {
                Some(p) => respond_json(stream, "200 OK", p),
                None => respond_json(stream, "404 Not Found", &json!({"message": "Not Found"})),
            }
        }
        ("POST", ["repos", o, r, "issues", n, "comments"]) => {
            let asked: Value = serde_json::from_slice(body).unwrap_or_default();
            let id = s.comments.len() + 1;
            let comment = json!({"id": id, "body": asked["body"], "issue": n,
                "html_url": format!("http://127.0.0.1:{port}/{o}/{r}/pull/{n}#issuecomment-{id}")});
            s.comments.push(comment.clone());
            respond_json(stream, "201 Created", &comment)
        }
        _ => respond_json(stream, "404 Not Found", &json!({"message": "Not Found"})),
    }
}
