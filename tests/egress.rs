//! A generation's network goes through the kernel:
//! a probe body (`tests/egress/probe/`) runs real attempts inside a real
//! caged generation under `teneral run`. A service on the host's loopback
//! is unreachable directly (nothing listens on the namespace's loopback:
//! ECONNREFUSED) and through the egress proxy (403, and the kernel logs the
//! host); a public-looking name, mapped to a local stand-in by the proxy's
//! test resolver hook, is reachable through it by curl (plain HTTP and
//! CONNECT) and by git; a name outside `TENERAL_EGRESS` is refused and
//! logged.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::cage::{require_cage, LONG};
use crate::common::*;

const ECONNREFUSED: i64 = 111;

/// A tiny HTTP server on the host's loopback that answers every request
/// with `text` and keeps each request head it got.
struct Server {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(text: &'static str) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                seen.lock().expect("the heads' lock").push(String::from_utf8_lossy(&head).into());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        Ok(Server { port, heads })
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("the heads' lock").clone()
    }
}

fn probe_body(probes: &str) -> Vec<(&'static str, String)> {
    vec![
        ("body/Cargo.toml", include_str!("egress/probe/Cargo.toml").into()),
        ("body/Cargo.lock", include_str!("egress/probe/Cargo.lock").into()),
        ("body/src/main.rs", include_str!("egress/probe/src/main.rs").into()),
        ("body/probes.txt", probes.into()),
    ]
}

#[test]
fn a_generation_reaches_only_what_the_egress_proxy_lets_out() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let host_service = Server::start("host service reached")?;
    let public = Server::start("public stand-in reached")?;
    let (hp, pp) = (host_service.port, public.port);
    // No NO_PROXY for the attempts at loopback through the proxy: the body's
    // own NO_PROXY spares loopback, as a tool should.
    let via = "env -u NO_PROXY -u no_proxy curl -sS -m 10 -o /dev/null";
    let probes = [
        ("direct.host", format!("connect 127.0.0.1:{hp}")),
        ("proxy.host", format!("{via} -w '%{{http_code}}' http://127.0.0.1:{hp}/")),
        ("proxy.localhost", format!("{via} -p -w '%{{http_connect}}' http://localhost:{hp}/")),
        ("proxy.denied", format!("{via} -w '%{{http_code}}' http://denied.test/")),
        ("allowed.http", "curl -sS -m 10 http://allowed.test/plain".into()),
        ("allowed.connect", "curl -sS -m 10 -p http://allowed.test/tunnel".into()),
        ("allowed.git", "git ls-remote http://allowed.test/repo.git 2>&1; true".into()),
        ("env", "echo $HTTPS_PROXY $http_proxy $NO_PROXY".into()),
    ];
    let probes: String = probes.iter().map(|(n, c)| format!("{n}\t{c}\n")).collect();
    let files = probe_body(&probes);
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let ind = Individual::with_body(
        &files,
        "",
        &[
            "TENERAL_EGRESS=allowed.test,localhost",
            &format!(
                "TENERAL_TEST_EGRESS_RESOLVE=allowed.test=127.0.0.1:{pp},denied.test=127.0.0.1:{pp}"
            ),
        ],
    )?;
    let kernel = ind.start()?;
    ind.wait_for("the probe body's last reply", LONG, |e| {
        e["type"] == "reply" && e["text"] == "every probe tried"
    })?;
    let found: std::collections::HashMap<String, Value> = ind
        .events("note")
        .into_iter()
        .filter(|e| e["kind"] == "probe")
        .filter_map(|e| Some((e["data"]["probe"].as_str()?.to_owned(), e["data"].clone())))
        .collect();
    let detail = |name: &str| found[name]["detail"].as_str().unwrap_or_default().to_owned();
    let log = ind.kernel_log();

    let direct = &found["direct.host"];
    assert_eq!(
        (direct["ok"].as_bool(), direct["errno"].as_i64()),
        (Some(false), Some(ECONNREFUSED)),
        "{direct}"
    );
    assert_eq!(detail("proxy.host"), "403", "loopback through the proxy");
    assert!(detail("proxy.localhost").starts_with("403"), "{}", detail("proxy.localhost"));
    assert_eq!(detail("proxy.denied"), "403", "a name outside TENERAL_EGRESS");
    assert!(
        host_service.heads().is_empty(),
        "the host service was reached: {:?}",
        host_service.heads()
    );
    for (host, why) in [
        ("127.0.0.1", "(loopback), which a generation never reaches"),
        ("localhost", "(loopback), which a generation never reaches"),
        ("denied.test", "denied.test is not in TENERAL_EGRESS"),
    ] {
        let line = log.lines().find(|l| l.contains("egress refused") && l.contains(host));
        assert!(line.is_some_and(|l| l.contains(why)), "a refusal of {host} logged:\n{log}");
    }

    assert_eq!(detail("allowed.http"), "public stand-in reached");
    assert_eq!(detail("allowed.connect"), "public stand-in reached");
    let heads = public.heads();
    assert!(heads.iter().any(|h| h.starts_with("GET /plain HTTP/1.1")), "{heads:?}");
    assert!(heads.iter().any(|h| h.starts_with("GET /tunnel HTTP/1.1")), "{heads:?}");
    assert!(
        heads.iter().any(|h| h.starts_with("GET /repo.git/info/refs") && h.contains("git/")),
        "git went through the proxy: {heads:?}\n{}",
        detail("allowed.git")
    );
    assert!(detail("env").starts_with("http://127.0.0.1:"), "{}", detail("env"));
    drop(kernel);
    Ok(())
}
