//! The proxy over real sockets on loopback: a stand-in origin reached
//! through the test hook, the host's loopback refused with a 403 naming
//! the reason, malformed and oversized heads refused with a 400.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::server::MAX_HEAD;
use super::{Config, Egress, Policy};

/// An origin that answers one request per connection with "origin: <head's first line>".
async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).await.unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head);
                let body = format!("origin: {}", text.lines().next().unwrap_or_default());
                let reply =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    addr
}

async fn proxy(policy: Policy, stand_in: SocketAddr) -> SocketAddr {
    let config = Config { policy, stand_ins: vec![("allowed.test".into(), stand_in)] };
    let egress = Egress::bind("127.0.0.1:0".parse().expect("an address"), config)
        .await
        .expect("the proxy binds");
    let addr = egress.local_addr().expect("its address");
    tokio::spawn(egress.serve());
    addr
}

/// Sends `request` to the proxy and reads until it closes.
async fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).await.expect("the proxy answers");
    s.write_all(request).await.expect("the request is sent");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn plain_http_and_connect_reach_an_allowed_origin() {
    let origin = origin().await;
    let proxy = proxy(Policy::Public, origin).await;
    let answer = exchange(
        proxy,
        b"GET http://allowed.test/a?b HTTP/1.1\r\nHost: allowed.test\r\nProxy-Connection: keep-alive\r\n\r\n",
    )
    .await;
    assert!(answer.ends_with("origin: GET /a?b HTTP/1.1"), "{answer}");
    let answer = exchange(
        proxy,
        b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\nGET /in HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\n"), "{answer}");
    assert!(answer.ends_with("origin: GET /in HTTP/1.1"), "{answer}");
}

#[tokio::test]
async fn the_hosts_loopback_and_unlisted_names_get_a_403_with_the_reason() {
    let origin = origin().await;
    let proxy = proxy(Policy::Allow(vec!["allowed.test".into(), "localhost".into()]), origin).await;
    let table: &[(String, &str)] = &[
        (format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", origin.port()), "(loopback)"),
        (format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", origin.port()), "(loopback)"),
        (format!("CONNECT localhost:{} HTTP/1.1\r\n\r\n", origin.port()), "(loopback)"),
        ("CONNECT [::ffff:127.0.0.1]:80 HTTP/1.1\r\n\r\n".into(), "(loopback)"),
        ("CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n".into(), "(link-local)"),
        (
            "CONNECT 93.184.215.14:443 HTTP/1.1\r\n\r\n".into(),
            "93.184.215.14 is not in TENERAL_EGRESS",
        ),
    ];
    for (request, why) in table {
        let answer = exchange(proxy, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{request}: {answer}");
        assert!(answer.contains(why) && answer.ends_with('\n'), "{request}: {answer}");
    }
    let off = self::proxy(Policy::Off, origin).await;
    let answer = exchange(off, b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n").await;
    assert!(answer.contains("403") && answer.contains("TENERAL_EGRESS=off"), "{answer}");
}

#[tokio::test]
async fn malformed_and_oversized_heads_get_a_400() {
    let origin = origin().await;
    let proxy = proxy(Policy::Public, origin).await;
    let answer = exchange(proxy, b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    let mut huge = b"GET http://allowed.test/ HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', MAX_HEAD + 10));
    let answer = exchange(proxy, &huge).await;
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("longer than"), "{answer}");
}

/// A tunnel through which nothing goes is closed after the idle time, both
/// ends still open: the client reads the end of its connection.
#[tokio::test]
async fn an_idle_tunnel_is_closed() {
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = silent.local_addr().expect("its address");
    // Accepts and holds each connection, saying nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let config = Config { policy: Policy::Public, stand_ins: vec![("quiet.test".into(), addr)] };
    let egress = Egress::bind("127.0.0.1:0".parse().expect("an address"), config)
        .await
        .expect("the proxy binds")
        .idle_after(std::time::Duration::from_millis(300));
    let proxy = egress.local_addr().expect("its address");
    tokio::spawn(egress.serve());
    let mut s = TcpStream::connect(proxy).await.expect("the proxy answers");
    s.write_all(b"CONNECT quiet.test:443 HTTP/1.1\r\nHost: quiet.test:443\r\n\r\n")
        .await
        .expect("the request is sent");
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut answer))
        .await
        .expect("the proxy closes the idle tunnel well within 10 s");
    assert!(read.is_ok(), "{read:?}");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "the tunnel was open: {text}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300), "not before the idle time");
}

/// The byte at `i` of the test streams: a pattern a lost, doubled or
/// reordered chunk breaks.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// Megabytes both ways through a CONNECT tunnel,
/// with a half-close: the client's end of input reaches the origin while
/// the origin's answer still flows back, every byte in order.
#[tokio::test]
async fn a_tunnel_carries_megabytes_both_ways_across_a_half_close() {
    const UP: usize = 8 << 20;
    const DOWN: usize = 24 << 20;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    // Reads the client's bytes to their end (the half-close), checks them,
    // then answers DOWN bytes and closes.
    let origin = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("the proxy connects");
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.expect("the client's bytes arrive");
        let intact = got.len() == UP && got.iter().enumerate().all(|(i, b)| *b == pattern(i));
        let down: Vec<u8> = (0..DOWN).map(pattern).collect();
        s.write_all(&down).await.expect("the answer goes back");
        intact
    });
    let config = Config { policy: Policy::Public, stand_ins: vec![("bulk.test".into(), addr)] };
    let egress = Egress::bind("127.0.0.1:0".parse().expect("an address"), config)
        .await
        .expect("the proxy binds");
    let proxy = egress.local_addr().expect("its address");
    tokio::spawn(egress.serve());
    let s = TcpStream::connect(proxy).await.expect("the proxy answers");
    let (mut rx, mut tx) = s.into_split();
    tx.write_all(b"CONNECT bulk.test:443 HTTP/1.1\r\nHost: bulk.test:443\r\n\r\n")
        .await
        .expect("the request is sent");
    let sender = tokio::spawn(async move {
        let up: Vec<u8> = (0..UP).map(pattern).collect();
        tx.write_all(&up).await.expect("the upload goes through");
        tx.shutdown().await.expect("the client half-closes");
        tx
    });
    let mut answer = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(60), rx.read_to_end(&mut answer))
        .await
        .expect("the tunnel ends within 60 s")
        .expect("the answer reads to its end");
    let _tx = sender.await.expect("the sender ends");
    assert!(
        origin.await.expect("the origin ends"),
        "the origin got the upload intact, then its end"
    );
    let head = b"HTTP/1.1 200 Connection established\r\n\r\n";
    assert!(
        answer.starts_with(head),
        "{:?}",
        String::from_utf8_lossy(&answer[..64.min(answer.len())])
    );
    let body = &answer[head.len()..];
    assert_eq!(body.len(), DOWN, "every byte of the answer came back");
    assert!(body.iter().enumerate().all(|(i, b)| *b == pattern(i)), "in order");
}
