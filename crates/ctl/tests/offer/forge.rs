//! A stand-in forge on loopback: the species' bare repositories served by
//! git's own `git http-backend` (one request per connection), and the REST
//! endpoints a publish and a witness use, answering as GitHub documents
//! them: a repository, create a pull request (201; 422 "already exists"),
//! the open pull requests of a branch, a comment. Every request must carry
//! the token: git's as HTTP Basic (asked for with a 401), the API's as
//! `Authorization: Bearer`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{json, Value};

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
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if f.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    if let Err(e) = serve(stream, &r, &s, port) {
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

fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &str,
    body: &[u8],
) -> std::io::Result<()> {
    stream.write_all(format!("HTTP/1.1 {status}\r\n{headers}").as_bytes())?;
    stream.write_all(
        format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()).as_bytes(),
    )?;
    stream.write_all(body)?;
    stream.flush()
}

fn respond_json(stream: &mut TcpStream, status: &str, body: &Value) -> std::io::Result<()> {
    respond(stream, status, "Content-Type: application/json\r\n", body.to_string().as_bytes())
}

fn serve(stream: TcpStream, root: &Path, state: &Mutex<State>, port: u16) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("GET").to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let mut stream = stream;
    let auth = header("authorization").unwrap_or_default();
    let token = state.lock().expect("the state").token.clone();
    if let Some(api) = path.strip_prefix("/api") {
        if auth != format!("Bearer {token}") {
            state.lock().expect("the state").refused += 1;
            let answer = json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"});
            return respond_json(&mut stream, "401 Unauthorized", &answer);
        }
        return rest(&mut stream, &method, api, query, &body, root, state, port);
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
    cgi(&mut stream, &method, path, query, &header, body, root)
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
            let made = Command::new("git")
                .args([
                    "update-ref",
                    &format!("refs/pull/{number}/head"),
                    &format!("refs/heads/{head}"),
                ])
                .current_dir(&repo)
                .status()?;
            if !made.success() {
                let answer = json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest",
                    "field": "head", "code": "invalid"}]});
                return respond_json(stream, "422 Unprocessable Entity", &answer);
            }
            let sha = Command::new("git")
                .args(["rev-parse", &format!("refs/pull/{number}/head")])
                .current_dir(&repo)
                .output()?;
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

fn cgi(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    query: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: Vec<u8>,
    root: &Path,
) -> std::io::Result<()> {
    let exec = Command::new("git").arg("--exec-path").output()?;
    let backend =
        PathBuf::from(String::from_utf8_lossy(&exec.stdout).trim()).join("git-http-backend");
    let mut cgi = Command::new(backend);
    cgi.env_clear()
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "x-access-token")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(t) = header("content-type") {
        cgi.env("CONTENT_TYPE", t);
    }
    if let Some(p) = header("git-protocol") {
        cgi.env("GIT_PROTOCOL", p);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let output = child.wait_with_output()?;
    let _ = writer.join();
    let out = output.stdout;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    let split = split.or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (head, rest) = match split {
        Some((i, n)) => (String::from_utf8_lossy(&out[..i]).into_owned(), &out[i + n..]),
        None => (String::new(), &out[..]),
    };
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for h in head.lines().filter(|l| !l.trim().is_empty()) {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_owned(),
            _ => response.push_str(&format!("{h}\r\n")),
        }
    }
    respond(stream, &status, &response, rest)
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(std::io::Error::other)?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
