use super::*;

#[test]
fn callbacks_are_judged_state_first() {
    let table: &[(&str, Callback)] = &[
        ("/auth/callback?code=c1&state=s", Callback::Code("c1".into())),
        ("/auth/callback?code=c1&state=other", Callback::WrongState),
        ("/auth/callback?code=c1", Callback::WrongState),
        ("/auth/callback?error=access_denied&state=other", Callback::WrongState),
        (
            "/auth/callback?error=access_denied&error_description=no%20thanks&state=s",
            Callback::Refused {
                error: "access_denied".into(),
                description: Some("no thanks".into()),
            },
        ),
        ("/auth/callback?state=s", Callback::NoCode),
        ("/auth/callback?code=&state=s", Callback::NoCode),
        ("/favicon.ico", Callback::Elsewhere),
    ];
    for (target, want) in table {
        assert_eq!(judge_callback(target, "s"), *want, "{target}");
    }
}

#[test]
fn the_address_carries_every_parameter() {
    let url = authorize_url(
        "https://auth.openai.com/",
        "http://localhost:1455/auth/callback",
        "ch",
        "st",
    );
    assert!(url.starts_with("https://auth.openai.com/oauth/authorize?"), "{url}");
    let parsed = reqwest::Url::parse(&url).expect("an address");
    let get = |n: &str| parsed.query_pairs().find(|(k, _)| k == n).map(|(_, v)| v.into_owned());
    assert_eq!(get("redirect_uri").as_deref(), Some("http://localhost:1455/auth/callback"));
    assert_eq!(get("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(get("scope").as_deref(), Some(chatgpt::SCOPES));
    assert_eq!(get("client_id").as_deref(), Some(chatgpt::CLIENT_ID));
    assert!(!url.contains(' '), "one unbroken line: {url}");
}

#[test]
fn ports_and_token_errors() {
    assert_eq!(port_from(None).ok(), Some(1455));
    assert_eq!(port_from(Some("1457")).ok(), Some(1457));
    assert!(matches!(port_from(Some("80")), Err(SignInError::BadPort(_))));
    assert!(matches!(port_from(Some("x")), Err(SignInError::BadPort(_))));
    let table: &[(&str, &str)] = &[
        (
            r#"{"error":"invalid_grant","error_description":"the code expired"}"#,
            "invalid_grant: the code expired",
        ),
        (
            r#"{"error":{"message":"Used.","code":"refresh_token_reused"}}"#,
            "refresh_token_reused: Used.",
        ),
        ("plain words", "plain words"),
    ];
    for (body, want) in table {
        assert_eq!(token_error(body), *want);
    }
}
