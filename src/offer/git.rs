//! The kernel's way of running the offer crate's git
//! ([`teneral_offer::git::start_with`]): through [`crate::spawn`], like every
//! other child of the kernel. So its one reaper collects git's exit (a wait
//! of the offer crate's own would race it), git's process group is listed
//! and swept by the next start when the kernel is killed mid-push, it dies
//! with the kernel, and at the time limit the whole group is killed.

use std::io;
use std::time::Duration;

use teneral_offer::git::{Invocation, Ran};
use tokio::io::AsyncReadExt;

use crate::spawn::{self, Output, Spec};

/// The kernel's variables git may need: where programs are, a home, the
/// way out to the forge and its certificates. Nothing else of the kernel's.
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Runs `invocation` as a child of the kernel. Call off the event loop
/// (it blocks on the kernel's runtime).
pub fn through_spawn(invocation: &Invocation) -> io::Result<Option<Ran>> {
    let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let mut spec = Spec::new("git", invocation.dir);
    spec.args = invocation.args.iter().map(Into::into).collect();
    for name in PASSED {
        if let Some(value) = std::env::var_os(name) {
            spec = spec.env(name, value);
        }
    }
    for (name, value) in invocation.env {
        spec = spec.env(name, *value);
    }
    spec.stdout = Output::Pipe;
    spec.stderr = Output::Pipe;
    let limit = invocation.limit;
    handle.block_on(async move {
        let mut child = spawn::spawn(spec)?;
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let ran = async {
            let (stdout, stderr) = tokio::join!(read_all(out), read_all(err));
            let exit = child.wait().await;
            Ran { success: exit.success(), stdout, stderr }
        };
        match tokio::time::timeout(limit, ran).await {
            Ok(ran) => Ok(Some(ran)),
            Err(_) => {
                child.stop(Duration::ZERO).await;
                Ok(None)
            }
        }
    })
}

async fn read_all(pipe: Option<tokio::net::unix::pipe::Receiver>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes).await;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The processes whose command line names `text`.
    fn running_with(text: &str) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        dir.flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(text))
            .collect()
    }

    #[test]
    fn a_git_whose_forge_never_answers_is_killed_with_its_group_at_the_limit() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                held.push(stream);
            }
        });
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("http://127.0.0.1:{port}/o/species.git");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.expect("a current-thread runtime builds");
        let (got, took) = rt.block_on(async {
            spawn::start_reaper_of_own_children().expect("the reaper starts");
            let (dir, url) = (dir.path().to_owned(), url.clone());
            tokio::task::spawn_blocking(move || {
                let invocation = Invocation {
                    args: vec!["ls-remote".into(), url],
                    dir: &dir,
                    env: &[("GIT_TERMINAL_PROMPT", "0")],
                    limit: Duration::from_secs(2),
                };
                let started = std::time::Instant::now();
                (through_spawn(&invocation), started.elapsed())
            })
            .await
            .expect("the blocking task ends")
        });
        assert!(
            matches!(got, Ok(None)),
            "not stopped at the limit: {:?}",
            got.map(|r| r.is_some())
        );
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(5), "took {took:?}");
        let gone = std::time::Instant::now() + Duration::from_secs(2);
        let mut left = running_with(&format!("127.0.0.1:{port}"));
        while !left.is_empty() && std::time::Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(20));
            left = running_with(&format!("127.0.0.1:{port}"));
        }
        assert!(left.is_empty(), "left running: {left:?}");
    }
}
