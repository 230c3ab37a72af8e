//! Which ref is the species (`TENERAL_UPSTREAM`), and the kernel's own
//! fetch of it.
//!
//! A species on a remote is fetched each time a mutation from the species is
//! judged, with git2 in the main repository: only `refs/heads/<branch>` into
//! `refs/remotes/<remote>/<branch>`, no tags, no credentials (a remote that
//! asks for one is refused), at most [`FETCH_LIMIT`] (on a thread of its own
//! that is left behind when it hangs past the limit). The kernel never
//! pushes and never changes a remote's address. A local branch is never
//! fetched. Over http and https the kernel speaks git's protocol with its
//! own client ([`super::transport`]), not libgit2's, which needs OpenSSL.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git2::{AutotagOption, FetchOptions, Oid, RemoteCallbacks, Repository};

/// The longest a fetch of the species may take.
pub const FETCH_LIMIT: Duration = Duration::from_secs(60);

/// The species ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    Remote { remote: String, branch: String },
    Local { branch: String },
}

impl Upstream {
    /// As the owner writes it.
    pub fn name(&self) -> String {
        match self {
            Upstream::Remote { remote, branch } => format!("{remote}/{branch}"),
            Upstream::Local { branch } => branch.clone(),
        }
    }

    /// The full name of the ref the species' tip is read from.
    pub fn refname(&self) -> String {
        match self {
            Upstream::Remote { remote, branch } => format!("refs/remotes/{remote}/{branch}"),
            Upstream::Local { branch } => format!("refs/heads/{branch}"),
        }
    }
}

/// Which ref `setting` names, given the repository's remotes and the branch
/// its checkout is on: `<remote>/<branch>` when the first part is a remote,
/// else a local branch; unset, `origin/main` when there is an `origin`,
/// else the current branch.
pub fn resolve(
    setting: Option<&str>,
    remotes: &[String],
    current: Option<&str>,
) -> Result<Upstream, String> {
    let Some(name) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
        if remotes.iter().any(|r| r == "origin") {
            return Ok(Upstream::Remote { remote: "origin".into(), branch: "main".into() });
        }
        return match current {
            Some(branch) => Ok(Upstream::Local { branch: branch.to_owned() }),
            None => Err("there is no species: no remote origin, and the checkout is on no \
                         branch; the owner sets TENERAL_UPSTREAM in .env to name one"
                .into()),
        };
    };
    if let Some((first, rest)) = name.split_once('/') {
        if remotes.iter().any(|r| r == first) && !rest.is_empty() {
            return Ok(Upstream::Remote { remote: first.to_owned(), branch: rest.to_owned() });
        }
    }
    Ok(Upstream::Local { branch: name.to_owned() })
}

/// Why the species' tip cannot be had. None of these is a verdict.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("the species {name} could not be fetched within {secs} s; ask for the mutation again when the network is back")]
    Timeout { name: String, secs: u64 },
    #[error("the species {name} could not be fetched ({source}); see that the remote is reachable (git fetch {remote} {branch}) and ask for the mutation again")]
    Fetch { name: String, remote: String, branch: String, source: git2::Error },
    #[error("the species ref {refname} is not in the repository ({source}); set TENERAL_UPSTREAM in .env to a branch that exists")]
    NoRef { refname: String, source: git2::Error },
    #[error("the fetch of the species could not run: {0}; ask for the mutation again")]
    Join(String),
}

/// The species' tip: fetched first when it is on a remote.
pub async fn tip(home: &Path, upstream: &Upstream, limit: Duration) -> Result<Oid, FetchError> {
    if let Upstream::Remote { remote, branch } = upstream {
        // On this thread, before any fetch's thread exists (species/sys.rs).
        super::transport::install(FETCH_LIMIT).map_err(|e| FetchError::Join(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            // A thread of its own, not the runtime's blocking pool: a fetch
            // stuck where no callback runs (connecting) is left behind, and
            // nothing, not even the runtime's shutdown, waits for it.
            let (home, remote, branch, stop) =
                (home.to_owned(), remote.clone(), branch.clone(), stop.clone());
            std::thread::Builder::new()
                .name("species-fetch".into())
                .spawn(move || {
                    let _ = tx.send(fetch(&home, &remote, &branch, limit, &stop));
                })
                .map_err(|e| FetchError::Join(e.to_string()))?;
        }
        match tokio::time::timeout(limit, rx).await {
            Err(_) => {
                // The fetch sees the flag at its next callback.
                stop.store(true, Ordering::Relaxed);
                return Err(FetchError::Timeout { name: upstream.name(), secs: limit.as_secs() });
            }
            Ok(Err(e)) => return Err(FetchError::Join(e.to_string())),
            Ok(Ok(Err(source))) => {
                let name = upstream.name();
                let (remote, branch) = (remote.clone(), branch.clone());
                return Err(FetchError::Fetch { name, remote, branch, source });
            }
            Ok(Ok(Ok(()))) => {}
        }
    }
    let repo = Repository::open(home)
        .map_err(|source| FetchError::NoRef { refname: upstream.refname(), source })?;
    let refname = upstream.refname();
    repo.refname_to_id(&refname)
        .and_then(|oid| repo.find_commit(oid).map(|c| c.id()))
        .map_err(|source| FetchError::NoRef { refname, source })
}

/// `git fetch <remote> <branch>` with git2, in the main repository at `home`.
fn fetch(
    home: &PathBuf,
    remote: &str,
    branch: &str,
    limit: Duration,
    stop: &AtomicBool,
) -> Result<(), git2::Error> {
    let repo = Repository::open(home)?;
    let mut origin = repo.find_remote(remote)?;
    let deadline = Instant::now() + limit;
    let going = || !stop.load(Ordering::Relaxed) && Instant::now() < deadline;
    let mut callbacks = RemoteCallbacks::new();
    callbacks.transfer_progress(|_| going());
    callbacks.sideband_progress(|_| going());
    callbacks.credentials(|url, _, _| {
        Err(git2::Error::from_str(&format!(
            "{url} asks for credentials; the kernel fetches the species only from a remote that \
             needs none"
        )))
    });
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks).download_tags(AutotagOption::None).update_fetchhead(false);
    let refspec = format!("+refs/heads/{branch}:refs/remotes/{remote}/{branch}");
    origin.fetch(&[refspec.as_str()], Some(&mut options), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that answers every connection with `answer`.
    fn serve(answer: &'static [u8]) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                let mut request = [0u8; 4096];
                let _ = std::io::Read::read(&mut conn, &mut request);
                let _ = std::io::Write::write_all(&mut conn, answer);
            }
        });
        port
    }

    /// `fetch` of `origin/main` from `url` into a new repository.
    fn fetch_from(url: &str) -> git2::Error {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let repo = Repository::init(dir.path()).expect("git init");
        repo.remote("origin", url).expect("a remote");
        super::super::transport::install(FETCH_LIMIT).expect("the transport registers");
        let stop = AtomicBool::new(false);
        let limit = Duration::from_secs(20);
        fetch(&dir.path().to_owned(), "origin", "main", limit, &stop).expect_err("no species there")
    }

    /// An owner's origin is most often an https address: git2 is built
    /// without TLS, so the kernel's own transport must take it. Here it
    /// meets a loopback server that speaks no TLS: the fetch fails in the
    /// TLS handshake of our request, not with libgit2's "unsupported URL
    /// protocol".
    #[test]
    fn an_https_remote_is_fetched_by_the_kernels_own_transport() {
        let port = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain");
        let url = format!("https://127.0.0.1:{port}/species.git");
        let err = fetch_from(&url);
        let text = err.message();
        assert!(!text.contains("unsupported URL protocol"), "{text}");
        assert!(text.contains(&format!("{url}/info/refs?service=git-upload-pack")), "{text}");
    }

    /// A remote that asks for credentials is refused, none is sent.
    #[test]
    fn a_remote_asking_for_credentials_is_refused() {
        let port = serve(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\n\
              Content-Length: 0\r\n\r\n",
        );
        let err = fetch_from(&format!("http://127.0.0.1:{port}/species.git"));
        assert!(err.message().contains("asks for credentials"), "{}", err.message());
    }

    fn remotes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn which_ref_is_the_species() {
        let remote = |r: &str, b: &str| Upstream::Remote { remote: r.into(), branch: b.into() };
        let local = |b: &str| Upstream::Local { branch: b.into() };
        let table = [
            (None, &["origin"][..], Some("main"), Ok(remote("origin", "main"))),
            (None, &["upstream"][..], Some("dev"), Ok(local("dev"))),
            (None, &[][..], Some("main"), Ok(local("main"))),
            (Some(""), &["origin"][..], None, Ok(remote("origin", "main"))),
            (Some("origin/dev"), &["origin"][..], None, Ok(remote("origin", "dev"))),
            (Some("up/feat/x"), &["origin", "up"][..], None, Ok(remote("up", "feat/x"))),
            (Some("main"), &["origin"][..], None, Ok(local("main"))),
            // The first part is not a remote: a local branch with a slash.
            (Some("team/main"), &["origin"][..], None, Ok(local("team/main"))),
        ];
        for (setting, names, current, want) in table {
            assert_eq!(resolve(setting, &remotes(names), current), want, "{setting:?}");
        }
        let none = resolve(None, &[], None).expect_err("no species");
        assert!(none.contains("sets TENERAL_UPSTREAM"), "{none}");
        assert_eq!(remote("origin", "main").refname(), "refs/remotes/origin/main");
        assert_eq!(local("main").refname(), "refs/heads/main");
    }
}
