//! The stand-in for the "Sign in with ChatGPT" server and the plan's model
//! endpoint, as strict as the protocol reads (docs/chatgpt.md):
//!
//! - `GET /oauth/authorize`: the test is the browser. A valid request is
//!   answered `302` to the redirect URI with a code and the state; with
//!   `standin_decision=deny` (the owner clicked "Cancel") with
//!   `error=access_denied`. An unknown client or a redirect URI that is not a
//!   loopback `/auth/callback` is a `400` page and no redirect (RFC 6749,
//!   4.1.2.1); other faults are redirected as `error=...`.
//! - `POST /oauth/token`, form or JSON: `authorization_code` (code known,
//!   unused, under [`CODE_LIFETIME`] seconds old, same client and exactly the
//!   same redirect URI, PKCE S256 verifier matching) and `refresh_token`
//!   (current token only: each renewal rotates both tokens; an old one is
//!   refused `refresh_token_reused`, any after [`SignIn::revoke`]
//!   `refresh_token_invalidated`, both `401`).
//! - `POST /backend-api/codex/responses` and `GET /backend-api/codex/models`:
//!   a live access token and the `chatgpt-account-id` of its account, else
//!   `401` (`token_expired` once it expired); a Responses request must be
//!   streamed and not stored ([`plan_body`]) and is answered as the
//!   Responses API streams ([`super::stream::responses`]).
//!   Any other path under `/backend-api/` is a `404` once the token passed
//!   (a chat completions request included: the plan speaks Responses only).
//! - `POST /standin/expire` and `POST /standin/revoke`: for tests, expire
//!   every access token now, or end the sign-in.
//!
//! Invariant: pure (time is passed in, randomness comes from the caller's
//! [`Fresh`]); the HTTP side is in [`super::http`].
use std::collections::HashMap;

use serde_json::{json, Value};
use teneral_core::chatgpt::{b64url, challenge, AUTH_CLAIM, CALLBACK_PATH, CLIENT_ID};

use super::wire::ApiError;

/// How long a code may wait for its exchange, in seconds.
pub const CODE_LIFETIME: u64 = 60;
/// An access token's lifetime unless the stand-in was told another.
pub const ACCESS_LIFETIME: u64 = 3600;
/// The account every sign-in of the stand-in is for.
pub const ACCOUNT: &str = "acc-standin-0001";
/// The plan's model endpoint's paths.
pub const PLAN_RESPONSES: &str = "/backend-api/codex/responses";
pub const PLAN_MODELS: &str = "/backend-api/codex/models";

/// Unguessable strings for codes and tokens.
pub trait Fresh {
    fn fresh(&mut self) -> String;
}

/// What a request to the sign-in side is answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `302` to this address.
    Redirect(String),
    /// A page of text with this status (the browser shows it).
    Page(u16, String),
    /// JSON with this status.
    Json(u16, Value),
    /// The access check passed: answer as the Responses API does.
    Model,
    /// The access check passed: list the models.
    Models,
}

struct Code {
    challenge: String,
    redirect_uri: String,
    issued: u64,
    used: bool,
}

/// The sign-in server's state.
pub struct SignIn {
    lifetime: u64,
    codes: HashMap<String, Code>,
    /// Access tokens and when each expires.
    access: HashMap<String, u64>,
    /// Refresh tokens and whether each is still the current one.
    refresh: HashMap<String, bool>,
    revoked: bool,
}

impl SignIn {
    /// A server whose access tokens live `lifetime` seconds.
    pub fn new(lifetime: u64) -> SignIn {
        SignIn {
            lifetime,
            codes: HashMap::new(),
            access: HashMap::new(),
            refresh: HashMap::new(),
            revoked: false,
        }
    }

    /// Expires every access token issued so far.
    pub fn expire(&mut self) {
        self.access.values_mut().for_each(|expiry| *expiry = 0);
    }

    /// Ends the sign-in: every refresh token is refused from now on.
    pub fn revoke(&mut self) {
        self.revoked = true;
    }

    /// Answers `method path` when it is the sign-in side's; `None` otherwise.
    /// `query` and `body` are already split; `content_type` says how the body
    /// is written; `authorization` and `account` are the request's headers.
    #[allow(clippy::too_many_arguments)]
    pub fn route(
        &mut self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: &[(String, String)],
        authorization: Option<&str>,
        account: Option<&str>,
        now: u64,
        fresh: &mut dyn Fresh,
    ) -> Option<Reply> {
        Some(match (method, path) {
            ("GET", "/oauth/authorize") => self.authorize(query, now, fresh),
            ("POST", "/oauth/token") => self.token(body, now, fresh),
            ("POST", PLAN_RESPONSES) | ("GET", PLAN_MODELS) => {
                match self.check(authorization, account, now) {
                    Err(e) => Reply::Json(e.status, e.body()),
                    Ok(()) if method == "GET" => Reply::Models,
                    Ok(()) => Reply::Model,
                }
            }
            // Past a valid token, any other path of the plan is unknown.
            (_, plan) if plan.starts_with("/backend-api/") => {
                let error = match self.check(authorization, account, now) {
                    Err(e) => e,
                    Ok(()) => ApiError::other(
                        404,
                        "invalid_request_error",
                        format!(
                            "Unknown plan endpoint {method} {path}: the plan serves \
                             POST {PLAN_RESPONSES} and GET {PLAN_MODELS}"
                        ),
                        None,
                    ),
                };
                Reply::Json(error.status, error.body())
            }
            ("POST", "/standin/expire") => {
                self.expire();
                Reply::Json(200, json!({"expired": true}))
            }
            ("POST", "/standin/revoke") => {
                self.revoke();
                Reply::Json(200, json!({"revoked": true}))
            }
            _ => return None,
        })
    }

    fn authorize(&mut self, query: &[(String, String)], now: u64, fresh: &mut dyn Fresh) -> Reply {
        let get = |name: &str| query.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        if get("client_id") != Some(CLIENT_ID) {
            return Reply::Page(
                400,
                format!(
                    "Unknown client_id {:?}: this sign-in server knows only {CLIENT_ID}.",
                    get("client_id").unwrap_or("")
                ),
            );
        }
        let Some(redirect) = get("redirect_uri").filter(|r| loopback_callback(r)) else {
            return Reply::Page(
                400,
                format!("redirect_uri {:?} is not registered: use http://localhost:PORT{CALLBACK_PATH}.", get("redirect_uri").unwrap_or("")),
            );
        };
        let state = get("state").unwrap_or("");
        let refuse = |error: &str, description: &str| {
            Reply::Redirect(with_query(
                redirect,
                &[("error", error), ("error_description", description), ("state", state)],
            ))
        };
        if get("response_type") != Some("code") {
            return refuse("unsupported_response_type", "response_type must be code");
        }
        if get("code_challenge_method") != Some("S256") {
            return refuse("invalid_request", "code_challenge_method must be S256");
        }
        let Some(code_challenge) = get("code_challenge").filter(|c| c.len() == 43 && is_b64url(c))
        else {
            return refuse(
                "invalid_request",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
            );
        };
        let scopes: Vec<&str> = get("scope").unwrap_or("").split(' ').collect();
        if !scopes.contains(&"openid") || !scopes.contains(&"offline_access") {
            return refuse("invalid_scope", "scope must include openid and offline_access");
        }
        if state.is_empty() {
            return refuse("invalid_request", "state is required");
        }
        if get("standin_decision") == Some("deny") {
            return refuse("access_denied", "The owner declined the sign-in.");
        }
        let code = format!("code-{}", fresh.fresh());
        let entry = Code {
            challenge: code_challenge.to_owned(),
            redirect_uri: redirect.to_owned(),
            issued: now,
            used: false,
        };
        self.codes.insert(code.clone(), entry);
        Reply::Redirect(with_query(redirect, &[("code", &code), ("state", state)]))
    }

    fn token(&mut self, form: &[(String, String)], now: u64, fresh: &mut dyn Fresh) -> Reply {
        let get = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        if get("client_id") != Some(CLIENT_ID) {
            return oauth_error(401, "invalid_client", "client_id is missing or unknown");
        }
        match get("grant_type") {
            Some("authorization_code") => {
                let Some(code) = get("code").and_then(|c| self.codes.get_mut(c)) else {
                    return oauth_error(400, "invalid_grant", "the code is unknown");
                };
                if code.used {
                    return oauth_error(400, "invalid_grant", "the code was already used");
                }
                code.used = true;
                if now > code.issued + CODE_LIFETIME {
                    return oauth_error(400, "invalid_grant", "the code expired");
                }
                if get("redirect_uri") != Some(code.redirect_uri.as_str()) {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "redirect_uri differs from the authorization request's",
                    );
                }
                let verifier = get("code_verifier").unwrap_or("");
                if !(43..=128).contains(&verifier.len()) || !verifier.chars().all(unreserved) {
                    return oauth_error(
                        400,
                        "invalid_request",
                        "code_verifier must be 43 to 128 unreserved characters",
                    );
                }
                if challenge(verifier) != code.challenge {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "the code_verifier does not match the code_challenge",
                    );
                }
                self.grant(now, fresh)
            }
            Some("refresh_token") => {
                let given = get("refresh_token").unwrap_or("");
                let refused = |code: &str, message: &str| {
                    Reply::Json(
                        401,
                        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}}),
                    )
                };
                match self.refresh.get(given).copied() {
                    None => refused("refresh_token_invalidated", "Your refresh token is not known. Please sign in again."),
                    Some(_) if self.revoked => refused("refresh_token_invalidated", "Your refresh token has been invalidated. Please sign in again."),
                    Some(false) => refused("refresh_token_reused", "Your refresh token has already been used to generate a new access token. Please sign in again."),
                    Some(true) => {
                        self.refresh.insert(given.to_owned(), false);
                        self.grant(now, fresh)
                    }
                }
            }
            _ => oauth_error(
                400,
                "unsupported_grant_type",
                "grant_type must be authorization_code or refresh_token",
            ),
        }
    }

    fn grant(&mut self, now: u64, fresh: &mut dyn Fresh) -> Reply {
        let auth = json!({"chatgpt_account_id": ACCOUNT, "chatgpt_plan_type": "plus", "chatgpt_user_id": "user-standin"});
        let expires = now + self.lifetime;
        let access = jwt(
            &json!({"aud": ["https://api.openai.com/v1"], "exp": expires, "iat": now, "jti": fresh.fresh(), AUTH_CLAIM: auth}),
        );
        let id = jwt(
            &json!({"aud": [CLIENT_ID], "email": "owner@example.com", "exp": now + 3600, "iat": now, "sub": "user-standin", AUTH_CLAIM: auth}),
        );
        let refresh = format!("rt-{}", fresh.fresh());
        self.access.insert(access.clone(), expires);
        self.refresh.insert(refresh.clone(), true);
        Reply::Json(
            200,
            json!({
                "access_token": access, "id_token": id, "refresh_token": refresh,
                "token_type": "Bearer", "expires_in": self.lifetime, "scope": "openid profile email offline_access",
            }),
        )
    }

    fn check(
        &self,
        authorization: Option<&str>,
        account: Option<&str>,
        now: u64,
    ) -> Result<(), ApiError> {
        let token = authorization.and_then(|h| h.strip_prefix("Bearer ")).unwrap_or("");
        let unauthorized = |message: &str, code: &str| {
            ApiError::other(401, "invalid_request_error", message.to_owned(), Some(code))
        };
        match self.access.get(token) {
            None => Err(unauthorized(
                "Could not validate your credentials: sign in with ChatGPT.",
                "invalid_api_key",
            )),
            Some(expiry) if now >= *expiry => Err(unauthorized(
                "Provided authentication token is expired. Please try signing in again.",
                "token_expired",
            )),
            Some(_) if account != Some(ACCOUNT) => Err(ApiError::other(
                403,
                "invalid_request_error",
                format!(
                    "The chatgpt-account-id header must name the account of the token ({ACCOUNT})."
                ),
                Some("account_mismatch"),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// A request to the plan's Responses endpoint, checked as the plan checks
/// it (`stream: true` and `store: false`, else a 400 with the plan's
/// `detail`), returned as it is for the stand-in's own Responses answer,
/// which streams it.
pub fn plan_body(body: &[u8]) -> Result<Vec<u8>, (u16, Value)> {
    let refuse = |detail: &str| (400, json!({"detail": detail}));
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
        return Err(refuse("The request body must be a JSON object"));
    };
    if object.get("stream") != Some(&Value::Bool(true)) {
        return Err(refuse("Stream must be set to true"));
    }
    if object.get("store") != Some(&Value::Bool(false)) {
        return Err(refuse("Store must be set to false"));
    }
    serde_json::to_vec(&object).map_err(|e| refuse(&e.to_string()))
}

/// A loopback `http://localhost:PORT/auth/callback` (or 127.0.0.1).
fn loopback_callback(uri: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(uri) else { return false };
    url.scheme() == "http"
        && matches!(url.host_str(), Some("localhost" | "127.0.0.1"))
        && url.port().is_some()
        && url.path() == CALLBACK_PATH
        && url.query().is_none()
}

fn with_query(base: &str, pairs: &[(&str, &str)]) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()));
            url.to_string()
        }
        Err(_) => base.to_owned(),
    }
}

fn oauth_error(status: u16, error: &str, description: &str) -> Reply {
    Reply::Json(status, json!({"error": error, "error_description": description}))
}

fn is_b64url(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn unreserved(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~".contains(c)
}

/// A JWT-shaped token (signed by nobody: clients read, never verify, it).
fn jwt(claims: &Value) -> String {
    let header = b64url(br#"{"alg":"none","typ":"JWT"}"#);
    format!("{header}.{}.{}", b64url(claims.to_string().as_bytes()), b64url(b"standin"))
}

#[cfg(test)]
mod tests;
