//! Bare git repositories served on loopback by the real `git http-backend`,
//! through the smallest HTTP-to-CGI bridge that git's and libgit2's smart
//! HTTP clients need: one request per connection, a body by Content-Length
//! or chunked. [`GitServer`] serves every repository under a directory;
//! the stand-in forge ([`crate::forge`]) puts its credentials and API in
//! front of the same bridge ([`Request`], [`serve_git`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::limit::{run_within, QUICK};

/// Where Debian puts the backend, when git cannot say.
const BACKEND: &str = "/usr/lib/git-core/git-http-backend";

/// The path of `git http-backend`: in git's own exec path, or Debian's.
pub fn backend() -> PathBuf {
    let mut git = Command::new("git");
    git.arg("--exec-path");
    let exec = run_within(&mut git, QUICK, "finding git's programs")
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_default();
    let backend = exec.join("git-http-backend");
    if backend.exists() {
        backend
    } else {
        PathBuf::from(BACKEND)
    }
}

/// One HTTP request as read off its connection.
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// Reads the request line, the headers and the body.
    pub fn read(stream: &TcpStream) -> std::io::Result<Request> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("GET").to_owned();
        let target = parts.next().unwrap_or("/").to_owned();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let mut request = Request {
            method,
            path: path.to_owned(),
            query: query.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                request.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        request.body = if request.header("transfer-encoding").is_some_and(|v| v.contains("chunked"))
        {
            read_chunked(&mut reader)?
        } else {
            let length: usize =
                request.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };
        Ok(request)
    }

    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }
}

/// Writes a whole response: the status line, `headers` (each line ending
/// in CRLF), the body's length, and the body; the connection closes after.
pub fn respond(
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

/// Answers `request` with `backend` (`git http-backend`) over the
/// repositories under `root`, as the user `remote_user` when one is given.
pub fn serve_git(
    stream: &mut TcpStream,
    request: Request,
    root: &Path,
    backend: &Path,
    remote_user: Option<&str>,
) -> std::io::Result<()> {
    let mut cgi = Command::new(backend);
    cgi.env_clear()
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(user) = remote_user {
        cgi.env("REMOTE_USER", user);
    }
    if let Some(t) = request.header("content-type") {
        cgi.env("CONTENT_TYPE", t);
    }
    if let Some(p) = request.header("git-protocol") {
        cgi.env("GIT_PROTOCOL", p);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let body = request.body;
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
    let mut headers = String::new();
    for h in head.lines().filter(|l| !l.trim().is_empty()) {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_owned(),
            _ => headers.push_str(&format!("{h}\r\n")),
        }
    }
    respond(stream, &status, &headers, rest)
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

/// Serves every bare repository under a directory at
/// `http://127.0.0.1:<port>/`, anyone let in.
pub struct GitServer {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GitServer {
    pub fn start(root: &Path) -> std::io::Result<GitServer> {
        let backend = backend();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let (root, flag) = (root.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let served = Request::read(&stream)
                    .and_then(|request| serve_git(&mut stream, request, &root, &backend, None));
                if let Err(e) = served {
                    eprintln!("git server: {e}");
                }
            }
        });
        Ok(GitServer { port, stop, thread: Some(thread) })
    }

    /// The URL of the repository `name` (`species.git`).
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// Stops serving: the port refuses connections from then on.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop();
    }
}
