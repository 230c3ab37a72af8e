//! The proxy against a small upstream on loopback that records what reaches
//! it.

mod harness;
mod signin;

use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

use hyper::Method;

use super::rules::same;
use super::*;
use harness::*;

#[test]
fn the_real_key_goes_upstream_and_the_stand_in_never_does() {
    run(async {
        let reply = full(
            200,
            &[
                ("content-type", "application/json"),
                ("x-request-id", "req-1"),
                ("set-cookie", "session=upstream"),
                ("x-internal", "no"),
            ],
            r#"{"id":"chatcmpl-1"}"#,
        );
        let fake = fake_upstream(reply).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        let response = must(
            client()
                .post(format!("http://{proxy}/v1/chat/completions?trace=1"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .header("content-type", "application/json")
                .header("cookie", "session=body")
                .header("x-custom", STAND_IN)
                .header("openai-organization", "org-body")
                .body(r#"{"model":"m"}"#)
                .send()
                .await,
        );
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["x-request-id"], "req-1");
        assert!(response.headers().get("set-cookie").is_none());
        assert!(response.headers().get("x-internal").is_none());
        assert_eq!(must(response.text().await), r#"{"id":"chatcmpl-1"}"#);

        let seen = fake.seen();
        assert_eq!(seen.len(), 1);
        let request = &seen[0];
        assert_eq!(request.method, Method::POST);
        assert_eq!(request.uri, "/v1/chat/completions?trace=1");
        assert_eq!(request.body, r#"{"model":"m"}"#);
        assert_eq!(request.headers["authorization"], format!("Bearer {REAL}").as_str());
        assert_eq!(request.headers["content-type"], "application/json");
        for name in ["cookie", "x-custom", "openai-organization"] {
            assert!(request.headers.get(name).is_none(), "{name} went upstream");
        }
        for (name, value) in &request.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            assert!(!value.contains(STAND_IN), "the stand-in key went upstream in {name}");
        }
    });
}

#[test]
fn each_forwarded_path_reaches_its_place_under_the_base() {
    run(async {
        let fake = fake_upstream(full(200, &[], "{}")).await;
        // A base with a path of its own and a trailing slash.
        let proxy = start(format!("http://{}/api/v1/", fake.addr), MAX_REQUEST_BYTES).await;
        let client = client();
        let auth = format!("Bearer {STAND_IN}");
        let post = |path: &str| client.post(format!("http://{proxy}{path}")).body("{}");
        let r = must(post("/v1/responses").header("authorization", &auth).send().await);
        assert_eq!(r.status(), 200);
        let r = must(post("/v1/chat/completions").header("authorization", &auth).send().await);
        assert_eq!(r.status(), 200);
        let get = client.get(format!("http://{proxy}/v1/models"));
        let r = must(get.header("authorization", &auth).send().await);
        assert_eq!(r.status(), 200);

        let seen = fake.seen();
        let got: Vec<(&Method, &str)> = seen.iter().map(|s| (&s.method, s.uri.as_str())).collect();
        assert_eq!(
            got,
            [
                (&Method::POST, "/api/v1/responses"),
                (&Method::POST, "/api/v1/chat/completions"),
                (&Method::GET, "/api/v1/models"),
            ]
        );
    });
}

#[test]
fn a_wrong_or_missing_stand_in_key_is_401_and_goes_nowhere() {
    run(async {
        let fake = fake_upstream(full(200, &[], "{}")).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        let wrong = [
            None,
            Some(format!("Bearer {REAL}")),
            Some("Bearer wrong".to_owned()),
            Some(format!("Bearer {STAND_IN}x")),
            Some(format!("Bearer {}", &STAND_IN[1..])),
            Some(format!("Basic {STAND_IN}")),
            Some(format!("Bearer{STAND_IN}")),
            Some("Bearer ".to_owned()),
            Some(STAND_IN.to_owned()),
        ];
        for header in wrong {
            let mut request =
                client().post(format!("http://{proxy}/v1/chat/completions")).body("{}");
            if let Some(value) = &header {
                request = request.header("authorization", value);
            }
            let response = must(request.send().await);
            assert_eq!(response.status(), 401, "{header:?}");
            let error = error_of(response).await;
            assert_eq!(error["code"], "invalid_api_key", "{header:?}");
            assert_eq!(error["type"], "invalid_request_error", "{header:?}");
        }
        assert_eq!(fake.seen().len(), 0, "a refused request reached the upstream");
    });
}

#[test]
fn anything_but_the_three_routes_is_404() {
    run(async {
        let fake = fake_upstream(full(200, &[], "{}")).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        let cases = [
            (Method::GET, "/v1/chat/completions"),
            (Method::POST, "/v1/models"),
            (Method::DELETE, "/v1/models"),
            (Method::POST, "/v1/embeddings"),
            (Method::POST, "/chat/completions"),
            (Method::POST, "/v1/chat/completions/"),
            (Method::POST, "/v2/responses"),
            (Method::GET, "/"),
        ];
        for (method, path) in cases {
            let request = client().request(method.clone(), format!("http://{proxy}{path}"));
            let response =
                must(request.header("authorization", format!("Bearer {STAND_IN}")).send().await);
            assert_eq!(response.status(), 404, "{method} {path}");
            let error = error_of(response).await;
            assert_eq!(error["code"], "unknown_url", "{method} {path}");
        }
        assert_eq!(fake.seen().len(), 0);
    });
}

#[test]
fn an_upstream_that_is_down_is_502_naming_its_host() {
    run(async {
        let closed = must(TcpListener::bind("127.0.0.1:0").await);
        let addr = must(closed.local_addr());
        drop(closed);
        let proxy = start(format!("http://{addr}/v1"), MAX_REQUEST_BYTES).await;
        let response = must(
            client()
                .post(format!("http://{proxy}/v1/responses"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .body("{}")
                .send()
                .await,
        );
        assert_eq!(response.status(), 502);
        assert_eq!(response.headers()["content-type"], "application/json");
        let error = error_of(response).await;
        let message = error["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(&addr.to_string()), "{message}");
        assert!(message.to_ascii_lowercase().contains("refused"), "{message}");
        assert!(!message.contains(REAL) && !message.contains(STAND_IN), "{message}");
        assert_eq!(error["type"], "upstream_error");
    });
}

#[test]
fn upstream_statuses_and_rate_limit_headers_pass_back() {
    run(async {
        let reply = full(
            429,
            &[
                ("content-type", "application/json"),
                ("retry-after", "7"),
                ("x-ratelimit-remaining-requests", "0"),
            ],
            r#"{"error":{"message":"slow down"}}"#,
        );
        let fake = fake_upstream(reply).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        let response = must(
            client()
                .post(format!("http://{proxy}/v1/chat/completions"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .body("{}")
                .send()
                .await,
        );
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()["retry-after"], "7");
        assert_eq!(response.headers()["x-ratelimit-remaining-requests"], "0");
        assert_eq!(must(response.text().await), r#"{"error":{"message":"slow down"}}"#);
    });
}

#[test]
fn a_whole_answer_keeps_its_length_and_is_not_chunked() {
    run(async {
        let body = r#"{"id":"chatcmpl-1","choices":[]}"#;
        let fake = fake_upstream(full(200, &[("content-type", "application/json")], body)).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {STAND_IN}\r\n\
             content-length: 2\r\nconnection: close\r\n\r\n{{}}"
        );
        let answer = raw(proxy, head.as_bytes()).await.to_ascii_lowercase();
        assert!(answer.starts_with("http/1.1 200"), "{answer}");
        assert!(answer.contains(&format!("content-length: {}\r\n", body.len())), "{answer}");
        assert!(!answer.contains("transfer-encoding"), "{answer}");
        assert!(answer.ends_with(&format!("\r\n\r\n{}", body.to_ascii_lowercase())), "{answer}");
    });
}

#[test]
fn a_streamed_reply_is_relayed_as_it_arrives() {
    run(async {
        let (feed, chunks) = mpsc::channel(4);
        let chunks = Arc::new(Mutex::new(Some(chunks)));
        let reply: Reply = Arc::new(move |_| {
            let taken = chunks.lock().unwrap_or_else(PoisonError::into_inner).take();
            let Some(chunks) = taken else { unreachable!("one request only") };
            let mut response = Response::new(Either::Right(Chunks(chunks)));
            let event_stream = HeaderValue::from_static("text/event-stream");
            response.headers_mut().insert(header::CONTENT_TYPE, event_stream);
            response
        });
        let fake = fake_upstream(reply).await;
        let proxy = start(format!("http://{}/v1", fake.addr), MAX_REQUEST_BYTES).await;
        must(feed.send(Bytes::from_static(b"data: first\n\n")).await);
        let mut response = must(
            client()
                .post(format!("http://{proxy}/v1/responses"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .body(r#"{"stream":true}"#)
                .send()
                .await,
        );
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        // The upstream has not finished; a proxy that waited for the end
        // would never hand over this first chunk.
        let first = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await;
        assert_eq!(must(must(first)), Some(Bytes::from_static(b"data: first\n\n")));
        must(feed.send(Bytes::from_static(b"data: second\n\n")).await);
        drop(feed);
        let mut rest = Vec::new();
        while let Some(chunk) = must(response.chunk().await) {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(rest, b"data: second\n\n");
    });
}

#[test]
fn a_body_over_the_cap_is_413_and_goes_nowhere() {
    run(async {
        let fake = fake_upstream(full(200, &[], "{}")).await;

        // The real cap, declared up front: refused before a byte of the body
        // is read (the test sends none, so a proxy that waited would hang).
        let upstream =
            Upstream { base_url: format!("http://{}/v1", fake.addr), api_key: Secret::new(REAL) };
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let proxy = must(Proxy::bind(loopback, upstream, STAND_IN.to_owned()).await);
        let addr = proxy.local_addr();
        tokio::spawn(proxy.serve());
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {STAND_IN}\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            MAX_REQUEST_BYTES + 1
        );
        let answer = raw(addr, head.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(answer.contains("request_too_large"), "{answer}");

        // A small cap and a chunked body that does not declare its length.
        let small = start(format!("http://{}/v1", fake.addr), 1024).await;
        let mut request = format!(
            "POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {STAND_IN}\r\n\
             transfer-encoding: chunked\r\nconnection: close\r\n\r\n800\r\n"
        )
        .into_bytes();
        request.extend_from_slice(&[b'a'; 0x800]);
        request.extend_from_slice(b"\r\n0\r\n\r\n");
        let answer = raw(small, &request).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert_eq!(fake.seen().len(), 0, "an oversized body reached the upstream");

        // Exactly at the cap passes.
        let response = must(
            client()
                .post(format!("http://{small}/v1/responses"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .body(vec![b'a'; 1024])
                .send()
                .await,
        );
        assert_eq!(response.status(), 200);
        assert_eq!(fake.seen().len(), 1);
    });
}

#[test]
fn bind_refuses_what_would_open_the_cage() {
    run(async {
        let upstream = || Upstream {
            base_url: "https://api.example/v1".to_owned(),
            api_key: Secret::new(REAL),
        };
        let everywhere = SocketAddr::from(([0, 0, 0, 0], 0));
        let result = Proxy::bind(everywhere, upstream(), STAND_IN.to_owned()).await;
        assert!(matches!(result, Err(ProxyError::NotLoopback { .. })));
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let result = Proxy::bind(loopback, upstream(), String::new()).await;
        assert!(matches!(result, Err(ProxyError::EmptyBodyKey)));
        let bad = Upstream { api_key: Secret::new("sk\nx"), ..upstream() };
        let result = Proxy::bind(loopback, bad, STAND_IN.to_owned()).await;
        assert!(matches!(result, Err(ProxyError::BadKey)));
        let bad = Upstream { base_url: "ftp://host/v1".to_owned(), ..upstream() };
        let result = Proxy::bind(loopback, bad, STAND_IN.to_owned()).await;
        assert!(matches!(result, Err(ProxyError::BadBaseUrl { .. })));
    });
}

#[test]
fn routes_keys_and_hosts() {
    let routes = [
        (Method::POST, "/v1/chat/completions", Some("/chat/completions")),
        (Method::POST, "/v1/responses", Some("/responses")),
        (Method::GET, "/v1/models", Some("/models")),
        (Method::GET, "/v1/responses", None),
        (Method::PUT, "/v1/chat/completions", None),
        (Method::POST, "/v1//responses", None),
        (Method::POST, "/V1/responses", None),
    ];
    for (method, path, suffix) in routes {
        assert_eq!(route(&method, path), suffix, "{method} {path}");
    }

    let hosts = [
        ("http://127.0.0.1:4000/v1", true),
        ("http://[::1]:4000/v1", true),
        ("http://localhost:4000/v1", true),
        ("https://api.openai.com/v1", false),
        ("http://10.0.0.1/v1", false),
        ("not a url", false),
    ];
    for (url, loopback) in hosts {
        assert_eq!(on_loopback(url), loopback, "{url}");
    }

    assert!(same(b"abc", b"abc"));
    assert!(!same(b"abc", b"abd"));
    assert!(!same(b"abc", b"ab"));
    assert!(!same(b"", b"a"));

    let hosts = [
        ("https://api.openai.com/v1", Some("api.openai.com:443")),
        ("http://10.0.0.2:8080/v1", Some("10.0.0.2:8080")),
        ("http://localhost/v1", Some("localhost:80")),
        ("ftp://host/v1", None),
        ("host/v1", None),
    ];
    for (base, host) in hosts {
        assert_eq!(host_of(base).as_deref(), host, "{base}");
    }
}

#[test]
fn only_compatible_and_openai_settings_make_an_upstream() {
    let compatible = "TENERAL_BASE_URL=https://h/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n";
    let settings = must(Settings::parse(compatible));
    let upstream = Upstream::from_settings(&settings);
    assert_eq!(upstream.as_ref().map(|u| u.base_url.as_str()), Some("https://h/v1"));
    assert_eq!(upstream.as_ref().map(|u| u.api_key.expose()), Some("k"));
    let standin = must(Settings::parse("TENERAL_PROVIDER=standin\nTENERAL_API_KEY=k\n"));
    assert!(Upstream::from_settings(&standin).is_none());
    let chatgpt = must(Settings::parse("TENERAL_PROVIDER=chatgpt\nTENERAL_MODEL=m\n"));
    assert!(Upstream::from_settings(&chatgpt).is_none());
}

#[test]
fn the_stand_in_s_stream_reaches_the_body_frame_by_frame_with_its_usage() {
    run(async {
        let dir = must(tempfile::tempdir());
        let script = dir.path().join("script.jsonl");
        let gap = Duration::from_millis(80);
        let step =
            format!(r#"{{"reply":"one two three four five six","chunk_ms":{}}}"#, gap.as_millis());
        must(std::fs::write(&script, step));
        let config = crate::standin::Config {
            key: Some(REAL.to_owned()),
            script: Some(script),
            scripted: false,
            ..crate::standin::Config::default()
        };
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let standin = must(crate::standin::Standin::bind(loopback, config).await);
        let base_url = standin.base_url();
        tokio::spawn(standin.serve());
        let proxy = start(base_url, MAX_REQUEST_BYTES).await;
        let request = serde_json::json!({
            "model": "standin", "messages": [{"role": "user", "content": "hi"}],
            "stream": true, "stream_options": {"include_usage": true},
        });
        let mut response = must(
            client()
                .post(format!("http://{proxy}/v1/chat/completions"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .header("content-type", "application/json")
                .body(request.to_string())
                .send()
                .await,
        );
        assert_eq!(response.status(), 200);
        let mut text = must(response.chunk().await).map(|c| c.to_vec()).unwrap_or_default();
        let first = std::time::Instant::now();
        while let Some(chunk) = must(response.chunk().await) {
            text.extend_from_slice(&chunk);
        }
        let last = first.elapsed();
        // Role, six words, the finish, the usage and [DONE]: ten frames, the
        // last sent nine gaps after the first.
        assert!(
            last >= gap * 9 * 8 / 10,
            "the first frame came only {last:?} before the end: the proxy held the stream"
        );
        let text = String::from_utf8_lossy(&text);
        let datas: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
        assert_eq!(datas.len(), 10, "{text}");
        assert_eq!(datas.last(), Some(&"[DONE]"));
        let usage: serde_json::Value = must(serde_json::from_str(datas[8]));
        assert!(usage["usage"]["total_tokens"].as_u64().is_some_and(|n| n > 0), "{usage}");
    });
}

/// A metered proxy reads the usage a stream reports as it passes, and
/// once the budget is passed refuses the next request without forwarding
/// it; a 5xx answer stops it as a provider failure.
#[test]
fn a_metered_proxy_counts_streamed_usage_and_stops_at_the_budget() {
    run(async {
        let dir = must(tempfile::tempdir());
        let script = dir.path().join("script.jsonl");
        must(std::fs::write(&script, "{\"reply\":\"one two three\"}\n{\"reply\":\"never\"}\n"));
        let config = crate::standin::Config {
            key: Some(REAL.to_owned()),
            script: Some(script),
            scripted: false,
            ..crate::standin::Config::default()
        };
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let standin = must(crate::standin::Standin::bind(loopback, config).await);
        let upstream = Upstream { base_url: standin.base_url(), api_key: Secret::new(REAL) };
        tokio::spawn(standin.serve());
        let meter = Arc::new(Meter::new(3));
        let proxy = must(
            Proxy::bind_metered(loopback, upstream, STAND_IN.into(), Arc::clone(&meter)).await,
        );
        let proxy_addr = proxy.local_addr();
        tokio::spawn(proxy.serve());
        let request = serde_json::json!({
            "model": "standin", "messages": [{"role": "user", "content": "hi"}],
            "stream": true, "stream_options": {"include_usage": true},
        });
        let ask = || {
            client()
                .post(format!("http://{proxy_addr}/v1/chat/completions"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .header("content-type", "application/json")
                .body(request.to_string())
                .send()
        };
        let text = must(must(ask().await).text().await);
        let reported: u64 = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .filter_map(|v| v["usage"]["total_tokens"].as_u64())
            .sum();
        assert!(reported > 3, "{text}");
        assert_eq!(meter.used(), reported);
        let stopped = tokio::time::timeout(Duration::from_secs(5), meter.stopped()).await;
        assert_eq!(must(stopped), meter::Stopped::Overrun { used: reported, budget: 3 });
        let refused = must(ask().await);
        assert_eq!(refused.status(), 429);
        assert_eq!(error_of(refused).await["code"], "token_budget_spent");
        assert_eq!(meter.used(), reported, "the refused request reached the provider");

        let down = fake_upstream(full(503, &[], "{}")).await;
        let upstream =
            Upstream { base_url: format!("http://{}/v1", down.addr), api_key: Secret::new(REAL) };
        let failing = Arc::new(Meter::new(1000));
        let proxy = must(
            Proxy::bind_metered(loopback, upstream, STAND_IN.into(), Arc::clone(&failing)).await,
        );
        let addr = proxy.local_addr();
        tokio::spawn(proxy.serve());
        let answer = must(
            client()
                .post(format!("http://{addr}/v1/responses"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .body("{}")
                .send()
                .await,
        );
        assert_eq!(answer.status(), 503);
        let why = failing.stop_reason().map(|w| w.to_string()).unwrap_or_default();
        assert!(why.starts_with("provider failure") && why.contains("503"), "{why}");
    });
}
