//! The pin file `body/organs.json`: what a commit says it needs, checked
//! before anything is read from the cache.
//!
//! Pure: text in, pins or the first fault out. Invariants of every [`Pin`]
//! returned: the name is 1 to 64 of `a-z 0-9 -`; `url` is `https://...` and
//! ends in `.tar.gz`; `sha256` is 64 lower-case hex digits; `dir` and the
//! first word of `check`, when given, are relative paths whose components are
//! neither empty, `.` nor `..`; nothing else was in the file. At most
//! [`MAX_ORGANS`] pins, in the file's order.

/// Where a commit pins its organs, relative to the checkout.
pub const PIN_FILE: &str = "body/organs.json";
/// At most this many organs.
pub const MAX_ORGANS: usize = 16;
/// The pin file may not be larger than this.
pub const MAX_PIN_FILE: u64 = 64 * 1024;

const MAX_NAME: usize = 64;
const MAX_TEXT: usize = 4096;
const MAX_ARGS: usize = 64;

/// One organ as a commit pins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub name: String,
    pub url: String,
    pub sha256: String,
    pub dir: Option<String>,
    pub check: Option<Vec<String>>,
}

/// What is wrong with a pin file. The message names the organ and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("it is not JSON ({0})")]
    NotJson(String),
    #[error("it must be a JSON object mapping organ names to pins")]
    NotObject,
    #[error("it pins {0} organs; at most 16 are allowed")]
    TooMany(usize),
    #[error("organ name {0:?} is not allowed: use 1 to 64 of a-z, 0-9 and -")]
    Name(String),
    #[error("organ {0}: its pin must be an object with url and sha256")]
    PinNotObject(String),
    #[error("organ {organ}: field {field:?} is not defined; only url, sha256, dir and check are")]
    UnknownField { organ: String, field: String },
    #[error("organ {organ}: {field} is missing")]
    Missing { organ: String, field: &'static str },
    #[error("organ {organ}: {field} {problem}")]
    Field { organ: String, field: &'static str, problem: &'static str },
}

/// Reads the pins from the pin file's text. `{}` gives no pins.
pub fn parse(text: &str) -> Result<Vec<Pin>, PinError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| PinError::NotJson(e.to_string()))?;
    let serde_json::Value::Object(organs) = value else { return Err(PinError::NotObject) };
    if organs.len() > MAX_ORGANS {
        return Err(PinError::TooMany(organs.len()));
    }
    organs.iter().map(|(name, pin)| parse_pin(name, pin)).collect()
}

fn parse_pin(name: &str, pin: &serde_json::Value) -> Result<Pin, PinError> {
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !name_ok {
        return Err(PinError::Name(name.to_owned()));
    }
    let organ = name.to_owned();
    let serde_json::Value::Object(fields) = pin else { return Err(PinError::PinNotObject(organ)) };
    if let Some(field) =
        fields.keys().find(|k| !["url", "sha256", "dir", "check"].contains(&k.as_str()))
    {
        return Err(PinError::UnknownField { organ, field: field.clone() });
    }
    let bad = |field, problem| PinError::Field { organ: organ.clone(), field, problem };
    let text = |field: &'static str| -> Result<Option<&str>, PinError> {
        match fields.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) if s.len() <= MAX_TEXT => Ok(Some(s)),
            Some(serde_json::Value::String(_)) => Err(bad(field, "is longer than 4096 bytes")),
            Some(_) => Err(bad(field, "must be a string")),
        }
    };
    let missing = |field| PinError::Missing { organ: organ.clone(), field };
    let url = text("url")?.ok_or_else(|| missing("url"))?;
    if !url_ok(url) {
        return Err(bad("url", "must be an https:// address of a .tar.gz archive"));
    }
    let sha256 = text("sha256")?.ok_or_else(|| missing("sha256"))?;
    if sha256.len() != 64
        || !sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad("sha256", "must be 64 lower-case hex digits"));
    }
    let dir = text("dir")?;
    if dir.is_some_and(|d| !relative_ok(d)) {
        return Err(bad("dir", "must be a relative path inside the archive, without . or .."));
    }
    let check = match fields.get("check") {
        None => None,
        Some(serde_json::Value::Array(words)) => {
            let words: Option<Vec<String>> =
                words.iter().map(|w| w.as_str().map(str::to_owned)).collect();
            let Some(words) = words else {
                return Err(bad("check", "must be an array of strings"));
            };
            if words.is_empty() || words.len() > MAX_ARGS {
                return Err(bad("check", "must have 1 to 64 words"));
            }
            if words.iter().any(|w| w.len() > MAX_TEXT || w.contains('\0')) {
                return Err(bad("check", "has a word longer than 4096 bytes or with a NUL"));
            }
            if !relative_ok(&words[0]) {
                return Err(bad(
                    "check",
                    "must start with a file of the organ: a relative path without . or ..",
                ));
            }
            Some(words)
        }
        Some(_) => return Err(bad("check", "must be an array of strings")),
    };
    Ok(Pin {
        name: organ,
        url: url.to_owned(),
        sha256: sha256.to_owned(),
        dir: dir.map(str::to_owned),
        check,
    })
}

fn url_ok(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("https://") else { return false };
    let host = rest.split('/').next().unwrap_or_default();
    !host.is_empty()
        && rest.contains('/')
        && url.ends_with(".tar.gz")
        && !url.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
}

/// A relative path whose every component is a plain name.
pub fn relative_ok(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "ea20fd48a223ffb3ed3e37a5edcb8a7caf5c5199d4cc8ba4e072d0c21e4a57b7";
    const URL: &str = "https://example.org/r/v1/r-1-linux.tar.gz";

    fn one(extra: &str) -> String {
        format!(r#"{{"r": {{"url": "{URL}", "sha256": "{SHA}"{extra}}}}}"#)
    }

    #[test]
    fn well_formed_pins_are_read_in_order() {
        assert_eq!(parse("{}"), Ok(vec![]));
        let text = format!(
            r#"{{"zeta": {{"url": "{URL}", "sha256": "{SHA}"}},
                "alpha-2": {{"url": "{URL}", "sha256": "{SHA}", "dir": "a/b", "check": ["bin/x", "--help"]}}}}"#
        );
        let pins = parse(&text).expect("the well-formed pins parse");
        assert_eq!(pins.len(), 2);
        assert_eq!(pins[0].name, "zeta");
        assert_eq!(pins[0].dir, None);
        assert_eq!(pins[1].dir.as_deref(), Some("a/b"));
        assert_eq!(pins[1].check, Some(vec!["bin/x".to_owned(), "--help".to_owned()]));
    }

    #[test]
    fn every_refused_shape_is_named() {
        let many: Vec<String> =
            (0..17).map(|i| format!(r#""o{i}": {{"url": "{URL}", "sha256": "{SHA}"}}"#)).collect();
        let many = format!("{{{}}}", many.join(","));
        let cases: Vec<(String, &str)> = vec![
            ("not json".into(), "it is not JSON"),
            ("[]".into(), "must be a JSON object"),
            ("null".into(), "must be a JSON object"),
            (many, "it pins 17 organs; at most 16"),
            (r#"{"Big": {}}"#.into(), r#"organ name "Big" is not allowed"#),
            (r#"{"a_b": {}}"#.into(), r#"organ name "a_b" is not allowed"#),
            (r#"{"": {}}"#.into(), r#"organ name "" is not allowed"#),
            (format!(r#"{{"{}": {{}}}}"#, "a".repeat(65)), "is not allowed"),
            (r#"{"r": "x"}"#.into(), "organ r: its pin must be an object"),
            (r#"{"r": {"sha256": "x"}}"#.into(), "organ r: url is missing"),
            (format!(r#"{{"r": {{"url": "{URL}"}}}}"#), "organ r: sha256 is missing"),
            (one(r#", "version": "1""#), r#"organ r: field "version" is not defined"#),
            (one(r#", "check": ["x"], "env": {}"#), r#"field "env" is not defined"#),
            (one(r#", "dir": 3"#), "organ r: dir must be a string"),
            (one(r#", "dir": "/abs""#), "organ r: dir must be a relative path"),
            (one(r#", "dir": "a/../..""#), "organ r: dir must be a relative path"),
            (one(r#", "dir": "./a""#), "organ r: dir must be a relative path"),
            (one(r#", "dir": """#), "organ r: dir must be a relative path"),
            (one(r#", "check": "bin/x""#), "organ r: check must be an array of strings"),
            (one(r#", "check": [1]"#), "organ r: check must be an array of strings"),
            (one(r#", "check": []"#), "organ r: check must have 1 to 64 words"),
            (
                one(r#", "check": ["/bin/sh", "-c", "true"]"#),
                "check must start with a file of the organ",
            ),
            (one(r#", "check": ["../x"]"#), "check must start with a file of the organ"),
            (one(r#", "check": ["x", "a\u0000b"]"#), "with a NUL"),
        ];
        for (text, want) in cases {
            let got = parse(&text).map(|_| ()).map_err(|e| e.to_string());
            assert!(
                got.as_ref().is_err_and(|e| e.contains(want)),
                "{text}: {got:?}, want {want:?}"
            );
        }
        let bad_fields = [
            ("url", "http://example.org/a.tar.gz"),
            ("url", "https://example.org/a.zip"),
            ("url", "https:///a.tar.gz"),
            ("url", "https://example.org/a b.tar.gz"),
            ("url", "ftp://example.org/a.tar.gz"),
            ("sha256", "EA20FD48A223FFB3ED3E37A5EDCB8A7CAF5C5199D4CC8BA4E072D0C21E4A57B7"),
            ("sha256", "ea20"),
            ("sha256", "zz20fd48a223ffb3ed3e37a5edcb8a7caf5c5199d4cc8ba4e072d0c21e4a57b7"),
        ];
        for (field, value) in bad_fields {
            let text = match field {
                "url" => format!(r#"{{"r": {{"url": "{value}", "sha256": "{SHA}"}}}}"#),
                _ => format!(r#"{{"r": {{"url": "{URL}", "sha256": "{value}"}}}}"#),
            };
            let got = parse(&text).map(|_| ()).map_err(|e| e.to_string());
            let want = format!("organ r: {field} must be");
            assert!(got.as_ref().is_err_and(|e| e.contains(&want)), "{text}: {got:?}");
        }
    }

    #[test]
    fn relative_paths() {
        for ok in ["a", "a/b", "rayforce-3.0.2", ".hidden/x", "a..b"] {
            assert!(relative_ok(ok), "{ok}");
        }
        for bad in ["", "/a", "a/", "a//b", ".", "..", "a/../b", "./a", "a/.", "a\0b"] {
            assert!(!relative_ok(bad), "{bad:?}");
        }
    }
}
