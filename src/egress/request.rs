//! A proxy request's head, read strictly: the request line and the header
//! lines of an HTTP/1.x request to a forward proxy, either `CONNECT
//! host:port` or a plain-HTTP request in absolute form
//! (`GET http://host[:port]/path HTTP/1.1`). Anything else is refused with
//! the reason, which the proxy sends back as a 400.

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The host as the client named it: a name or an address (IPv6 without
    /// its brackets).
    pub host: String,
    pub port: u16,
    /// For plain HTTP: the origin-form target (`/path?query`) to send on.
    /// `None` for CONNECT.
    pub path: Option<String>,
    pub version: String,
    /// Header lines as sent, without their line ends.
    pub headers: Vec<String>,
}

/// Headers a proxy consumes itself and never sends on.
const HOP_BY_HOP: &[&str] =
    &["proxy-connection", "proxy-authorization", "connection", "keep-alive", "te", "upgrade"];

impl Request {
    /// The head sent to the origin for a plain-HTTP request: origin-form,
    /// hop-by-hop headers dropped, `Connection: close` (one request per
    /// connection, so a second request on it cannot go to this origin
    /// unchecked), a `Host` added when the client sent none.
    pub fn origin_head(&self) -> Vec<u8> {
        let path = self.path.as_deref().unwrap_or("/");
        let mut head = format!("{} {} {}\r\n", self.method, path, self.version);
        let mut has_host = false;
        for line in &self.headers {
            let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
            if HOP_BY_HOP.contains(&name.as_str()) {
                continue;
            }
            has_host |= name == "host";
            head.push_str(line);
            head.push_str("\r\n");
        }
        if !has_host {
            let host = if self.host.contains(':') {
                format!("[{}]", self.host)
            } else {
                self.host.clone()
            };
            head.push_str(&format!("Host: {host}:{}\r\n", self.port));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }
}

/// Parses a request head (everything before the blank line, without it).
pub fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the request line is not `METHOD target HTTP/1.x`".into());
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(format!("{version:?} is not HTTP/1.0 or HTTP/1.1"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err("the method is not a token".into());
    }
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() || !line.contains(':') || line.starts_with([' ', '\t']) {
            return Err("a header line is malformed".into());
        }
        if line.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err("a header line holds a control character".into());
        }
        headers.push(line.to_owned());
    }
    let (authority, path, default_port) = if method == "CONNECT" {
        (target, None, None)
    } else if let Some(rest) = target.strip_prefix("http://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let path = &rest[end..];
        let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
        (&rest[..end], Some(path), Some(80))
    } else if target.starts_with("https://") {
        return Err("an https:// URL goes through CONNECT (set HTTPS_PROXY)".into());
    } else {
        return Err("the target is not http://host/... or, for CONNECT, host:port".into());
    };
    let (host, port) = authority_of(authority, default_port)?;
    Ok(Request {
        method: method.to_owned(),
        host,
        port,
        path,
        version: version.to_owned(),
        headers,
    })
}

/// `host:port`, `[v6]:port`, or (with a default port) `host`.
fn authority_of(authority: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    if authority.contains('@') {
        return Err("credentials in the URL are not taken".into());
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("an IPv6 address without its `]`")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match (port, default_port) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or("not a port number")?,
        (None, Some(p)) => p,
        (None, None) => return Err("CONNECT needs host:port".into()),
    };
    let fine = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'_'));
    if !fine {
        return Err("not a host name or address".into());
    }
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form_are_read() {
        let r = parse(b"CONNECT crates.io:443 HTTP/1.1\r\nHost: crates.io:443").expect("valid");
        assert_eq!(
            (r.method.as_str(), r.host.as_str(), r.port, r.path),
            ("CONNECT", "crates.io", 443, None)
        );
        let r = parse(b"CONNECT [2001:db8::1]:443 HTTP/1.1").expect("valid");
        assert_eq!((r.host.as_str(), r.port), ("2001:db8::1", 443));
        let r = parse(b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive")
            .expect("valid");
        assert_eq!((r.host.as_str(), r.port, r.path.as_deref()), ("example.com", 80, Some("/a?b")));
        let head = String::from_utf8(r.origin_head()).expect("text");
        assert_eq!(head, "GET /a?b HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n");
        let r = parse(b"POST http://example.com:8080?q HTTP/1.0").expect("valid");
        assert_eq!((r.port, r.path.as_deref()), (8080, Some("/?q")));
        let head = String::from_utf8(r.origin_head()).expect("text");
        assert!(head.contains("Host: example.com:8080\r\n"), "{head}");
    }

    #[test]
    fn anything_else_is_refused() {
        let bad: &[&[u8]] = &[
            b"GET / HTTP/1.1",
            b"GET https://example.com/ HTTP/1.1",
            b"CONNECT example.com HTTP/1.1",
            b"CONNECT example.com:0 HTTP/1.1",
            b"CONNECT example.com:99999 HTTP/1.1",
            b"CONNECT user@example.com:443 HTTP/1.1",
            b"CONNECT exa mple.com:443 HTTP/1.1",
            b"GET http://example.com/ HTTP/2",
            b"get http://example.com/ HTTP/1.1",
            b"GET http://example.com/ HTTP/1.1\r\nno colon",
            b"GET http://example.com/ HTTP/1.1\r\n folded: x",
            b"GET http://ex\xffample.com/ HTTP/1.1",
            b"GET http://[::1/ HTTP/1.1",
        ];
        for head in bad {
            assert!(parse(head).is_err(), "{:?}", String::from_utf8_lossy(head));
        }
    }
}
