//! What the hostile body uses to try its doors: loopback, cargo, the model,
//! and a search for anything that looks like a key.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Try, SECRET_PREFIX};

pub fn loopback() -> Try {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut out = TcpStream::connect(listener.local_addr()?)?;
    let (mut inn, _) = listener.accept()?;
    out.write_all(b"ping")?;
    let mut buf = [0u8; 4];
    inn.read_exact(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub fn cargo(crate_dir: &Path, target: &Path) -> Try {
    let out = Command::new("cargo")
        .args(["build", "--offline", "--locked", "--quiet"])
        .current_dir(crate_dir)
        .env("CARGO_TARGET_DIR", target)
        .output()?;
    if out.status.success() {
        Ok("cargo build passed".into())
    } else {
        Err(io::Error::other(format!("cargo: {}", String::from_utf8_lossy(&out.stderr))))
    }
}

/// POSTs one chat request to the model the kernel serves, with the key it gave.
pub fn ask_model() -> Try {
    let url = std::env::var("TENERAL_MODEL_URL").unwrap_or_default();
    let key = std::env::var("TENERAL_API_KEY").unwrap_or_default();
    let rest = url.strip_prefix("http://").ok_or_else(|| io::Error::other("not http"))?;
    let (authority, base) = rest.split_once('/').unwrap_or((rest, ""));
    let model = std::env::var("TENERAL_MODEL").unwrap_or_default();
    let body = format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    let mut s = TcpStream::connect(authority)?;
    write!(
        s,
        "POST /{base}/chat/completions HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer.lines().next().unwrap_or_default().to_owned();
    if status.contains(" 200 ") && answer.contains("model reached") {
        Ok(status)
    } else {
        Err(io::Error::other(answer))
    }
}

/// Looks for anything that looks like a key in what the body can read: its
/// environment, the kernel's /proc files, and every file under the home.
pub fn search_secrets(home: &Path, parent: i32) -> Try {
    let mut found = Vec::new();
    let mut look = |place: &str, text: &str| {
        for (i, _) in text.match_indices(SECRET_PREFIX) {
            let token: String =
                text[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            found.push(format!("{place}: {token}"));
        }
    };
    for (k, v) in std::env::vars() {
        look(&format!("env {k}"), &v);
    }
    for file in ["environ", "cmdline"] {
        if let Ok(bytes) = fs::read(format!("/proc/{parent}/{file}")) {
            look(&format!("/proc/kernel/{file}"), &String::from_utf8_lossy(&bytes));
        }
    }
    // The home itself may not be listable: start from every name it has.
    let known = [
        "",
        ".env",
        "soul",
        "memory",
        "inbox",
        "body",
        "BIRTH.md",
        ".git",
        ".teneral",
        ".teneral/live",
        ".teneral/candidate",
        ".teneral/owner",
        ".teneral/auth",
        ".teneral/auth/token",
        ".teneral/state.json",
        ".teneral/bin",
    ];
    let mut stack: Vec<PathBuf> = known.iter().map(|k| home.join(k)).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            if let Ok(entries) = fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() && meta.len() < 1 << 20 {
            if let Ok(bytes) = fs::read(&path) {
                let rel = path.strip_prefix(home).unwrap_or(&path).display().to_string();
                look(&rel, &String::from_utf8_lossy(&bytes));
            }
        }
    }
    Ok(found.join("; "))
}
