//! What the hostile body attacks beside the kernel: the real provider
//! behind the model proxy, an ssh-agent's socket in the host's /tmp, and
//! a cargo registry token in the kernel's cargo home.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::SECRET;
use crate::common::*;

/// The upstream "provider": a stand-in model that takes only the real key.
pub struct Upstream {
    child: Child,
    pub base_url: String,
}

impl Upstream {
    pub fn start(dir: &Path) -> Result<Upstream, Box<dyn std::error::Error>> {
        let script = dir.join("upstream.jsonl");
        std::fs::write(&script, "{\"reply\": \"model reached\"}\n")?;
        let mut child = Command::new(teneral())
            .args(["standin", "--listen", "127.0.0.1:0", "--key", SECRET, "--script"])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        let base_url = line.trim().strip_prefix("listening on ").unwrap_or_default().to_owned();
        if base_url.is_empty() {
            let _ = child.kill();
            return Err(format!("the upstream stand-in said {line:?}").into());
        }
        Ok(Upstream { child, base_url })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stand-in ssh-agent: a Unix socket in the host's /tmp where the hostile
/// body looks for it (`agent_path` of the body), proven reachable from
/// outside the cage.
pub struct Agent {
    dir: std::path::PathBuf,
    _listener: std::os::unix::net::UnixListener,
}

impl Agent {
    pub fn start(home: &Path) -> Result<Agent, Box<dyn std::error::Error>> {
        let name = home.file_name().ok_or("a home without a name")?.to_string_lossy();
        let dir = std::path::PathBuf::from(format!("/tmp/tnl-agent-{name}"));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("agent.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        std::os::unix::net::UnixStream::connect(&path)?;
        Ok(Agent { dir, _listener: listener })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `credentials.toml` planted in the kernel's cargo home (mode 0600, as
/// cargo writes it) when there is none, removed again at the end; its path
/// is told to the hostile body in `soul/credentials-path`.
pub struct Credentials {
    planted: Option<std::path::PathBuf>,
}

impl Credentials {
    pub fn plant(home: &Path) -> Result<Credentials, Box<dyn std::error::Error>> {
        use std::os::unix::fs::OpenOptionsExt;
        let cargo = std::env::var_os("CARGO_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
            .ok_or("no cargo home")?;
        let path = cargo.join("credentials.toml");
        std::fs::write(home.join("soul/credentials-path"), path.as_os_str().as_encoded_bytes())?;
        if path.exists() {
            return Ok(Credentials { planted: None });
        }
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        std::io::Write::write_all(
            &mut file,
            format!("[registry]\ntoken = \"{SECRET}\"\n").as_bytes(),
        )?;
        Ok(Credentials { planted: Some(path) })
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        if let Some(path) = &self.planted {
            let _ = std::fs::remove_file(path);
        }
    }
}
