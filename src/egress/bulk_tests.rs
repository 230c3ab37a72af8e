//! Large transfers and half-closes through a real tunnel, for both relays
//! (copying, the kernel's, and splicing, the bench's comparison): 64 MiB each way at
//! once, checked by SHA-256 against the stream's known hash, and a tunnel
//! whose one side ends first delivering what the other still sends, then
//! ending.

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Config, Egress, Policy};

const SIZE: usize = 64 << 20;
const CHUNK: usize = 256 * 1024;

/// A xorshift byte stream: its bytes are not a pattern a relay could get
/// right by accident.
struct Stream(u64);

impl Stream {
    fn fill(&mut self, buf: &mut [u8]) {
        for part in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            part.copy_from_slice(&x.to_le_bytes()[..part.len()]);
        }
    }
}

/// The SHA-256 of the first bytes of `Stream(UP)` and `Stream(DOWN)`: of
/// [`SIZE`] bytes, and of the far-side test's 8 and 4 MiB (computed apart,
/// by a Python rendering of [`Stream`]).
const UP_64: &str = "a271990038660ae044c9d479cc40f7c49602c732551943b85244b27b685d1687";
const DOWN_64: &str = "86a57a702bed39a5e2a7ab9779f900e946bb78adedb279ebd5d2153c47949217";
const UP_8: &str = "a71f9379b44a195753e8408b9fa308baff72d57a569382186ac788315a4f7da5";
const DOWN_4: &str = "dac8c60d9e37e26662ad9b2183a257ada67811c27d42ab90a4f8bc4b66684c8a";

fn hex(hash: Sha256) -> String {
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

async fn send(to: &mut (impl AsyncWrite + Unpin), seed: u64, size: usize) {
    let mut stream = Stream(seed);
    let mut buf = vec![0u8; CHUNK];
    let mut left = size;
    while left > 0 {
        let n = left.min(CHUNK);
        stream.fill(&mut buf[..n]);
        to.write_all(&buf[..n]).await.expect("the bytes go into the tunnel");
        left -= n;
    }
}

/// Reads to the end: the count and the SHA-256 of what came.
async fn receive(from: &mut (impl AsyncRead + Unpin)) -> (usize, String) {
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    loop {
        let n = from.read(&mut buf).await.expect("the tunnel reads");
        if n == 0 {
            return (total, hex(hash));
        }
        hash.update(&buf[..n]);
        total += n;
    }
}

/// A proxy (copying, or splicing) whose `far.test` is `origin`, and a
/// client's tunnel to it, past the 200.
async fn tunnel_to(origin: SocketAddr, copying: bool) -> TcpStream {
    let config = Config { policy: Policy::Public, stand_ins: vec![("far.test".into(), origin)] };
    let mut egress = Egress::bind("127.0.0.1:0".parse().expect("an address"), config)
        .await
        .expect("the proxy binds");
    if !copying {
        egress = egress.splicing();
    }
    let proxy = egress.local_addr().expect("its address");
    tokio::spawn(egress.serve());
    let mut s = TcpStream::connect(proxy).await.expect("the proxy answers");
    s.write_all(b"CONNECT far.test:443 HTTP/1.1\r\nHost: far.test:443\r\n\r\n")
        .await
        .expect("the request is sent");
    let head = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut got = vec![0u8; head.len()];
    s.read_exact(&mut got).await.expect("the proxy answers the CONNECT");
    assert_eq!(got, head, "{}", String::from_utf8_lossy(&got));
    s
}

const UP: u64 = 0x9e37_79b9_7f4a_7c15;
const DOWN: u64 = 0xd1b5_4a32_d192_ed03;

async fn both_ways(copying: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let origin = listener.local_addr().expect("its address");
    // Receives the upload and sends the download at the same time.
    let far = tokio::spawn(async move {
        let (s, _) = listener.accept().await.expect("the proxy connects");
        let (mut rx, mut tx) = s.into_split();
        let sending = tokio::spawn(async move {
            send(&mut tx, DOWN, SIZE).await;
            tx.shutdown().await.expect("the origin half-closes");
            tx
        });
        let got = receive(&mut rx).await;
        let _tx = sending.await.expect("the origin's sender ends");
        got
    });
    let (mut rx, mut tx) = tunnel_to(origin, copying).await.into_split();
    let sending = tokio::spawn(async move {
        send(&mut tx, UP, SIZE).await;
        tx.shutdown().await.expect("the client half-closes");
        tx
    });
    let down = tokio::time::timeout(Duration::from_secs(120), receive(&mut rx))
        .await
        .expect("the download ends within 120 s");
    let _tx = sending.await.expect("the client's sender ends");
    let up = far.await.expect("the origin ends");
    assert_eq!(up, (SIZE, UP_64.to_owned()), "the upload arrived whole (copying: {copying})");
    assert_eq!(down, (SIZE, DOWN_64.to_owned()), "the download arrived whole (copying: {copying})");
}

#[tokio::test]
async fn sixty_four_mib_each_way_arrive_whole_through_a_spliced_tunnel() {
    both_ways(false).await;
}

#[tokio::test]
async fn sixty_four_mib_each_way_arrive_whole_through_a_copying_tunnel() {
    both_ways(true).await;
}

/// The origin sends its answer and ends its side first; the client, having
/// read that end, still sends 8 MiB, which the origin receives whole; then
/// the client ends too and the tunnel is over: each side reads its end.
async fn the_far_side_ends_first(copying: bool) {
    const ANSWER: usize = 4 << 20;
    const REST: usize = 8 << 20;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let origin = listener.local_addr().expect("its address");
    let far = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("the proxy connects");
        send(&mut s, DOWN, ANSWER).await;
        s.shutdown().await.expect("the origin half-closes");
        receive(&mut s).await
    });
    let mut s = tunnel_to(origin, copying).await;
    let answer = tokio::time::timeout(Duration::from_secs(60), receive(&mut s))
        .await
        .expect("the origin's end reaches the client within 60 s");
    assert_eq!(
        answer,
        (ANSWER, DOWN_4.to_owned()),
        "the answer, then its end (copying: {copying})"
    );
    send(&mut s, UP, REST).await;
    s.shutdown().await.expect("the client half-closes");
    let rest = tokio::time::timeout(Duration::from_secs(60), far)
        .await
        .expect("the client's end reaches the origin within 60 s")
        .expect("the origin ends");
    assert_eq!(rest, (REST, UP_8.to_owned()), "what the client sent after the half-close arrived");
}

#[tokio::test]
async fn a_tunnel_whose_far_side_ends_first_delivers_the_rest_then_ends() {
    the_far_side_ends_first(false).await;
    the_far_side_ends_first(true).await;
}

/// A tunnel through which a byte goes every 100 ms outlives an idle time
/// of 400 ms many times over; once the bytes stop it is closed.
#[tokio::test]
async fn a_tunnel_in_use_outlives_its_idle_time() {
    in_use_then_quiet(true).await;
    in_use_then_quiet(false).await;
}

async fn in_use_then_quiet(copying: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let origin = listener.local_addr().expect("its address");
    // Echoes each byte back.
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("the proxy connects");
        let mut byte = [0u8; 1];
        while s.read(&mut byte).await.unwrap_or(0) == 1 {
            if s.write_all(&byte).await.is_err() {
                return;
            }
        }
    });
    let config = Config { policy: Policy::Public, stand_ins: vec![("far.test".into(), origin)] };
    let mut egress = Egress::bind("127.0.0.1:0".parse().expect("an address"), config)
        .await
        .expect("the proxy binds")
        .idle_after(Duration::from_millis(400));
    if !copying {
        egress = egress.splicing();
    }
    let proxy = egress.local_addr().expect("its address");
    tokio::spawn(egress.serve());
    let mut s = TcpStream::connect(proxy).await.expect("the proxy answers");
    s.write_all(b"CONNECT far.test:443 HTTP/1.1\r\n\r\n").await.expect("the request is sent");
    let head = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut got = vec![0u8; head.len()];
    s.read_exact(&mut got).await.expect("the proxy answers the CONNECT");
    let started = std::time::Instant::now();
    for i in 0..20u8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.write_all(&[i]).await.expect("the tunnel is open");
        let mut back = [0u8; 1];
        s.read_exact(&mut back).await.expect("the byte comes back");
        assert_eq!(back, [i]);
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2000),
        "five idle times went by ({copying})"
    );
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .expect("once quiet, the tunnel is closed within 10 s")
        .expect("the close reads as an end");
    assert!(rest.is_empty(), "{rest:?}");
}
