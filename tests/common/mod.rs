//! Shared test helpers: temporary individuals (real git repositories holding
//! this repository's seed body), the real `teneral` and `teneralctl` binaries,
//! and reading the journal.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use git2::{IndexAddOption, Repository, Signature};
use serde_json::Value;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub fn teneral() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_teneral"))
}

pub fn teneralctl() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_teneralctl"))
}

/// This repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A cargo target directory shared by the bodies every test builds, so the
/// seed body is compiled once per test run, not once per test.
pub fn shared_body_target() -> PathBuf {
    repo_root().join("target/test-bodies")
}

/// A temporary individual: a git repository with a body, `BIRTH.md`, `.env`.
pub struct Individual {
    pub dir: tempfile::TempDir,
}

impl Individual {
    /// An individual with this repository's seed body and the given stand-in
    /// script (JSON Lines) and extra `.env` lines.
    pub fn seed(script: &str, env: &[&str]) -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::Builder::new().prefix("tnl").tempdir()?;
        copy_tree(&repo_root().join("body"), &dir.path().join("body"))?;
        std::fs::copy(repo_root().join("BIRTH.md"), dir.path().join("BIRTH.md"))?;
        let me = Self { dir };
        me.finish(script, env)?;
        Ok(me)
    }

    /// An individual whose body is the given files (path, content), e.g. a
    /// body made to crash.
    pub fn with_body(
        files: &[(&str, &str)],
        script: &str,
        env: &[&str],
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::Builder::new().prefix("tnl").tempdir()?;
        for (path, content) in files {
            let p = dir.path().join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(p, content)?;
        }
        std::fs::write(dir.path().join("BIRTH.md"), "Hello.\n")?;
        let me = Self { dir };
        me.finish(script, env)?;
        Ok(me)
    }

    fn finish(&self, script: &str, env: &[&str]) -> Result<(), Box<dyn std::error::Error>> {
        let home = self.path();
        std::fs::write(
            home.join(".gitignore"),
            "/.teneral\n/.env\n/memory\n/soul\n/inbox\n/script.jsonl\n",
        )?;
        std::fs::write(home.join("script.jsonl"), script)?;
        let mut dotenv = String::from(
            "TENERAL_PROVIDER=standin\nTENERAL_STANDIN_SCRIPT=script.jsonl\nTENERAL_HEARTBEAT_MINUTES=0\n\
             TENERAL_TEST_BACKOFF_MS=50\nTENERAL_TEST_STOP_GRACE_SECONDS=2\n",
        );
        for line in env {
            dotenv.push_str(line);
            dotenv.push('\n');
        }
        // Inside a cage (a gate check running these tests) no cage can be
        // made for the bodies; the outer one holds them instead.
        if std::env::var_os("TENERAL_TEST_NO_CAGE").is_some() {
            dotenv.push_str("TENERAL_UNSAFE_UNCONFINED=1\n");
        }
        std::fs::write(home.join(".env"), dotenv)?;
        commit_all(home, "birth of a test individual")?;
        // Share one build cache between every test's individual.
        std::fs::create_dir_all(home.join(".teneral"))?;
        std::fs::create_dir_all(shared_body_target())?;
        std::os::unix::fs::symlink(shared_body_target(), home.join(".teneral/target"))?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts `teneral run` on it; its stderr goes to `kernel.log` in the dir.
    pub fn start(&self) -> Result<Kernel, Box<dyn std::error::Error>> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("kernel.log"))?;
        let child = Command::new(teneral())
            .arg("run")
            .arg("--dir")
            .arg(self.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        Ok(Kernel { child: Some(child), log: self.path().join("kernel.log") })
    }

    /// The journal's whole events, in order (a torn last line is passed over).
    pub fn journal(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.path().join("memory/journal.jsonl")).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Events of one type.
    pub fn events(&self, kind: &str) -> Vec<Value> {
        self.journal().into_iter().filter(|e| e["type"] == kind).collect()
    }

    /// Waits until the journal holds an event that `pred` accepts.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Value, String> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(e) = self.journal().into_iter().find(|e| pred(e)) {
                return Ok(e);
            }
            if Instant::now() > end {
                return Err(format!(
                    "no {what} in the journal after {timeout:?}; journal:\n{}\nkernel log:\n{}",
                    self.journal().iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"),
                    std::fs::read_to_string(self.path().join("kernel.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The commit HEAD points at.
    pub fn head(&self) -> Result<String, git2::Error> {
        let repo = Repository::open(self.path())?;
        let head = repo.head()?.peel_to_commit()?;
        Ok(head.id().to_string())
    }

    /// Owner files waiting in `.teneral/owner/`.
    pub fn owner_files(&self) -> Vec<String> {
        std::fs::read_dir(self.path().join(".teneral/owner"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    pub fn kernel_log(&self) -> String {
        std::fs::read_to_string(self.path().join("kernel.log")).unwrap_or_default()
    }
}

/// A running `teneral run`; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Kernel {
    pub child: Option<Child>,
    pub log: PathBuf,
}

impl Kernel {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn signal(&self, sig: i32) {
        let _ = Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status();
    }

    /// Waits for it to exit, at most `timeout`; its status code.
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<i32>, String> {
        let end = Instant::now() + timeout;
        let Some(child) = self.child.as_mut() else { return Err("not running".into()) };
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Ok(status.code());
            }
            if Instant::now() > end {
                return Err(format!(
                    "the kernel did not exit within {timeout:?}; its log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Whether a process runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')').next().map(|rest| !rest.trim_start().starts_with('Z')).unwrap_or(false)
        }
        Err(_) => false,
    }
}

/// Commits everything in the repository at `dir` (made if missing) on HEAD.
pub fn commit_all(dir: &Path, message: &str) -> Result<String, git2::Error> {
    let repo = match Repository::open(dir) {
        Ok(r) => r,
        Err(_) => Repository::init(dir)?,
    };
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("test", "test@localhost")?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<_> = parent.iter().collect();
    Ok(repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)?.to_string())
}

/// Copies a directory tree, leaving out `target/`.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Runs `teneralctl talk` with `input` piped in; (status, stdout, stderr).
pub fn talk(
    home: &Path,
    input: &str,
    wait_secs: u64,
) -> std::io::Result<(Option<i32>, String, String)> {
    use std::io::Write;
    let mut child = Command::new(teneralctl())
        .args(["talk", "--dir"])
        .arg(home)
        .args(["--wait", &wait_secs.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
