//! `GET /v1/models` and `GET /v1/models/<id>`, as OpenAI answers them:
//! clients and proxies list the models before they talk, and `teneralctl
//! setup` offers the list.
//!
//! The stand-in answers any model name on its other endpoints; the one it
//! lists is `standin`, the name the kernel uses when `.env` names none.
//! Invariant: pure; the key is checked by the caller first, as on every
//! other endpoint.
use serde_json::{json, Value};

use super::wire::ApiError;

pub const MODELS_PATH: &str = "/v1/models";

/// The models listed, by id.
pub const LISTED: &[&str] = &["standin"];

/// When the listed models were "created" (Unix seconds), fixed so answers
/// do not change from run to run.
const CREATED: u64 = 1_767_225_600;

/// The answer to `GET path` when `path` is the list or one model under it;
/// `None` when the path is not the models endpoint's.
pub fn answer(path: &str) -> Option<Result<Value, ApiError>> {
    if path == MODELS_PATH || path == "/v1/models/" {
        let data: Vec<Value> = LISTED.iter().map(|id| model(id)).collect();
        return Some(Ok(json!({"object": "list", "data": data})));
    }
    let id = path.strip_prefix("/v1/models/")?;
    Some(match LISTED.iter().find(|listed| **listed == id) {
        Some(listed) => Ok(model(listed)),
        None => Err(ApiError::other(
            404,
            "invalid_request_error",
            format!("The model '{id}' does not exist or you do not have access to it."),
            Some("model_not_found"),
        )),
    })
}

fn model(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": CREATED, "owned_by": "teneral"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_one_and_unknown() {
        let table: &[(&str, Option<u16>)] = &[
            ("/v1/models", Some(200)),
            ("/v1/models/", Some(200)),
            ("/v1/models/standin", Some(200)),
            ("/v1/models/gpt-5", Some(404)),
            ("/v1/modelsx", None),
            ("/v1/chat/completions", None),
        ];
        for (path, status) in table {
            let got = answer(path).map(|r| r.map_or_else(|e| e.status, |_| 200));
            assert_eq!(got, *status, "{path}");
        }
        let Some(Ok(list)) = answer("/v1/models") else { unreachable!("the list answers") };
        assert_eq!(list["object"], "list");
        assert_eq!(list["data"][0]["id"], "standin");
        assert_eq!(list["data"][0]["object"], "model");
        let Some(Err(e)) = answer("/v1/models/gpt-5") else { unreachable!("unknown is refused") };
        assert_eq!(e.code.as_deref(), Some("model_not_found"));
        assert!(e.message.contains("'gpt-5' does not exist"), "{}", e.message);
    }
}
