//! The event channel: the only way a body's words reach the journal.
//!
//! The kernel listens on a Unix socket made for one run of one generation and
//! hands its path to the body (docs/contract.md, section 3). Each line the
//! body sends is checked ([`crate::journal::rules`]), stamped with the
//! generation's commit, appended and synced, and only then acknowledged. A
//! refusal writes nothing and tells the body why. An owner line is journaled
//! only if its file holds exactly the text the body sent, and its file is
//! removed after the journal has it, so a line is never lost and never taken
//! in twice.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::journal::rules::{check_body_event, check_owner_file_name, Accepted};
use crate::journal::writer::Journal;
use crate::log;
use crate::owner::OWNER_DIR;

/// Longest line a body may send.
pub const MAX_LINE: u64 = 32 * 1024 * 1024;

/// What the supervisor needs to hear of, after the journal has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Ready,
    OwnerLine,
    Replied,
    Interrupted,
    TurnEnded,
    /// Something woke the agent, or it is reasoning: it is thinking.
    Thinking,
    /// It runs the tool of this name.
    Tool(String),
    MutationRequested {
        candidate: String,
    },
}

/// The journal, shared by the channel and the supervisor's own events.
pub type SharedJournal = Arc<Mutex<Journal>>;

/// Appends an event the kernel writes itself, logging a failure.
pub fn kernel_event(journal: &SharedJournal, commit: &str, kind: &str, fields: Value) {
    log::event(kind, format!("{kind} {fields}"));
    let mut j = journal.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(e) = j.append_kernel(commit, kind, fields) {
        log::info(format!("could not journal {kind}: {e}"));
    }
}

/// One generation's channel.
pub struct Channel {
    pub home: PathBuf,
    pub commit: String,
    pub journal: SharedJournal,
    pub seen: mpsc::UnboundedSender<Seen>,
}

impl Channel {
    /// Serves every connection made to `listener` until dropped.
    pub async fn serve(self, listener: UnixListener) {
        let this = Arc::new(self);
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let this = Arc::clone(&this);
                    tokio::spawn(async move { this.connection(stream).await });
                }
                Err(e) => {
                    log::info(format!("event socket: {e}"));
                    return;
                }
            }
        }
    }

    async fn connection(&self, stream: UnixStream) {
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = match (&mut reader).take(MAX_LINE + 1).read_until(b'\n', &mut line).await {
                Ok(n) => n,
                Err(_) => return,
            };
            if n == 0 {
                return;
            }
            let too_long = line.last() != Some(&b'\n') && n as u64 > MAX_LINE;
            let answer = if too_long {
                json!({"ok": false, "error": format!("an event is at most {MAX_LINE} bytes; this connection is closed")})
            } else if line.last() != Some(&b'\n') {
                // The body closed in the middle of a line: nothing to answer.
                return;
            } else {
                self.take(&line[..line.len() - 1])
            };
            let mut out = answer.to_string().into_bytes();
            out.push(b'\n');
            if write.write_all(&out).await.is_err() || too_long {
                return;
            }
        }
    }

    /// Checks, journals and answers one line.
    fn take(&self, line: &[u8]) -> Value {
        let Ok(text) = std::str::from_utf8(line) else {
            return refuse("an event must be UTF-8 JSON".into());
        };
        let (event, accepted) = match check_body_event(text) {
            Ok(ok) => ok,
            Err(e) => return refuse(e),
        };
        match accepted {
            Accepted::Log { level, text } => {
                log::agent("body", "log", format!("{level}: {text}"));
                json!({"ok": true})
            }
            Accepted::Journal => self.append(&event, None),
            Accepted::OwnerLine { file, text } => match self.owner_file(&file, &text) {
                Ok(path) => self.append(&event, Some(&path)),
                Err(e) => refuse(e),
            },
        }
    }

    /// The owner file a body names, if it holds exactly `text`.
    fn owner_file(&self, name: &str, text: &str) -> Result<PathBuf, String> {
        check_owner_file_name(name)?;
        let path = self.home.join(OWNER_DIR).join(name);
        match std::fs::read(&path) {
            Ok(bytes) if bytes == text.as_bytes() => Ok(path),
            Ok(_) => Err(format!(
                "owner line {name}: the text sent is not what the owner wrote; send the file's content exactly"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "owner line {name}: there is no such file in {OWNER_DIR} (already taken in?)"
            )),
            Err(e) => Err(format!("owner line {name}: {e}")),
        }
    }

    fn append(&self, event: &Map<String, Value>, owner_file: Option<&Path>) -> Value {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        let result = {
            let mut j = self.journal.lock().unwrap_or_else(|p| p.into_inner());
            j.append(&self.commit, event)
        };
        let seq = match result {
            Ok(seq) => seq,
            Err(e) => {
                log::info(format!("could not journal a {kind} event: {e}"));
                return refuse(format!("the kernel could not write the journal: {e}"));
            }
        };
        if let Some(path) = owner_file {
            if let Err(e) = std::fs::remove_file(path) {
                log::info(format!(
                    "journaled owner line {} but could not remove it: {e}",
                    path.display()
                ));
            }
        }
        self.tell(&kind, event);
        json!({"ok": true, "seq": seq})
    }

    fn tell(&self, kind: &str, event: &Map<String, Value>) {
        let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let seen = match kind {
            "generation.ready" => Some(Seen::Ready),
            "owner.line" => Some(Seen::OwnerLine),
            "reply" => {
                log::agent("reply", kind, first_line(&text("text")));
                Some(Seen::Replied)
            }
            "turn.interrupted" => Some(Seen::Interrupted),
            "turn.ended" => Some(Seen::TurnEnded),
            "mutation.requested" => Some(Seen::MutationRequested { candidate: text("candidate") }),
            "tool.call" => {
                log::agent("tool", kind, text("name"));
                Some(Seen::Tool(text("name")))
            }
            "reasoning" => {
                log::agent("thinking", kind, first_line(&text("text")));
                Some(Seen::Thinking)
            }
            "stimulus" | "birth" | "tool.result" => Some(Seen::Thinking),
            _ => None,
        };
        if let Some(seen) = seen {
            let _ = self.seen.send(seen);
        }
    }
}

fn refuse(error: String) -> Value {
    json!({"ok": false, "error": error})
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut: String = line.chars().take(160).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// A place for the event socket of one run of the individual at `home`: a
/// private directory of the kernel's user, `/tmp/teneral-<uid>/<home id>/`
/// (mode 0700), and a name no other run shares. Not inside the individual:
/// a Unix socket's path has at most 107 bytes, and an individual (or a gate
/// checkout's temporary individuals) may lie deeper than that allows. Not
/// under `$XDG_RUNTIME_DIR` either: the cage hides it from bodies. One
/// directory per individual, so that the cage can one day grant a body
/// `connect` there and nowhere else.
pub fn socket_path(home: &Path, commit: &str, run: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    // A kernel under test in a gate's check is given a short name that leads
    // into the check's own cache (see `gate::socket_dir`): /tmp is not the
    // check's to write.
    let dir = match std::env::var_os(SOCKET_DIR_VAR).filter(|d| !d.is_empty()) {
        Some(given) => PathBuf::from(given).join(home_id(home)),
        None => {
            let uid = rustix::process::getuid().as_raw();
            let base = PathBuf::from(format!("/tmp/teneral-{uid}"));
            private_dir(&base, uid)?;
            base.join(home_id(home))
        }
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
    let tag: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let short = crate::commit::short(commit);
    Ok(dir.join(format!("ev-{short}-{run}-{tag}.sock")))
}

/// Makes `dir` if missing and checks it is a directory of `uid` that no one
/// else may enter: the sockets in it are a body's channel to the journal.
fn private_dir(dir: &Path, uid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory of this user; remove it and start again",
            dir.display()
        )));
    }
    Ok(())
}

/// The variable that gives a kernel the directory for its event sockets.
pub const SOCKET_DIR_VAR: &str = "TENERAL_SOCKET_DIR";

/// Twelve hex digits naming the individual at `home` (a hash of its path).
pub fn home_id(home: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(home.as_os_str().as_encoded_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Binds a fresh socket for one run at `path`, replacing a stale one. The
/// socket is bound under a hidden name and renamed into place, so `path`
/// appears only once it accepts connections.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let hidden = path.with_file_name(format!(".{name}"));
    if hidden.as_os_str().len() > 107 {
        return Err(std::io::Error::other(format!(
            "the event socket path {} is longer than a Unix socket allows (107 bytes); \
             set XDG_RUNTIME_DIR to a shorter directory",
            path.display()
        )));
    }
    let _ = std::fs::remove_file(&hidden);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(&hidden)?;
    std::fs::rename(&hidden, path)?;
    Ok(listener)
}

/// `teneral serve-events`: the channel of one generation without a
/// supervisor, so a body can be tested against the kernel's real rules.
pub async fn serve_alone(socket: &Path, home: &Path, commit: &str) -> std::io::Result<()> {
    let journal =
        Journal::open(&home.join(crate::journal::JOURNAL_PATH)).map_err(std::io::Error::other)?;
    let listener = bind(socket)?;
    let (seen, mut drain) = mpsc::unbounded_channel();
    tokio::spawn(async move { while drain.recv().await.is_some() {} });
    let channel = Channel {
        home: home.to_owned(),
        commit: commit.to_owned(),
        journal: Arc::new(Mutex::new(journal)),
        seen,
    };
    channel.serve(listener).await;
    Ok(())
}
