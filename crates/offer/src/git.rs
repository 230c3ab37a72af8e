//! The git commands of a publish (`ls-remote`, `push`), and the one way the
//! token reaches git: a credential file made for one publish in
//! `.teneral/auth/` (0600, removed when the publish ends), read by a
//! credential helper that is a line of shell naming only that file's path.
//! So the token is in no argument, no environment and no git configuration,
//! and every other helper (a user's credential store) is switched off, so
//! git never hands it on.
//!
//! The one place the offer crate starts programs. Each git runs in a
//! process group of its own, and the whole group (git, its remote helper,
//! its ssh) is killed when it outlives [`TIME_LIMIT`]: a forge that takes
//! the connection and never answers cannot hold a publish, a witness, or
//! the kernel's answer to a body, forever.
//!
//! A program that starts and reaps its children its own way (the kernel:
//! one reaper collects every exit, so no other wait may race it) hands its
//! way in once with [`start_with`]; git then runs through it.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use crate::key::AUTH_DIR;
use crate::token::Token;

/// The user name sent with the token (GitHub takes any; this is its custom).
pub const USER: &str = "x-access-token";

/// How long one git command may run (an offer's push is one change on the
/// species' head: seconds, where the forge answers at all).
pub const TIME_LIMIT: Duration = Duration::from_secs(300);

/// How long the output is waited for once git itself has ended.
const PIPE_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot make the credential file {path} for this publish: {source}")]
    Credential { path: PathBuf, source: io::Error },
    #[error("cannot start git: {0}; install git")]
    Start(io::Error),
    #[error("git {what} failed: {stderr}")]
    Failed { what: String, stderr: String },
    #[error(
        "git {what} did not finish within {seconds} s and was stopped (its process group \
         killed): check that the forge answers at the species' address, then try again"
    )]
    TimedOut { what: String, seconds: u64 },
}

/// One git command for a [`Starter`]: `git` with `args` in `dir`, with `env`
/// set and no other variable of git's, for at most `limit`.
pub struct Invocation<'a> {
    pub args: Vec<String>,
    pub dir: &'a Path,
    pub env: &'a [(&'a str, &'a str)],
    pub limit: Duration,
}

/// What a git command left.
pub struct Ran {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Another way to start git: `Ok(None)` when it ran past the limit and its
/// process group was killed.
pub type Starter = fn(&Invocation) -> io::Result<Option<Ran>>;

static STARTER: OnceLock<Starter> = OnceLock::new();

/// Makes every later git of this process run through `starter` (the first
/// call wins; later ones change nothing).
pub fn start_with(starter: Starter) {
    let _ = STARTER.set(starter);
}

/// The variables git gets: no prompt for anything.
const GIT_ENV: &[(&str, &str)] = &[("GIT_TERMINAL_PROMPT", "0")];

/// A credential file for one publish, removed when dropped.
pub struct Credential {
    path: PathBuf,
}

impl Credential {
    pub fn make(home: &Path, token: &Token) -> Result<Credential, GitError> {
        let mut random = [0u8; 8];
        let _ = getrandom::fill(&mut random);
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = home.join(AUTH_DIR).join(format!(".push-{}-{suffix}", std::process::id()));
        let err = |source| GitError::Credential { path: path.clone(), source };
        let mut f =
            OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(err)?;
        let text = format!("username={USER}\npassword={}\n", token.expose());
        f.write_all(text.as_bytes()).map_err(err)?;
        Ok(Credential { path })
    }

    /// The helper git runs: it answers `get` with the file, and ignores
    /// `store` and `erase`.
    fn helper(&self) -> String {
        let quoted = self.path.to_string_lossy().replace('\'', "'\\''");
        format!("!f() {{ test \"$1\" = get && cat '{quoted}'; }}; f")
    }
}

impl Drop for Credential {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Runs git in `dir` with only `credential` as its credential helper, no
/// prompt, no hooks, for at most [`TIME_LIMIT`]; its standard output.
pub fn run(dir: &Path, credential: &Credential, args: &[&str]) -> Result<String, GitError> {
    run_within(dir, credential, args, TIME_LIMIT)
}

/// [`run`], for at most `limit`.
pub fn run_within(
    dir: &Path,
    credential: &Credential,
    args: &[&str],
    limit: Duration,
) -> Result<String, GitError> {
    let what = args.first().copied().unwrap_or("").to_owned();
    let mut all: Vec<String> = vec!["-c".into(), "credential.helper=".into(), "-c".into()];
    all.push(format!("credential.helper={}", credential.helper()));
    all.extend(["-c", "core.hooksPath=/dev/null", "-c", "core.askPass="].map(String::from));
    all.extend(args.iter().map(|a| a.to_string()));
    let invocation = Invocation { args: all, dir, env: GIT_ENV, limit };
    let ran = match STARTER.get() {
        Some(start) => start(&invocation),
        None => own(&invocation),
    };
    let Some(ran) = ran.map_err(GitError::Start)? else {
        return Err(GitError::TimedOut { what, seconds: limit.as_secs() });
    };
    if !ran.success {
        let stderr = String::from_utf8_lossy(&ran.stderr).trim().to_owned();
        return Err(GitError::Failed { what, stderr });
    }
    Ok(String::from_utf8_lossy(&ran.stdout).into_owned())
}

/// Runs git as this crate's own child (teneralctl's way).
fn own(invocation: &Invocation) -> io::Result<Option<Ran>> {
    let mut child = Command::new("git")
        .args(&invocation.args)
        .current_dir(invocation.dir)
        .envs(invocation.env.iter().copied())
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let Some(status) = wait_within(child, invocation.limit)? else { return Ok(None) };
    // A helper git left behind may hold the pipes: their ends are not waited for long.
    let stdout = stdout.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = stderr.recv_timeout(PIPE_GRACE).unwrap_or_default();
    Ok(Some(Ran { success: status.success(), stdout, stderr }))
}

/// Reads a pipe to its end on a thread of its own; its bytes come on the channel.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = send.send(bytes);
    });
    receive
}

/// Waits for `child` (the leader of its own process group) at most
/// `limit`; past it, kills the whole group and reaps the child: `None`.
fn wait_within(mut child: Child, limit: Duration) -> io::Result<Option<ExitStatus>> {
    let group = rustix::process::Pid::from_child(&child);
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait());
    });
    match receive.recv_timeout(limit) {
        Ok(status) => status.map(Some),
        Err(_) => {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = receive.recv();
            Ok(None)
        }
    }
}

/// The commit each of `refs` points at on the remote `url` (`None`: no such ref).
pub fn remote_refs(
    dir: &Path,
    credential: &Credential,
    url: &str,
    refs: &[&str],
) -> Result<Vec<Option<String>>, GitError> {
    let mut args = vec!["ls-remote", url];
    args.extend(refs);
    let out = run(dir, credential, &args)?;
    Ok(refs
        .iter()
        .map(|r| {
            out.lines().find_map(|l| {
                let (commit, name) = l.split_once('\t')?;
                (name == *r).then(|| commit.to_owned())
            })
        })
        .collect())
}

/// `git --version`, for a witness report's toolchain line.
pub fn version() -> String {
    Command::new("git")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|e| format!("git (its version unknown: {e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The processes whose command line names `text`.
    fn running_with(text: &str) -> Vec<String> {
        let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
        dir.flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(text))
            .collect()
    }

    #[test]
    fn a_forge_that_never_answers_is_given_up_at_the_limit_with_its_helpers() {
        // A forge that takes every connection and never says a word.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                held.push(stream);
            }
        });
        let home = tempfile::tempdir().expect("a temporary directory");
        fs::create_dir_all(home.path().join(AUTH_DIR)).expect("the auth directory");
        let token = Token::new("ghp_NeverAnswered0123456789abcdefghijXY").expect("a token");
        let credential = Credential::make(home.path(), &token).expect("a credential file");
        let url = format!("http://127.0.0.1:{port}/o/species.git");

        let started = std::time::Instant::now();
        let limit = Duration::from_secs(2);
        let got = run_within(home.path(), &credential, &["ls-remote", &url], limit);
        let took = started.elapsed();
        let Err(e @ GitError::TimedOut { .. }) = got else {
            panic!("not stopped at the limit: {got:?}")
        };
        assert!(took >= limit && took < limit + Duration::from_secs(3), "took {took:?}");
        let said = e.to_string();
        assert!(said.starts_with("git ls-remote did not finish within 2 s"), "{said}");
        assert!(said.contains("check that the forge answers"), "{said}");
        // git's remote helper named the address: none is left running.
        // (SIGKILL lands at once, but a process takes a moment to be gone.)
        let gone = std::time::Instant::now() + Duration::from_secs(2);
        let mut left = running_with(&format!("127.0.0.1:{port}"));
        while !left.is_empty() && std::time::Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(20));
            left = running_with(&format!("127.0.0.1:{port}"));
        }
        assert!(left.is_empty(), "left running: {left:?}");
    }
}
