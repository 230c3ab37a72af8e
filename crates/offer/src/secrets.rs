//! This install's secrets, which the scan looks for literally: the values
//! in `.env` and in the environment under names saying key, token, secret
//! or password, and the tokens and e-mail addresses in `.teneral/auth/`
//! (the individual's own key is not among them: its public half is meant to
//! be shown, and its private half has a shape the scan knows).
//! Only names are ever shown, never values.

use std::path::Path;

use super::key::{AUTH_DIR, KEY_NAME};
use super::scan::{secret_name, Secret, MIN_SECRET_LEN};

/// The largest file of `.teneral/auth/` read.
const MAX_AUTH_FILE: u64 = 1 << 20;

/// Whether an environment or `.env` name says it holds a secret.
pub fn env_name_is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"].iter().any(|w| upper.contains(w))
}

/// The `NAME=value` lines of a `.env` text (read by `teneral_core::dotenv`),
/// each value as a tool would take it: quotes around it taken off, since the
/// secret is what is inside them. For finding secrets only: the owner's own
/// lines beside teneral's are searched too, and a line the settings' rules
/// refuse still holds a secret to keep out of an offer.
pub(crate) fn dotenv(text: &str) -> Vec<(String, String)> {
    teneral_core::dotenv::lines(text)
        .filter_map(|line| {
            let value = line.value?.trim();
            let name = line.name.split_whitespace().last()?;
            Some((name.to_owned(), unquoted(value).to_owned()))
        })
        .collect()
}

/// `value` without one pair of matching quotes around it.
fn unquoted(value: &str) -> &str {
    ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value)
}

/// The secrets of the install at `home`, with the process environment `env`.
pub fn collect(home: &Path, env: impl Iterator<Item = (String, String)>) -> Vec<Secret> {
    let mut secrets = Vec::new();
    let mut add = |name: String, value: &str| {
        let value = value.trim();
        if value.len() >= MIN_SECRET_LEN && !secrets.iter().any(|s: &Secret| s.value == value) {
            secrets.push(Secret { name, value: value.to_owned() });
        }
    };
    if let Ok(text) = std::fs::read_to_string(home.join(".env")) {
        for (name, value) in dotenv(&text) {
            if env_name_is_secret(&name) {
                add(format!(".env {name}"), &value);
            }
        }
    }
    for (name, value) in env {
        if env_name_is_secret(&name) {
            add(format!("the environment's {name}"), &value);
        }
    }
    let dir = home.join(AUTH_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else { return secrets };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.starts_with(KEY_NAME) || file.starts_with('.') {
            continue;
        }
        let Ok(bytes) = teneral_core::fsutil::read_beneath(&dir, Path::new(&file), MAX_AUTH_FILE)
        else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(value) => json_secrets(&value, "", &mut |name, v| add(format!("{file} {name}"), v)),
            Err(_) => {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    add(format!(".teneral/auth/{file}"), line);
                }
            }
        }
    }
    secrets
}

/// The strings of a JSON document under secret-sounding keys, and every
/// string that is an e-mail address.
fn json_secrets(value: &serde_json::Value, key: &str, add: &mut dyn FnMut(&str, &str)) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                json_secrets(v, k, add);
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                json_secrets(v, key, add);
            }
        }
        serde_json::Value::String(s) => {
            let email = s.contains('@') && !s.contains(char::is_whitespace) && s.contains('.');
            if secret_name(key) || key.to_ascii_lowercase().contains("mail") || email {
                add(key, s);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_lines() {
        let pairs = dotenv(
            "# c\nexport A_KEY=\"v 1\"\nB='x'\nC=plain\nnot a pair\n  # D_KEY=commented\nE= 'y\"\n",
        );
        let want = [("A_KEY", "v 1"), ("B", "x"), ("C", "plain"), ("E", "'y\"")];
        let got: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn json_strings_under_secret_keys_and_addresses() {
        let doc = serde_json::json!({"access_token": "aaaaaaaaaa", "account": {"email": "o@x.org"},
            "plan": "plus", "ids": ["someone@example.org"]});
        let mut found = Vec::new();
        json_secrets(&doc, "", &mut |k, v| found.push(format!("{k}={v}")));
        assert_eq!(found, ["access_token=aaaaaaaaaa", "email=o@x.org", "ids=someone@example.org"]);
    }
}
