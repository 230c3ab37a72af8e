//! What the hostile body attacks beside the kernel: the real provider
//! behind the model proxy, an ssh-agent's socket in the host's /tmp, and
//! a cargo registry token in the kernel's cargo home.

use std::path::Path;

use teneral_testkit::standin::Standin;

use super::SECRET;
use crate::common::*;

/// The upstream "provider": a stand-in model that takes only the real key.
pub struct Upstream {
    _standin: Standin,
    pub base_url: String,
}

impl Upstream {
    /// Starts it (`_dir`, the test's directory, is not needed: the stand-in
    /// keeps its script in a directory of its own).
    pub fn start(_dir: &Path) -> Result<Upstream, Box<dyn std::error::Error>> {
        let standin = Standin::start(&teneral(), "{\"reply\": \"model reached\"}\n", Some(SECRET))?;
        Ok(Upstream { base_url: standin.url.clone(), _standin: standin })
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
