//! A small blocking HTTP/1.1 client, enough to POST JSON to the model.
//!
//! Why by hand: by the contract the model is always at
//! `http://127.0.0.1:<port>/v1`, served by the kernel, which adds the real
//! credentials and TLS on the way out. So the body needs no TLS, no async
//! runtime and no HTTP crate: one request per connection (`Connection:
//! close`), a body read by `Content-Length`, by chunks, or to the end,
//! whole ([`post_json`]) or as it arrives ([`open`], for a streamed reply).
//! That keeps the body quick to build, which every mutation does.
//!
//! The caller gets the socket as soon as it is connected, so that an
//! interrupt can shut it down and the blocked read returns at once.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long to wait for the connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one read may wait: a model that thinks long answers late.
const READ_TIMEOUT: Duration = Duration::from_secs(15 * 60);

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Splits `http://host:port/path` into the address and the path.
pub fn split_url(url: &str) -> io::Result<(String, String)> {
    let rest = url.strip_prefix("http://").ok_or_else(|| invalid(format!("not http://: {url}")))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = if host.contains(':') { host.to_owned() } else { format!("{host}:80") };
    Ok((host, path.to_owned()))
}

/// POSTs `body` as JSON to `url` with a bearer token and reads the whole
/// answer. `connected` is given a handle on the socket before anything is
/// sent.
pub fn post_json(
    url: &str,
    bearer: &str,
    body: &[u8],
    connected: impl FnOnce(&TcpStream),
) -> io::Result<Response> {
    let mut opened = open(url, bearer, body, connected)?;
    let mut bytes = Vec::new();
    opened.body.read_to_end(&mut bytes)?;
    Ok(Response { status: opened.head.status, body: bytes })
}

/// POSTs `body` as JSON and reads only the answer's head: the body is left
/// to be read as it arrives (a stream of server-sent events).
pub fn open(
    url: &str,
    bearer: &str,
    body: &[u8],
    connected: impl FnOnce(&TcpStream),
) -> io::Result<Opened> {
    let (host, path) = split_url(url)?;
    let addr =
        host.to_socket_addrs()?.next().ok_or_else(|| invalid(format!("{host} has no address")))?;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    connected(&stream);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {bearer}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader)?;
    let body = Body::new(reader, &head);
    Ok(Opened { head, body })
}

/// An answer whose head is read and whose body is still on the socket.
pub struct Opened {
    pub head: Head,
    pub body: Body<BufReader<TcpStream>>,
}

/// What the head of an answer says.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub status: u16,
    /// `Content-Type`, lower case, as sent.
    pub content_type: String,
    length: Option<usize>,
    chunked: bool,
}

impl Head {
    /// The body is server-sent events.
    pub fn is_event_stream(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

/// Reads a status line and the headers.
pub fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let status_line = read_line(reader)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| invalid(format!("not an HTTP status line: {status_line:?}")))?;
    let mut head = Head { status, ..Head::default() };
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.length = Some(value.parse::<usize>().map_err(|_| invalid("bad Content-Length"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = value.to_ascii_lowercase();
        }
    }
    Ok(head)
}

/// Reads a status line, the headers, and the body.
pub fn read_response(mut reader: impl BufRead) -> io::Result<Response> {
    let head = read_head(&mut reader)?;
    let mut body = Vec::new();
    Body::new(reader, &head).read_to_end(&mut body)?;
    Ok(Response { status: head.status, body })
}

/// An answer's body, read by chunks, by `Content-Length` or to the end, as
/// its head says.
pub struct Body<R> {
    reader: R,
    framing: Framing,
}

enum Framing {
    /// Bytes left of the current chunk; `None` before a size line.
    Chunked(Option<usize>),
    Length(usize),
    ToEnd,
    Done,
}

impl<R: BufRead> Body<R> {
    pub fn new(reader: R, head: &Head) -> Body<R> {
        let framing = match (head.chunked, head.length) {
            (true, _) => Framing::Chunked(None),
            (false, Some(length)) => Framing::Length(length),
            (false, None) => Framing::ToEnd,
        };
        Body { reader, framing }
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match &mut self.framing {
                Framing::Done => return Ok(0),
                Framing::ToEnd => return self.reader.read(out),
                Framing::Length(0) => self.framing = Framing::Done,
                Framing::Length(left) => {
                    let want = out.len().min(*left);
                    let n = self.reader.read(&mut out[..want])?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    *left -= n;
                    return Ok(n);
                }
                Framing::Chunked(None) => {
                    let size_line = read_line(&mut self.reader)?;
                    let size = size_line.split(';').next().unwrap_or("").trim();
                    let size =
                        usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
                    // Trailers, if any, are not needed: the connection closes.
                    self.framing =
                        if size == 0 { Framing::Done } else { Framing::Chunked(Some(size)) };
                }
                Framing::Chunked(Some(0)) => {
                    read_line(&mut self.reader)?; // the CRLF after the chunk
                    self.framing = Framing::Chunked(None);
                }
                Framing::Chunked(Some(left)) => {
                    let want = out.len().min(*left);
                    let n = self.reader.read(&mut out[..want])?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    *left -= n;
                    return Ok(n);
                }
            }
        }
    }
}

fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}
