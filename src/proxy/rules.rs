//! The proxy's small rules: which requests go up and where, whose key a
//! request carries, which headers pass, and how an upstream's error reads.

use hyper::header::{self, HeaderMap, HeaderName};
use hyper::Method;

/// Whether `base_url` names this machine's loopback.
pub(super) fn on_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else { return false };
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

pub(super) fn host_of(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    Some(match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// The upstream path for a request the proxy forwards, or `None`.
pub(super) fn route(method: &Method, path: &str) -> Option<&'static str> {
    match (method, path) {
        (&Method::POST, "/v1/chat/completions") => Some("/chat/completions"),
        (&Method::POST, "/v1/responses") => Some("/responses"),
        (&Method::GET, "/v1/models") => Some("/models"),
        _ => None,
    }
}

/// Whether the request carries `Authorization: Bearer <key>`.
pub(super) fn authorized(headers: &HeaderMap, key: &[u8]) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some(space) = value.iter().position(|b| *b == b' ') else {
        return false;
    };
    let (scheme, rest) = value.split_at(space);
    scheme.eq_ignore_ascii_case(b"bearer") && same(rest.trim_ascii(), key)
}

/// Compares two keys in time that depends on their length alone.
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The body's request headers that go upstream.
pub(super) fn passes_up(name: &HeaderName) -> bool {
    [header::CONTENT_TYPE, header::ACCEPT].contains(name) || name.as_str() == "openai-beta"
}

/// An error and its sources, joined: reqwest's own message alone rarely
/// says what went wrong.
pub(super) fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
