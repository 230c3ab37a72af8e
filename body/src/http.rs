//! A small blocking HTTP/1.1 client, enough to POST JSON to the model.
//!
//! Why by hand: by the contract the model is always at
//! `http://127.0.0.1:<port>/v1`, served by the kernel, which adds the real
//! credentials and TLS on the way out. So the body needs no TLS, no async
//! runtime and no HTTP crate: one request per connection (`Connection:
//! close`), a body read by `Content-Length`, by chunks, or to the end. That
//! keeps the body quick to build, which every mutation does.
//!
//! The caller gets the socket as soon as it is connected, so that an
//! interrupt can shut it down and the blocked read returns at once.

use std::io::{self, BufRead, BufReader, Write};
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

/// POSTs `body` as JSON to `url` with a bearer token. `connected` is given a
/// handle on the socket before anything is sent.
pub fn post_json(
    url: &str,
    bearer: &str,
    body: &[u8],
    connected: impl FnOnce(&TcpStream),
) -> io::Result<Response> {
    let (host, path) = split_url(url)?;
    let addr =
        host.to_socket_addrs()?.next().ok_or_else(|| invalid(format!("{host} has no address")))?;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    connected(&stream);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {bearer}\r\n\
         Content-Type: application/json\r\nAccept: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    read_response(BufReader::new(stream))
}

/// Reads a status line, the headers, and the body.
pub fn read_response(mut reader: impl BufRead) -> io::Result<Response> {
    let status_line = read_line(&mut reader)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| invalid(format!("not an HTTP status line: {status_line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    loop {
        let line = read_line(&mut reader)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| invalid("bad Content-Length"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let size_line = read_line(&mut reader)?;
            let size = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
            if size == 0 {
                break; // trailers, if any, are not needed: the connection closes
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            read_line(&mut reader)?; // the CRLF after the chunk
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(Response { status, body })
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
