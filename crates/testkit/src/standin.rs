//! The stand-in model: `teneral standin`, the kernel's own program that
//! answers the model APIs from a script (JSON Lines), started on a loopback
//! port of its choosing and killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `teneral standin`.
pub struct Standin {
    child: Child,
    /// Its model API, `http://ADDR/v1`.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Standin {
    /// Starts `teneral` (the kernel's binary at that path) as a stand-in
    /// answering `script`, which takes only `key` when one is given.
    pub fn start(teneral: &Path, script: &str, key: Option<&str>) -> std::io::Result<Standin> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("script.jsonl");
        std::fs::write(&path, script)?;
        let mut command = Command::new(teneral);
        command.args(["standin", "--listen", "127.0.0.1:0"]);
        if let Some(key) = key {
            command.args(["--key", key]);
        }
        let mut child = command.arg("--script").arg(&path).stdout(Stdio::piped()).spawn()?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout).read_line(&mut line)?;
        }
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!("the stand-in said {line:?}")));
        };
        Ok(Standin { url: url.to_owned(), child, _dir: dir })
    }

    /// `http://ADDR`: the model API is under `/v1`, the sign-in beside it.
    pub fn root(&self) -> &str {
        self.url.strip_suffix("/v1").expect("the stand-in serves its model API at /v1")
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
