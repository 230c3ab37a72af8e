//! The proxy with the ChatGPT sign-in, against the sign-in stand-in served
//! in process: the test signs in as the browser would, then talks through
//! the proxy as a body does while the stand-in expires or revokes tokens.
use std::path::Path;
use std::sync::Mutex;

use teneral_core::chatgpt::{self, Granted, Tokens};

use super::super::signin::Session;
use super::*;
use crate::standin::{Config, Standin};

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const SCRIPT: &str = "{\"reply\":\"one\"}\n{\"reply\":\"two\"}\n{\"reply\":\"three\"}\n";

/// A stand-in whose access tokens live `lifetime` seconds, serving; its
/// issuer and request log.
async fn standin(dir: &Path, lifetime: u64) -> (String, std::path::PathBuf) {
    let script = dir.join("script.jsonl");
    let log = dir.join("requests.jsonl");
    must(std::fs::write(&script, SCRIPT));
    let config = Config {
        script: Some(script),
        log: Some(log.clone()),
        token_lifetime: Some(lifetime),
        ..Config::default()
    };
    let standin = must(Standin::bind(([127, 0, 0, 1], 0).into(), config).await);
    let issuer = standin.issuer();
    tokio::spawn(standin.serve());
    (issuer, log)
}

/// Signs in as the browser and `teneralctl setup` would; writes the token
/// file under `home`.
async fn sign_in(issuer: &str, home: &Path) -> Tokens {
    let redirect = chatgpt::redirect_uri(1455);
    let authorize = must(reqwest::Url::parse_with_params(
        &format!("{issuer}/oauth/authorize"),
        [
            ("response_type", "code"),
            ("client_id", chatgpt::CLIENT_ID),
            ("redirect_uri", redirect.as_str()),
            ("scope", chatgpt::SCOPES),
            ("code_challenge", chatgpt::challenge(VERIFIER).as_str()),
            ("code_challenge_method", "S256"),
            ("state", "st"),
        ],
    ));
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).no_proxy();
    let answer = must(must(browser.build()).get(authorize).send().await);
    assert_eq!(answer.status(), 302);
    let location = answer.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("");
    let location = must(reqwest::Url::parse(location));
    let code = location.query_pairs().find(|(n, _)| n == "code").map(|(_, v)| v.into_owned());
    let code = code.unwrap_or_default();
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", chatgpt::CLIENT_ID),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let granted = must(client().post(format!("{issuer}/oauth/token")).form(&form).send().await);
    assert_eq!(granted.status(), 200);
    let granted: Granted = must(serde_json::from_str(&must(granted.text().await)));
    let tokens = must(Tokens::from_grant(issuer, granted, now_secs()));
    must(chatgpt::write(&chatgpt::tokens_path(home), &tokens));
    tokens
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A proxy for the plan with the sign-in of `home`; its address and the
/// notices it gave.
async fn proxy(issuer: &str, home: &Path) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let session = Arc::new(must(Session::load(home)));
    let notices = Arc::new(Mutex::new(Vec::new()));
    let told = Arc::clone(&notices);
    session.set_notice(Arc::new(move |text: &str| {
        told.lock().unwrap_or_else(PoisonError::into_inner).push(text.to_owned())
    }));
    let plan = format!("{issuer}/backend-api/codex");
    let proxy = must(
        Proxy::bind_signed_in(([127, 0, 0, 1], 0).into(), &plan, session, STAND_IN.into()).await,
    );
    let addr = proxy.local_addr();
    tokio::spawn(proxy.serve());
    (addr, notices)
}

/// One turn as the body sends it: status and body.
async fn turn(proxy: SocketAddr) -> (u16, serde_json::Value) {
    let response = must(
        client()
            .post(format!("http://{proxy}/v1/responses"))
            .header("authorization", format!("Bearer {STAND_IN}"))
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-5","input":"hello","store":false}"#)
            .send()
            .await,
    );
    let status = response.status().as_u16();
    (status, must(serde_json::from_str(&must(response.text().await))))
}

fn words(answer: &serde_json::Value) -> String {
    answer["output"][0]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The statuses the stand-in answered on `path`, in order.
fn statuses(log: &Path, path: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["path"] == path)
        .filter_map(|l| l["status"].as_u64())
        .collect()
}

#[test]
fn a_token_expired_mid_conversation_is_renewed_unnoticed() {
    run(async {
        let dir = must(tempfile::tempdir());
        let (issuer, log) = standin(dir.path(), 3600).await;
        let first = sign_in(&issuer, dir.path()).await;
        let (proxy, notices) = proxy(&issuer, dir.path()).await;
        let (status, answer) = turn(proxy).await;
        assert_eq!((status, words(&answer).as_str()), (200, "one"));
        must(client().post(format!("{issuer}/standin/expire")).send().await);
        let (status, answer) = turn(proxy).await;
        assert_eq!((status, words(&answer).as_str()), (200, "two"), "{answer}");
        // The plan refused the expired token once; the proxy renewed and sent again.
        assert_eq!(statuses(&log, "/backend-api/codex/responses"), [200, 401, 200]);
        let on_disk = must(chatgpt::read(&chatgpt::tokens_path(dir.path())));
        assert_ne!(on_disk.refresh_token, first.refresh_token, "the rotated tokens are written");
        assert_ne!(on_disk.access_token, first.access_token);
        assert!(notices.lock().unwrap_or_else(PoisonError::into_inner).is_empty());
        // A body that streams gets the plan's events as they are.
        let streamed = must(
            client()
                .post(format!("http://{proxy}/v1/responses"))
                .header("authorization", format!("Bearer {STAND_IN}"))
                .header("content-type", "application/json")
                .body(r#"{"model":"gpt-5","input":"again","stream":true}"#)
                .send()
                .await,
        );
        let kind = streamed.headers().get("content-type").and_then(|v| v.to_str().ok());
        assert_eq!(kind, Some("text/event-stream"));
        let events = must(streamed.text().await);
        let whole = must(chatgpt::whole_response(&events));
        assert_eq!(words(&whole), "three");
    });
}

#[test]
fn a_token_about_to_expire_is_renewed_before_it_is_sent() {
    run(async {
        let dir = must(tempfile::tempdir());
        // Shorter than the margin: each request renews first.
        let (issuer, log) = standin(dir.path(), chatgpt::RENEW_BEFORE_SECS / 2).await;
        let first = sign_in(&issuer, dir.path()).await;
        let (proxy, _) = proxy(&issuer, dir.path()).await;
        assert_eq!(turn(proxy).await.0, 200);
        assert_eq!(statuses(&log, "/backend-api/codex/responses"), [200], "never refused");
        assert_eq!(statuses(&log, "/oauth/token"), [200, 200], "the grant, then one renewal");
        let on_disk = must(chatgpt::read(&chatgpt::tokens_path(dir.path())));
        assert_ne!(on_disk.refresh_token, first.refresh_token);
    });
}

#[test]
fn a_revoked_sign_in_says_sign_in_again_once() {
    run(async {
        let dir = must(tempfile::tempdir());
        let (issuer, log) = standin(dir.path(), 3600).await;
        sign_in(&issuer, dir.path()).await;
        let (proxy, notices) = proxy(&issuer, dir.path()).await;
        must(client().post(format!("{issuer}/standin/revoke")).send().await);
        must(client().post(format!("{issuer}/standin/expire")).send().await);
        let (status, answer) = turn(proxy).await;
        assert_eq!(status, 401, "the plan's refusal reaches the body: {answer}");
        let told = notices.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(told[0].contains("sign in again with `teneralctl setup`"), "{told:?}");
        assert!(told[0].contains("refresh_token_invalidated"), "{told:?}");
        let (status, answer) = turn(proxy).await;
        assert_eq!(status, 401);
        assert_eq!(answer["error"]["code"], "signin_ended", "{answer}");
        assert_eq!(statuses(&log, "/oauth/token"), [200, 401], "no second renewal after the end");
        assert_eq!(notices.lock().unwrap_or_else(PoisonError::into_inner).len(), 1);
    });
}

#[test]
fn a_plan_limit_is_logged_with_the_plans_message_and_passed_back() {
    let table: &[(&str, &str)] = &[
        (
            r#"{"error":{"type":"usage_limit_reached","code":"usage_limit_reached","message":"You have hit your usage limit."}}"#,
            "the plan said: usage_limit_reached: You have hit your usage limit.",
        ),
        (r#"{"error":{"message":"slow down"}}"#, "the plan said: no code: slow down"),
        ("", "the plan said: no message"),
        ("busy", "the plan said: busy"),
    ];
    for (body, said) in table {
        let line = super::super::signin::limit_line(body.as_bytes());
        assert!(line.contains(said), "{body:?}: {line}");
        assert!(line.contains(chatgpt::USAGE_PAGE), "{line}");
    }
    run(async {
        let dir = must(tempfile::tempdir());
        let script = dir.path().join("limit.jsonl");
        let limit = r#"{"error":{"status":429,"message":"You have hit your usage limit."}}"#;
        must(std::fs::write(&script, format!("{limit}\n")));
        let config = Config { script: Some(script), ..Config::default() };
        let standin = must(Standin::bind(([127, 0, 0, 1], 0).into(), config).await);
        let issuer = standin.issuer();
        tokio::spawn(standin.serve());
        sign_in(&issuer, dir.path()).await;
        let (proxy, _) = proxy(&issuer, dir.path()).await;
        let (status, answer) = turn(proxy).await;
        assert_eq!(status, 429, "the plan's status reaches the body: {answer}");
        assert_eq!(answer["error"]["message"], "You have hit your usage limit.", "{answer}");
    });
}
