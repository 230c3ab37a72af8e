//! The ChatGPT sign-in as the kernel, `teneralctl setup` and the stand-in
//! share it: the constants of OpenAI's "Sign in with ChatGPT" flow for local
//! apps (docs/chatgpt.md says where each comes from and what could not be
//! verified), PKCE S256, the claims of an id token, and the token file
//! `.teneral/auth/chatgpt.json`.
//!
//! Invariants: the token file is written atomically with mode 0600 in a
//! directory of mode 0700, and never holds anything but the tokens, their
//! account, their expiry and the issuer they came from; [`challenge`],
//! [`claims`] and [`account_of`] are pure. Tokens are never printed: the
//! `Debug` of [`Tokens`] hides them.
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// OpenAI's sign-in server.
pub const ISSUER: &str = "https://auth.openai.com";
/// The client id the open-source Codex CLI signs in with (a public client:
/// no secret).
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The scopes asked for; `offline_access` brings the refresh token.
pub const SCOPES: &str = "openid profile email offline_access";
/// The callback port the client id is registered with.
pub const CALLBACK_PORT: u16 = 1455;
/// The callback's path.
pub const CALLBACK_PATH: &str = "/auth/callback";
/// The plan's model endpoint (Responses API under it: `/responses`).
pub const BACKEND_URL: &str = "https://chatgpt.com/backend-api/codex";
/// The header naming the account (workspace) a request is for.
pub const ACCOUNT_HEADER: &str = "chatgpt-account-id";
/// The claim namespace of OpenAI's id tokens that holds the account.
pub const AUTH_CLAIM: &str = "https://api.openai.com/auth";
/// Where the tokens live, under the individual's directory.
pub const TOKENS_PATH: &str = ".teneral/auth/chatgpt.json";
/// Renew an access token this many seconds before it expires.
pub const RENEW_BEFORE_SECS: u64 = 300;
/// Where an owner reviews or limits what the plan is used for.
pub const USAGE_PAGE: &str = "https://chatgpt.com/#settings/Usage";

/// The redirect URI for a callback on `port` (as the real clients write
/// it: `localhost`, the listener itself binds 127.0.0.1).
pub fn redirect_uri(port: u16) -> String {
    format!("http://localhost:{port}{CALLBACK_PATH}")
}

/// The S256 code challenge of a PKCE verifier: base64url (no padding) of
/// its SHA-256.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `bytes` in base64url without padding (a verifier or state from random
/// bytes).
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The claims (the middle part) of a JWT, unverified: the client reads
/// them, it does not check a signature it has no key for.
pub fn claims(jwt: &str) -> Option<Value> {
    let mut parts = jwt.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The ChatGPT account id an id token was issued for.
pub fn account_of(id_token: &str) -> Option<String> {
    let claims = claims(id_token)?;
    let id = claims.get(AUTH_CLAIM)?.get("chatgpt_account_id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// The `exp` claim of a JWT (Unix seconds), when it has one.
pub fn expiry_of(jwt: &str) -> Option<u64> {
    claims(jwt)?.get("exp")?.as_u64()
}

/// A Responses request as the plan takes it: streamed and not stored
/// (the plan refuses anything else). Returns the new body and whether the
/// caller asked for a whole answer (no `stream: true` of its own).
pub fn as_streamed(body: &[u8]) -> Option<(Vec<u8>, bool)> {
    let mut json: Value = serde_json::from_slice(body).ok()?;
    let object = json.as_object_mut()?;
    let whole = object.get("stream") != Some(&Value::Bool(true));
    object.insert("stream".into(), Value::Bool(true));
    object.insert("store".into(), Value::Bool(false));
    Some((serde_json::to_vec(&json).ok()?, whole))
}

/// The whole response of a streamed Responses answer (server-sent events):
/// the `response` of its `response.completed` event, or why there is none
/// (`response.failed`, `response.incomplete`, `error`, or no end).
pub fn whole_response(events: &str) -> Result<Value, String> {
    let events = events.replace("\r\n", "\n");
    for block in events.split("\n\n") {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let Ok(event) = serde_json::from_str::<Value>(&data.join("\n")) else { continue };
        let said = |v: &Value| v["message"].as_str().map(str::to_owned);
        match event["type"].as_str() {
            Some("response.completed") => return Ok(event["response"].clone()),
            Some("response.failed" | "response.incomplete") => {
                let response = &event["response"];
                return Err(said(&response["error"])
                    .or_else(|| {
                        response["incomplete_details"]["reason"].as_str().map(str::to_owned)
                    })
                    .unwrap_or_else(|| "the response failed".to_owned()));
            }
            Some("error") => return Err(said(&event).unwrap_or_else(|| event.to_string())),
            _ => {}
        }
    }
    Err("the stream ended before response.completed".to_owned())
}

/// What `.teneral/auth/chatgpt.json` holds.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The sign-in server the tokens came from (renewal goes there).
    pub issuer: String,
    pub id_token: String,
    pub access_token: String,
    pub refresh_token: String,
    pub account_id: String,
    /// When the access token expires, Unix seconds.
    pub expires_at: u64,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("issuer", &self.issuer)
            .field("account_id", &self.account_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A token endpoint's answer (RFC 6749, section 5.1, with OpenID's id token).
#[derive(Debug, Clone, Deserialize)]
pub struct Granted {
    pub access_token: String,
    #[serde(default)]
    pub id_token: Option<String>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_in: Option<u64>,
}

/// Why a grant cannot become [`Tokens`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantError {
    #[error("the sign-in server sent no {0}")]
    Missing(&'static str),
    #[error("the id token names no ChatGPT account (no {AUTH_CLAIM} chatgpt_account_id claim)")]
    NoAccount,
}

impl Tokens {
    /// The tokens of a first grant (authorization code), received at `now`.
    pub fn from_grant(issuer: &str, granted: Granted, now: u64) -> Result<Tokens, GrantError> {
        let id_token = granted.id_token.ok_or(GrantError::Missing("id_token"))?;
        let refresh_token = granted.refresh_token.ok_or(GrantError::Missing("refresh_token"))?;
        let account_id = account_of(&id_token).ok_or(GrantError::NoAccount)?;
        let expires_at = expires_at(&granted.access_token, granted.expires_in, now);
        Ok(Tokens {
            issuer: issuer.trim_end_matches('/').to_owned(),
            id_token,
            access_token: granted.access_token,
            refresh_token,
            account_id,
            expires_at,
        })
    }

    /// The tokens after a renewal at `now`: what the grant rotated replaces
    /// what was, the rest is kept.
    pub fn renewed(&self, granted: Granted, now: u64) -> Tokens {
        let expires_at = expires_at(&granted.access_token, granted.expires_in, now);
        let id_token = granted.id_token.unwrap_or_else(|| self.id_token.clone());
        Tokens {
            issuer: self.issuer.clone(),
            account_id: account_of(&id_token).unwrap_or_else(|| self.account_id.clone()),
            id_token,
            access_token: granted.access_token,
            refresh_token: granted.refresh_token.unwrap_or_else(|| self.refresh_token.clone()),
            expires_at,
        }
    }

    /// Whether the access token should be renewed at `now`.
    pub fn due(&self, now: u64) -> bool {
        now + RENEW_BEFORE_SECS >= self.expires_at
    }
}

/// `expires_in` when given, else the token's own `exp`, else an hour.
fn expires_at(access_token: &str, expires_in: Option<u64>, now: u64) -> u64 {
    match expires_in {
        Some(secs) => now + secs,
        None => expiry_of(access_token).unwrap_or(now + 3600),
    }
}

/// The token file under `home`.
pub fn tokens_path(home: &Path) -> PathBuf {
    home.join(TOKENS_PATH)
}

/// Why the token file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    #[error("cannot read {}: {source}; sign in with `teneralctl setup`", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not a ChatGPT token file ({source}); sign in again with `teneralctl setup`", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
}

/// Reads the token file.
pub fn read(path: &Path) -> Result<Tokens, TokensError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| TokensError::Read { path: path.to_owned(), source })?;
    serde_json::from_str(&text)
        .map_err(|source| TokensError::Parse { path: path.to_owned(), source })
}

/// Writes the token file atomically: its directory made 0700 when missing,
/// a new 0600 file beside it synced, renamed over it, the directory synced.
pub fn write(path: &Path, tokens: &Tokens) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let bytes = serde_json::to_vec_pretty(tokens).map_err(std::io::Error::other)?;
    let tmp = crate::fsutil::temp_path(&dir.join("chatgpt.json"));
    let result = (|| {
        let _ = std::fs::remove_file(&tmp);
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        crate::fsutil::sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn jwt(claims: &Value) -> String {
        format!("{}.{}.sig", b64url(b"{\"alg\":\"none\"}"), b64url(claims.to_string().as_bytes()))
    }

    #[test]
    fn rfc7636_appendix_b_challenge() {
        // The example of RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn account_from_claims_table() {
        let good = jwt(&serde_json::json!({AUTH_CLAIM: {"chatgpt_account_id": "acc-1"}, "exp": 9}));
        let table: &[(&str, Option<&str>)] = &[
            (&good, Some("acc-1")),
            ("not a jwt", None),
            ("a.b", None),
            ("a.!!!.c", None),
            (&jwt(&serde_json::json!({"sub": "x"})), None),
            (&jwt(&serde_json::json!({AUTH_CLAIM: {"chatgpt_account_id": ""}})), None),
        ];
        for (token, want) in table {
            assert_eq!(account_of(token).as_deref(), *want, "{token}");
        }
        assert_eq!(expiry_of(&good), Some(9));
    }

    #[test]
    fn grants_become_tokens_and_renewals_rotate() {
        let id = jwt(&serde_json::json!({AUTH_CLAIM: {"chatgpt_account_id": "acc-1"}}));
        let granted = Granted {
            access_token: "a1".into(),
            id_token: Some(id.clone()),
            refresh_token: Some("r1".into()),
            expires_in: Some(3600),
        };
        let tokens = Tokens::from_grant("http://x/", granted.clone(), 100).expect("a full grant");
        assert_eq!((tokens.issuer.as_str(), tokens.expires_at), ("http://x", 3700));
        assert!(!tokens.due(100) && tokens.due(3400));
        let no_refresh = Granted { refresh_token: None, ..granted.clone() };
        assert_eq!(
            Tokens::from_grant("i", no_refresh, 0),
            Err(GrantError::Missing("refresh_token"))
        );
        let renewed = tokens.renewed(
            Granted {
                access_token: "a2".into(),
                id_token: None,
                refresh_token: Some("r2".into()),
                expires_in: None,
            },
            200,
        );
        assert_eq!((renewed.access_token.as_str(), renewed.refresh_token.as_str()), ("a2", "r2"));
        assert_eq!((renewed.account_id.as_str(), renewed.expires_at), ("acc-1", 3800));
        assert!(!format!("{renewed:?}").contains("a2"), "Debug hides the tokens");
    }

    #[test]
    fn streamed_requests_and_whole_answers() {
        let (body, whole) = as_streamed(br#"{"model":"m","store":true}"#).expect("an object");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            (body["stream"].clone(), body["store"].clone(), whole),
            (true.into(), false.into(), true)
        );
        assert_eq!(as_streamed(br#"{"stream":true}"#).map(|(_, w)| w), Some(false));
        assert!(as_streamed(b"[1]").is_none());
        let completed = "event: response.created\r\ndata: {\"type\":\"response.created\"}\r\n\r\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\"}}\n\n";
        let table: &[(&str, Result<&str, &str>)] = &[
            (completed, Ok("r1")),
            ("data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"message\":\"boom\"}}}\n\n", Err("boom")),
            ("data: {\"type\":\"error\",\"message\":\"limit\"}\n\n", Err("limit")),
            ("data: {\"type\":\"response.created\"}\n\n", Err("the stream ended before response.completed")),
        ];
        for (events, want) in table {
            let got = whole_response(events);
            let got =
                got.as_ref().map(|v| v["id"].as_str().unwrap_or_default()).map_err(String::as_str);
            assert_eq!(got, *want, "{events}");
        }
    }

    #[test]
    fn the_file_is_0600_in_a_0700_directory() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = tokens_path(dir.path());
        let tokens = Tokens {
            issuer: "i".into(),
            id_token: "x".into(),
            access_token: "a".into(),
            refresh_token: "r".into(),
            account_id: "acc".into(),
            expires_at: 1,
        };
        write(&path, &tokens).expect("written");
        let mode = |p: &Path| std::fs::metadata(p).expect("there").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("auth/")), 0o700);
        assert_eq!(read(&path).expect("read back"), tokens);
    }
}
