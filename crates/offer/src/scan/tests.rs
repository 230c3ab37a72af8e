#![allow(clippy::expect_used)]
use std::collections::BTreeSet;

use super::*;

fn top() -> BTreeSet<String> {
    ["body", "src", "docs", "BACKLOG.md", "README.md"].iter().map(|s| s.to_string()).collect()
}

fn secrets() -> Vec<Secret> {
    vec![
        Secret { name: ".env OPENAI_API_KEY".into(), value: "owner-own-value-77".into() },
        Secret { name: "auth e-mail".into(), value: "owner@example.org".into() },
        Secret { name: "short".into(), value: "abc".into() },
    ]
}

fn commit(n: u8) -> Commit {
    Commit::parse(&format!("{n:02x}").repeat(20)).expect("a commit id")
}

/// The rule one added line breaks, if any.
fn line_rule(line: &str) -> Option<Rule> {
    let (s, t) = (secrets(), top());
    Scanner::new(&s, &t).text(line).map(|(rule, _)| rule)
}

// Built from pieces so that this file itself holds no credential shape.
fn gh() -> String {
    format!("ghp_{}", "a1B2c3D4e5".repeat(4))
}

#[test]
fn each_shape_is_hit_by_its_seeded_leak() {
    let cases: Vec<(String, Rule)> = vec![
        (format!("-----BEGIN OPENSSH {}-----", "PRIVATE KEY"), Rule::PrivateKeyHeader),
        (format!("-----BEGIN RSA {}-----", "PRIVATE KEY"), Rule::PrivateKeyHeader),
        (format!("token = {}", gh()), Rule::GithubToken),
        (format!("github_{}_{}", "pat", "11ABCDEFG0123456789_abcdefghijkl"), Rule::GithubToken),
        (format!("use sk-{}", "proj-Ab12Cd34Ef56Gh78Ij90Kl"), Rule::OpenAiKey),
        (format!("aws {}{}", "AKIA", "IOSFODNN7EXAMPLE"), Rule::AwsKeyId),
        (format!("slack: xox{}-{}", "b", "1234567890-abcdefABCDEF"), Rule::SlackToken),
        (
            format!(
                "{}.{}.{}",
                "eyJhbGciOiJIUzI1NiJ9",
                "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
                "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
            ),
            Rule::Jwt,
        ),
        ("db = postgres://app:hunter2hunter@db.local/x".into(), Rule::UrlPassword),
        ("let api_key = \"Zq8vR2kLm4Np6Tx9Wb3Y\";".into(), Rule::SecretAssignment),
        ("\"clientSecret\": \"Zq8vR2kLm4Np6Tx9Wb3Y\",".into(), Rule::SecretAssignment),
        ("PASSWORD='Zq8vR2kLm4Np6Tx9Wb3Y'".into(), Rule::SecretAssignment),
        ("mail me at owner@example.org".into(), Rule::InstallSecret),
        ("x = owner-own-value-77".into(), Rule::InstallSecret),
    ];
    for (line, rule) in cases {
        assert_eq!(line_rule(&line), Some(rule), "{line}");
    }
}

#[test]
fn near_misses_are_not_hit() {
    let misses = [
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "ghp_example is how a token starts",
        "github_pat_short",
        "task-runner-configuration-file-12345678",
        "pip install sk-learn",
        "sk-abcdefghijklmnopqrstuvwxyz (no digits)",
        "AKIAEXAMPLE",
        "AKIAIOSFODNN7EXAMPLEXX is too long",
        "xoxo-hugs-and-kisses-forever",
        "xoxb-short",
        "eyJhbGciOiJIUzI1NiJ9 alone",
        "https://example.com:8080/path",
        "git@github.com:owner/repo.git",
        "https://user@example.com/",
        "postgres://app:${DB_PASSWORD}@db/x",
        "let keyboard_layout = \"qwertyuiopasdfghjkl\";",
        "monkey = \"Zq8vR2kLm4Np6Tx9Wb3Y\"",
        "api_key = \"short\"",
        "api_key = \"<your key goes here>\"",
        "api_key = \"${OPENAI_API_KEY_FROM_ENV}\"",
        "api_key = std::env::var(\"OPENAI_API_KEY_NAME_HERE\")",
        "abc is too short a secret to look for",
        "owner at example dot org",
    ];
    for line in misses {
        assert_eq!(line_rule(line), None, "{line}");
    }
}

#[test]
fn paths_private_key_shaped_and_new() {
    let t = top();
    let cases: &[(&str, Option<Rule>)] = &[
        ("soul/self.md", Some(Rule::PrivatePath)),
        ("memory/notes.md", Some(Rule::PrivatePath)),
        ("inbox/1.txt", Some(Rule::PrivatePath)),
        ("body/.teneral/x", Some(Rule::PrivatePath)),
        (".env", Some(Rule::PrivatePath)),
        ("body/.env.local", Some(Rule::PrivatePath)),
        ("body/id_ed25519", Some(Rule::KeyFileName)),
        ("body/tls/server.pem", Some(Rule::KeyFileName)),
        ("body/x.p12", Some(Rule::KeyFileName)),
        ("tools/run.sh", Some(Rule::NewTopLevel)),
        ("body/src/soul.rs", None),
        ("body/id_ed25519.pub", None),
        ("body/keyboard.rs", None),
        ("docs/environment.md", None),
        ("BACKLOG.md", None),
    ];
    for (path, rule) in cases {
        assert_eq!(path_rule(path, &t), *rule, "{path}");
    }
}

#[test]
fn every_commit_line_and_message_is_scanned_and_binaries_named() {
    let (s, t) = (secrets(), top());
    let added = CommitChange {
        commit: commit(1),
        message: "Add a helper\n\nWhat it changes: x".into(),
        files: vec![FileChange {
            path: "body/a.ts".into(),
            binary: false,
            added: vec![(1, "ok".into()), (2, format!("const t = '{}'", gh()))],
        }],
    };
    // The later commit removes the line: the scan sees the history, not the end.
    let removed = CommitChange {
        commit: commit(2),
        message: format!("Remove it\n\nit was owner@example.org's {}", "note"),
        files: vec![
            FileChange { path: "body/a.ts".into(), binary: false, added: vec![] },
            FileChange { path: "body/logo.png".into(), binary: true, added: vec![] },
        ],
    };
    let report = Scanner::new(&s, &t).scan(&[added, removed]);
    assert_eq!(report.findings.len(), 2, "{:?}", report.findings);
    let first = &report.findings[0];
    assert_eq!(
        (&first.commit, first.path.as_deref(), first.line, first.rule),
        (&commit(1), Some("body/a.ts"), Some(2), Rule::GithubToken)
    );
    assert_eq!(first.masked, "ghp_…[44 chars]");
    assert!(!first.masked.contains(&gh()), "masked");
    let second = &report.findings[1];
    assert_eq!(
        (&second.commit, second.path.as_deref(), second.line, second.rule),
        (&commit(2), None, Some(3), Rule::InstallSecret)
    );
    assert!(!second.masked.contains("owner@"), "{}", second.masked);
    assert_eq!(report.binaries, vec![(commit(2), "body/logo.png".to_owned())]);
}

#[test]
fn secret_names() {
    for yes in ["api_key", "apiKey", "API_KEY", "key", "auth.token", "client-secret", "PASSWD"] {
        assert!(secret_name(yes), "{yes}");
    }
    for no in ["monkey", "keyboard", "hotkeys_map", "passage"] {
        assert!(!secret_name(no), "{no}");
    }
}
