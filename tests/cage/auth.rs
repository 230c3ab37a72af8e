//! The ChatGPT sign-in's tokens stay with the kernel: a hostile generation
//! whose model is a ChatGPT plan (the sign-in stand-in of `teneral
//! standin`, reached through the kernel's proxy with the tokens of
//! `.teneral/auth/chatgpt.json`) reaches its model, yet finds the token file,
//! its directory, `.env` and the kernel's environment and memory closed, by
//! errno, and the tokens nowhere it can read.
use teneral_core::chatgpt::{self, Granted, Tokens};

use super::*;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

/// Signs in at the stand-in's `issuer` as the browser and `teneralctl
/// setup` would.
fn sign_in(issuer: &str) -> Result<Tokens, Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        let redirect = chatgpt::redirect_uri(chatgpt::CALLBACK_PORT);
        let challenge = chatgpt::challenge(VERIFIER);
        let authorize = reqwest::Url::parse_with_params(
            &format!("{issuer}/oauth/authorize"),
            [
                ("response_type", "code"),
                ("client_id", chatgpt::CLIENT_ID),
                ("redirect_uri", redirect.as_str()),
                ("scope", chatgpt::SCOPES),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("state", "cage"),
            ],
        )?;
        let answer = client.get(authorize).send().await?;
        let location = answer.headers().get("location").ok_or("no redirect")?.to_str()?;
        let location = reqwest::Url::parse(location)?;
        let code = location
            .query_pairs()
            .find(|(n, _)| n == "code")
            .map(|(_, v)| v.into_owned())
            .ok_or("no code")?;
        let form = [
            ("grant_type", "authorization_code"),
            ("client_id", chatgpt::CLIENT_ID),
            ("code", code.as_str()),
            ("redirect_uri", redirect.as_str()),
            ("code_verifier", VERIFIER),
        ];
        let text =
            client.post(format!("{issuer}/oauth/token")).form(&form).send().await?.text().await?;
        let granted: Granted = serde_json::from_str(&text)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        Ok(Tokens::from_grant(issuer, granted, now)?)
    })
}

/// The hostile individual with a commit of its own: generations of one
/// commit running at once in one test process would share a cgroup's name.
fn own_generation(ind: Individual, name: &str) -> Result<Individual, Box<dyn std::error::Error>> {
    std::fs::write(ind.path().join(format!("auth-{name}.txt")), format!("{name}\n"))?;
    commit_all(ind.path(), &format!("the sign-in's test {name}"))?;
    Ok(ind)
}

#[test]
fn the_sign_in_tokens_stay_with_the_kernel() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let upstream_dir = tempfile::tempdir()?;
    let upstream = Upstream::start(upstream_dir.path())?;
    let issuer = upstream.base_url.strip_suffix("/v1").ok_or("a /v1 address")?.to_owned();
    let env = format!(
        "TENERAL_PROVIDER=chatgpt\nTENERAL_BASE_URL={issuer}/backend-api/codex\n\
         TENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=0\nTENERAL_TEST_BACKOFF_MS=50\n\
         TENERAL_TEST_STOP_GRACE_SECONDS=2\n"
    );
    let ind = own_generation(hostile_individual(&env)?, "tokens")?;
    let mut tokens = sign_in(&issuer)?;
    // The access token lives an hour, so this refresh token is never sent;
    // it has the secret's prefix, which the hostile body's scan looks for.
    tokens.refresh_token = format!("{SECRET}-refresh");
    let path = chatgpt::tokens_path(ind.path());
    chatgpt::write(&path, &tokens)?;
    // The body is told where the token file is, and tries to read it.
    std::fs::write(ind.path().join("soul/credentials-path"), path.as_os_str().as_encoded_bytes())?;
    let (kernel, doors) = run_generation(&ind)?;
    use Want::*;
    check(
        &doors,
        &[
            ("cargo.credentials", Errno(ENOENT)),
            ("auth.read", Errno(ENOENT)),
            ("auth.list", Errno(ENOENT)),
            ("env.read", Errno(ENOENT)),
            ("kernel.environ", Errno(EACCES)),
            ("kernel.mem", Errno(EACCES)),
        ],
    )?;
    // The hostile body speaks chat completions, which a plan does not: the
    // plan's 404 comes only past its token check, so the kernel's token and
    // account reached it through the proxy.
    let model = doors["model"]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(model.contains(" 404 ") && model.contains("Unknown plan endpoint"), "{model}");
    let found = doors["secret.search"]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(found.contains(&format!("soul/decoy.txt: {DECOY}")), "the scan works: {found}");
    assert!(!found.contains("sk-cagetest-real"), "a token was found: {found}");
    let journal = std::fs::read_to_string(ind.path().join("memory/journal.jsonl"))?;
    let log = ind.kernel_log();
    for secret in [&tokens.access_token, &tokens.refresh_token, &tokens.id_token] {
        assert!(!journal.contains(secret.as_str()), "a token reached the journal");
        assert!(!log.contains(secret.as_str()), "a token reached the kernel's log");
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path)?.permissions());
    assert_eq!(mode & 0o777, 0o600, "the token file stays the owner's alone");
    drop(kernel);
    Ok(())
}

#[test]
fn a_revoked_sign_in_is_told_in_the_log_and_to_talk() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let upstream_dir = tempfile::tempdir()?;
    let upstream = Upstream::start(upstream_dir.path())?;
    let issuer = upstream.base_url.strip_suffix("/v1").ok_or("a /v1 address")?.to_owned();
    let env = format!(
        "TENERAL_PROVIDER=chatgpt\nTENERAL_BASE_URL={issuer}/backend-api/codex\n\
         TENERAL_MODEL=standin\nTENERAL_HEARTBEAT_MINUTES=0\nTENERAL_TEST_BACKOFF_MS=50\n\
         TENERAL_TEST_STOP_GRACE_SECONDS=2\n"
    );
    let ind = own_generation(hostile_individual(&env)?, "revoked")?;
    let tokens = sign_in(&issuer)?;
    chatgpt::write(&chatgpt::tokens_path(ind.path()), &tokens)?;
    // The owner disconnected the app: the token is refused, its renewal too.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder().no_proxy().build()?;
        client.post(format!("{issuer}/standin/revoke")).send().await?;
        client.post(format!("{issuer}/standin/expire")).send().await?;
        Ok::<_, reqwest::Error>(())
    })?;
    let kernel = ind.start()?;
    let told = ind.wait_for("the notice that the sign-in ended", LONG, |e| {
        e["type"] == "kernel.notice"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("sign in again with `teneralctl setup`"))
    })?;
    assert!(
        told["text"].as_str().unwrap_or_default().contains("refresh_token_invalidated"),
        "{told}"
    );
    let log = ind.kernel_log();
    assert!(log.contains("sign in again with `teneralctl setup`"), "the log says it too: {log}");
    drop(kernel);
    Ok(())
}
