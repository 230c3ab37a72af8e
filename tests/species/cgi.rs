//! A species on a remote: bare repositories served on loopback by the real
//! `git http-backend`, through the smallest HTTP-to-CGI bridge that git's
//! and libgit2's smart HTTP clients need (one request per connection, a
//! body by Content-Length or chunked).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const BACKEND: &str = "/usr/lib/git-core/git-http-backend";

/// Serves every bare repository under `root` at `http://127.0.0.1:<port>/`.
pub struct Host {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Host {
    pub fn start(root: &Path) -> std::io::Result<Host> {
        let backend = git_exec_path().join("git-http-backend");
        let backend = if backend.exists() { backend } else { PathBuf::from(BACKEND) };
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let (root, flag) = (root.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    if let Err(e) = serve(stream, &root, &backend) {
                        eprintln!("cgi host: {e}");
                    }
                }
            }
        });
        Ok(Host { port, stop, thread: Some(thread) })
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

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
    }
}

fn git_exec_path() -> PathBuf {
    let mut git = Command::new("git");
    git.arg("--exec-path");
    crate::common::run_within(&mut git, crate::common::QUICK, "finding git's programs")
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_default()
}

fn serve(stream: TcpStream, root: &Path, backend: &Path) -> std::io::Result<()> {
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
    let mut cgi = Command::new(backend);
    cgi.env_clear()
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
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
    let mut response = Vec::new();
    for h in head.lines().filter(|l| !l.trim().is_empty()) {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_owned(),
            _ => response.extend_from_slice(format!("{h}\r\n").as_bytes()),
        }
    }
    let mut stream = stream;
    stream.write_all(format!("HTTP/1.1 {status}\r\n").as_bytes())?;
    stream.write_all(&response)?;
    stream.write_all(
        format!("Content-Length: {}\r\nConnection: close\r\n\r\n", rest.len()).as_bytes(),
    )?;
    stream.write_all(rest)?;
    stream.flush()
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
