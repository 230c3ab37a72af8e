use super::*;

struct Counter(u64);

impl Fresh for Counter {
    fn fresh(&mut self) -> String {
        self.0 += 1;
        format!("n{}", self.0)
    }
}

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://localhost:1455/auth/callback";

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

fn authorize_query(change: (&str, &str)) -> Vec<(String, String)> {
    let mut query = vec![
        ("response_type", "code"),
        ("client_id", CLIENT_ID),
        ("redirect_uri", REDIRECT),
        ("scope", "openid profile email offline_access"),
        ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
        ("code_challenge_method", "S256"),
        ("state", "st-1"),
    ];
    query.retain(|(n, _)| *n != change.0);
    if !change.1.is_empty() {
        query.push(change);
    }
    pairs(&query)
}

fn call(
    s: &mut SignIn,
    method: &str,
    path: &str,
    q: &[(String, String)],
    b: &[(String, String)],
    auth: Option<&str>,
    now: u64,
) -> Reply {
    s.route(method, path, q, b, auth, Some(ACCOUNT), now, &mut Counter(now * 100))
        .expect("a sign-in route")
}

/// The code of a successful authorize, from its redirect.
fn code_of(reply: &Reply) -> String {
    let Reply::Redirect(to) = reply else { panic!("not a redirect: {reply:?}") };
    let url = reqwest::Url::parse(to).expect("an address");
    assert!(url.query_pairs().any(|(n, v)| n == "state" && v == "st-1"), "{to}");
    url.query_pairs().find(|(n, _)| n == "code").map(|(_, v)| v.into_owned()).expect("a code")
}

fn error_of(reply: &Reply) -> String {
    match reply {
        Reply::Redirect(to) => {
            let url = reqwest::Url::parse(to).expect("an address");
            url.query_pairs()
                .find(|(n, _)| n == "error")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        }
        Reply::Page(status, _) => format!("page {status}"),
        Reply::Json(status, body) => {
            let code =
                body["error"]["code"].as_str().or(body["error"].as_str()).unwrap_or_default();
            format!("{status} {code}")
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn authorize_refuses_what_the_protocol_refuses() {
    let table: &[((&str, &str), &str)] = &[
        (("client_id", "app_other"), "page 400"),
        (("redirect_uri", "http://evil.example:1455/auth/callback"), "page 400"),
        (("redirect_uri", "http://localhost:1455/other"), "page 400"),
        (("redirect_uri", ""), "page 400"),
        (("response_type", "token"), "unsupported_response_type"),
        (("code_challenge_method", "plain"), "invalid_request"),
        (("code_challenge", "short"), "invalid_request"),
        (("scope", "openid profile"), "invalid_scope"),
        (("state", ""), "invalid_request"),
        (("standin_decision", "deny"), "access_denied"),
    ];
    for (change, want) in table {
        let mut s = SignIn::new(ACCESS_LIFETIME);
        let reply =
            call(&mut s, "GET", "/oauth/authorize", &authorize_query(*change), &[], None, 10);
        assert_eq!(error_of(&reply), *want, "{change:?}: {reply:?}");
    }
}

fn exchange(code: &str, change: (&str, &str)) -> Vec<(String, String)> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("client_id", CLIENT_ID),
        ("code", code),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    form.retain(|(n, _)| *n != change.0);
    form.push(change);
    pairs(&form)
}

#[test]
fn the_code_exchange_checks_every_binding() {
    let table: &[((&str, &str), u64, &str)] = &[
        (("code_verifier", VERIFIER), 10, "200 "),
        (
            ("code_verifier", "wrong-verifier-wrong-verifier-wrong-verifier-x"),
            10,
            "400 invalid_grant",
        ),
        (("code_verifier", "short"), 10, "400 invalid_request"),
        (("redirect_uri", "http://localhost:1456/auth/callback"), 10, "400 invalid_grant"),
        (("client_id", "app_other"), 10, "401 invalid_client"),
        (("code_verifier", VERIFIER), 10 + CODE_LIFETIME + 1, "400 invalid_grant"),
        (("grant_type", "password"), 10, "400 unsupported_grant_type"),
    ];
    for (change, at, want) in table {
        let mut s = SignIn::new(ACCESS_LIFETIME);
        let code = code_of(&call(
            &mut s,
            "GET",
            "/oauth/authorize",
            &authorize_query(("", "")),
            &[],
            None,
            10,
        ));
        let reply = call(&mut s, "POST", "/oauth/token", &[], &exchange(&code, *change), None, *at);
        assert_eq!(error_of(&reply), *want, "{change:?} at {at}: {reply:?}");
    }
}

#[test]
fn codes_are_single_use_and_refresh_rotates() {
    let mut s = SignIn::new(100);
    let code = code_of(&call(
        &mut s,
        "GET",
        "/oauth/authorize",
        &authorize_query(("", "")),
        &[],
        None,
        10,
    ));
    let form = exchange(&code, ("code_verifier", VERIFIER));
    let Reply::Json(200, grant) = call(&mut s, "POST", "/oauth/token", &[], &form, None, 11) else {
        panic!("the first exchange passes")
    };
    assert_eq!(
        error_of(&call(&mut s, "POST", "/oauth/token", &[], &form, None, 12)),
        "400 invalid_grant"
    );
    assert_eq!(
        teneral_core::chatgpt::account_of(grant["id_token"].as_str().expect("id")).as_deref(),
        Some(ACCOUNT)
    );
    let access = format!("Bearer {}", grant["access_token"].as_str().expect("access"));
    let model = |s: &mut SignIn, auth: &str, at: u64| {
        error_of(&call(s, "POST", PLAN_RESPONSES, &[], &[], Some(auth), at))
    };
    assert_eq!(model(&mut s, &access, 50), "Model");
    assert_eq!(model(&mut s, &access, 111), "401 token_expired");
    assert_eq!(model(&mut s, "Bearer made-up", 50), "401 invalid_api_key");
    let chat =
        call(&mut s, "POST", "/backend-api/codex/chat/completions", &[], &[], Some(&access), 50);
    assert_eq!(error_of(&chat), "404 ");
    let chat = call(&mut s, "POST", "/backend-api/codex/chat/completions", &[], &[], None, 50);
    assert_eq!(error_of(&chat), "401 invalid_api_key", "the token is checked first");
    let wrong_account = s.route(
        "POST",
        PLAN_RESPONSES,
        &[],
        &[],
        Some(&access),
        Some("acc-x"),
        50,
        &mut Counter(0),
    );
    assert_eq!(error_of(&wrong_account.expect("routed")), "403 account_mismatch");

    let refresh = |token: &str| {
        pairs(&[
            ("grant_type", "refresh_token"),
            ("client_id", CLIENT_ID),
            ("refresh_token", token),
        ])
    };
    let first = grant["refresh_token"].as_str().expect("refresh").to_owned();
    let Reply::Json(200, renewed) =
        call(&mut s, "POST", "/oauth/token", &[], &refresh(&first), None, 120)
    else {
        panic!("the refresh passes")
    };
    let second = renewed["refresh_token"].as_str().expect("rotated").to_owned();
    assert_ne!(first, second, "the refresh token rotates");
    assert_ne!(renewed["access_token"], grant["access_token"]);
    assert_eq!(
        error_of(&call(&mut s, "POST", "/oauth/token", &[], &refresh(&first), None, 121)),
        "401 refresh_token_reused"
    );
    let renewed_access = format!("Bearer {}", renewed["access_token"].as_str().expect("access"));
    assert_eq!(model(&mut s, &renewed_access, 121), "Model");
    call(&mut s, "POST", "/standin/expire", &[], &[], None, 122);
    assert_eq!(model(&mut s, &renewed_access, 122), "401 token_expired");
    call(&mut s, "POST", "/standin/revoke", &[], &[], None, 123);
    assert_eq!(
        error_of(&call(&mut s, "POST", "/oauth/token", &[], &refresh(&second), None, 124)),
        "401 refresh_token_invalidated"
    );
}

#[test]
fn the_plan_takes_streamed_unstored_requests_only() {
    let table: &[(&str, Result<&str, &str>)] = &[
        (
            r#"{"model":"m","stream":true,"store":false}"#,
            Ok(r#"{"model":"m","stream":true,"store":false}"#),
        ),
        (r#"{"model":"m","store":false}"#, Err("Stream must be set to true")),
        (r#"{"model":"m","stream":false,"store":false}"#, Err("Stream must be set to true")),
        (r#"{"model":"m","stream":true}"#, Err("Store must be set to false")),
        (r#"{"model":"m","stream":true,"store":true}"#, Err("Store must be set to false")),
        ("[]", Err("The request body must be a JSON object")),
    ];
    for (body, want) in table {
        let got = plan_body(body.as_bytes());
        let got = match &got {
            Ok(bytes) => Ok(std::str::from_utf8(bytes).expect("text")),
            Err((400, detail)) => Err(detail["detail"].as_str().expect("a detail")),
            Err(other) => panic!("{other:?}"),
        };
        assert_eq!(got, *want, "{body}");
    }
    let events = crate::standin::stream::responses(&json!({"id": "resp_1"})).concat();
    let whole = teneral_core::chatgpt::whole_response(&events).expect("completed");
    assert_eq!(whole["id"], "resp_1");
}
