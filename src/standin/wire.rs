//! What both wire protocols share: the OpenAI-style error every refusal
//! carries, and the field checks the validators are built from.
//!
//! Invariants: every refusal is an [`ApiError`] whose `param` names the
//! offending field by its path in the request (`messages[1].tool_calls[0].id`),
//! and optional fields that are JSON `null` count as absent, as they do for
//! the real service.
use super::stream::Asked;
use serde_json::{json, Map, Value};

/// An error answer: HTTP status plus the OpenAI error object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// The error object's `type`.
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl ApiError {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>, param: Option<&str>, code: Option<&str>) -> Self {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error".into(),
            param: param.map(str::to_owned),
            code: code.map(str::to_owned),
        }
    }

    /// A required field is absent.
    pub fn missing(path: &str) -> Self {
        Self::invalid(
            format!("Missing required parameter: '{path}'."),
            Some(path),
            Some("missing_required_parameter"),
        )
    }

    /// A field holds the wrong JSON type.
    pub fn wrong_type(path: &str, expected: &str, got: &Value) -> Self {
        Self::invalid(
            format!(
                "Invalid type for '{path}': expected {expected}, but got {} instead.",
                describe(got)
            ),
            Some(path),
            Some("invalid_type"),
        )
    }

    /// A field holds a value outside its allowed set.
    pub fn bad_value(path: &str, value: &str, supported: &[&str]) -> Self {
        Self::invalid(
            format!("Invalid value: '{value}'. Supported values are: {}.", quoted_list(supported)),
            Some(path),
            Some("invalid_value"),
        )
    }

    /// A field's value breaks a rule other than its type or set.
    pub fn bad(path: &str, why: &str) -> Self {
        Self::invalid(format!("Invalid '{path}': {why}"), Some(path), Some("invalid_value"))
    }

    /// A field the protocol does not have (nested, or any field of the Responses API).
    pub fn unknown(path: &str) -> Self {
        Self::invalid(
            format!("Unknown parameter: '{path}'."),
            Some(path),
            Some("unknown_parameter"),
        )
    }

    /// An error with any status and type (scripted errors, 401, 404, 409).
    pub fn other(status: u16, kind: &str, message: impl Into<String>, code: Option<&str>) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind: kind.into(),
            param: None,
            code: code.map(str::to_owned),
        }
    }

    /// The response body: `{"error":{message,type,param,code}}`.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

/// "an object", "a string", ... as the real service words a JSON value's type.
pub fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a decimal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `'a', 'b', and 'c'`.
fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    match quoted.len() {
        0 => String::new(),
        1 => quoted.join(""),
        2 => quoted.join(" and "),
        n => format!("{}, and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

/// `parent.key`, or `key` at the top.
pub fn at(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[i]`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// Both protocols: `stream` (a boolean) and `stream_options`, which is
/// allowed only with `stream: true` and holds `include_obfuscation` and, on
/// chat completions (`usage`), `include_usage`.
pub fn check_stream(top: &Fields, usage: bool) -> Result<Asked, ApiError> {
    let stream = top.opt_bool("stream")? == Some(true);
    let Some(options) = top.opt_object("stream_options")? else {
        return Ok(Asked { stream, include_usage: false });
    };
    if !stream {
        return Err(ApiError::invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            Some("stream_options"),
            None,
        ));
    }
    options.only(if usage {
        &["include_usage", "include_obfuscation"]
    } else {
        &["include_obfuscation"]
    })?;
    options.opt_bool("include_obfuscation")?;
    let include_usage = usage && options.opt_bool("include_usage")? == Some(true);
    Ok(Asked { stream, include_usage })
}

/// A JSON object being checked, with its path in the request.
pub struct Fields<'a> {
    pub map: &'a Map<String, Value>,
    pub path: String,
}

impl<'a> Fields<'a> {
    /// `value` must be an object.
    pub fn of(value: &'a Value, path: &str) -> Result<Self, ApiError> {
        match value {
            Value::Object(map) => Ok(Fields { map, path: path.to_owned() }),
            other => Err(ApiError::wrong_type(path, "an object", other)),
        }
    }

    /// The path of one of this object's fields.
    pub fn path_of(&self, key: &str) -> String {
        at(&self.path, key)
    }

    /// Refuses the first key not in `allowed`, with [`ApiError::unknown`].
    pub fn only(&self, allowed: &[&str]) -> Result<(), ApiError> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(key) => Err(ApiError::unknown(&self.path_of(key))),
            None => Ok(()),
        }
    }

    /// The field, `None` when absent or null.
    pub fn opt(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn req(&self, key: &str) -> Result<&'a Value, ApiError> {
        self.opt(key).ok_or_else(|| ApiError::missing(&self.path_of(key)))
    }

    pub fn req_str(&self, key: &str) -> Result<&'a str, ApiError> {
        let value = self.req(key)?;
        value.as_str().ok_or_else(|| ApiError::wrong_type(&self.path_of(key), "a string", value))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.opt(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(ApiError::wrong_type(&self.path_of(key), "a string", other)),
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.opt(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ApiError::wrong_type(&self.path_of(key), "a boolean", other)),
        }
    }

    pub fn opt_object(&self, key: &str) -> Result<Option<Fields<'a>>, ApiError> {
        self.opt(key).map(|v| Fields::of(v, &self.path_of(key))).transpose()
    }

    pub fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.opt(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(ApiError::wrong_type(&self.path_of(key), "an array", other)),
        }
    }

    /// An optional number within `[min, max]`.
    pub fn opt_number(&self, key: &str, min: f64, max: f64) -> Result<Option<f64>, ApiError> {
        let Some(value) = self.opt(key) else { return Ok(None) };
        let path = self.path_of(key);
        let n = value.as_f64().ok_or_else(|| ApiError::wrong_type(&path, "a number", value))?;
        if n < min {
            return Err(ApiError::bad(
                &path,
                &format!(
                    "number below minimum value. Expected a value >= {min}, but got {n} instead."
                ),
            ));
        }
        if n > max {
            return Err(ApiError::bad(
                &path,
                &format!(
                    "number above maximum value. Expected a value <= {max}, but got {n} instead."
                ),
            ));
        }
        Ok(Some(n))
    }

    /// An optional integer of at least `min`.
    pub fn opt_int(&self, key: &str, min: i64) -> Result<Option<i64>, ApiError> {
        let Some(value) = self.opt(key) else { return Ok(None) };
        let path = self.path_of(key);
        let n = value.as_i64().ok_or_else(|| ApiError::wrong_type(&path, "an integer", value))?;
        if n < min {
            return Err(ApiError::bad(
                &path,
                &format!(
                    "integer below minimum value. Expected a value >= {min}, but got {n} instead."
                ),
            ));
        }
        Ok(Some(n))
    }

    /// An optional string from a fixed set.
    pub fn opt_enum(&self, key: &str, allowed: &[&str]) -> Result<Option<&'a str>, ApiError> {
        let value = self.opt_str(key)?;
        match value {
            Some(v) if !allowed.contains(&v) => {
                Err(ApiError::bad_value(&self.path_of(key), v, allowed))
            }
            _ => Ok(value),
        }
    }
}

/// An array that must hold at least one item.
pub fn non_empty<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, ApiError> {
    match value {
        Value::Array(items) if items.is_empty() => Err(ApiError::invalid(
            format!("Invalid '{path}': empty array. Expected an array with minimum length 1, but got an empty array instead."),
            Some(path),
            Some("empty_array"),
        )),
        Value::Array(items) => Ok(items),
        other => Err(ApiError::wrong_type(path, "an array", other)),
    }
}

/// A function name as both APIs accept it: 1 to 64 of `a-z A-Z 0-9 _ -`.
pub fn check_function_name(name: &str, path: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            path,
            "string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.",
        ))
    }
}

/// The `reasoning_effort` / `reasoning.effort` values current models accept.
pub const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

/// Checks `tool_choice` as both protocols take it: absent, one of the words
/// `none`, `auto`, `required`, or an object of `type: function` whose other
/// fields `function` checks (the protocols name the function differently).
pub fn tool_choice(
    top: &Fields,
    function: impl FnOnce(&Fields) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    match top.opt("tool_choice") {
        None => Ok(()),
        Some(Value::String(choice)) => match choice.as_str() {
            "none" | "auto" | "required" => Ok(()),
            other => Err(ApiError::bad_value("tool_choice", other, &["none", "auto", "required"])),
        },
        Some(choice) => {
            let choice = Fields::of(choice, "tool_choice")?;
            let kind = choice.req_str("type")?;
            if kind != "function" {
                return Err(ApiError::bad_value("tool_choice.type", kind, &["function"]));
            }
            function(&choice)
        }
    }
}

/// For the protocols' tests: each request of `table` is refused as the
/// provider refuses it (400, `invalid_request_error`, the message holding
/// the given words, the parameter named).
#[cfg(test)]
pub fn assert_refusals<T: std::fmt::Debug>(
    table: Vec<(Value, &str, Option<&str>)>,
    validate: impl Fn(&Value) -> Result<T, ApiError>,
) {
    for (body, message, param) in table {
        match validate(&body) {
            Ok(checked) => unreachable!("accepted {body}: {checked:?}"),
            Err(e) => {
                assert_eq!(e.status, 400, "{body}");
                assert_eq!(e.kind, "invalid_request_error", "{body}");
                assert!(
                    e.message.contains(message),
                    "{body}\n  got: {}\n  want: {message}",
                    e.message
                );
                assert_eq!(e.param.as_deref(), param, "{body}: {}", e.message);
            }
        }
    }
}

#[cfg(test)]
#[path = "wire/tests.rs"]
mod tests;
