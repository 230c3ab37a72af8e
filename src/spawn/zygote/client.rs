//! The kernel's side of the zygote: starting it, holding the spare it
//! hands over, and sending each launch to the spare or to the zygote.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{read_answer, recv, send, spare_message, Request, CGROUP_PROCS, SPARE};

/// A running zygote, as its starter holds it.
pub struct Zygote {
    socket: UnixStream,
    helper: PathBuf,
    pid: u32,
    spare: Mutex<SpareSlot>,
    fits: Fits,
}

/// Whether a spare can take the launch the helper's arguments describe
/// (the cage's rule: `confine::zygote::fits`).
pub type Fits = fn(&[OsString]) -> bool;

/// The spare the zygote handed over, and whether one is on its way.
struct SpareSlot {
    held: Option<Spare>,
    coming: bool,
}

/// A launch made ahead: its process (the helper, supervising the cage's
/// first process) and the first process's socket.
struct Spare {
    pid: u32,
    socket: UnixStream,
}

/// How long the kernel waits for the zygote's word, or a spare's, before
/// it takes it for gone (a fork and a few namespaces take milliseconds).
const SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl Zygote {
    /// Starts `helper zygote --source <source>` (the lean helper program,
    /// `teneral-confine`), which dies with the calling thread; `fits` says
    /// which launches its spares take. Call it from the thread that starts
    /// every launch (the kernel's main thread).
    pub fn start(helper: &Path, source: &str, fits: Fits) -> io::Result<Zygote> {
        let (ours, theirs) = UnixStream::pair()?;
        // A zygote that says nothing for this long is taken for gone,
        // rather than holding the kernel's launches forever.
        ours.set_read_timeout(Some(SILENCE))?;
        let pid = crate::spawn::start_zygote_process(helper, source, OwnedFd::from(theirs))?;
        // The zygote hands over its first spare unasked.
        let spare = Mutex::new(SpareSlot { held: None, coming: true });
        Ok(Zygote { socket: ours, helper: helper.to_owned(), pid, spare, fits })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The helper program whose launches this zygote takes.
    pub fn helper(&self) -> &Path {
        &self.helper
    }

    /// Has `request` started, by the spare when it fits one, else by the
    /// zygote; the pid of the launch's process, a child of this process in
    /// a process group of its own.
    pub fn launch(&self, request: &Request) -> io::Result<u32> {
        let mut slot = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if slot.coming {
            slot.coming = false;
            slot.held = self.receive_spare()?;
        }
        let spare = if (self.fits)(&request.args) { slot.held.take() } else { None };
        let pid = match spare.and_then(|spare| through_spare(spare, request)) {
            Some(launched) => launched,
            None => send(&self.socket, request).and_then(|()| read_answer(&self.socket)),
        };
        // The next spare, made while this launch goes on. A zygote that is
        // gone fails the next launch, not this one, which has started.
        if slot.held.is_none() {
            slot.coming = send(&self.socket, &spare_message(Vec::new(), Vec::new())).is_ok();
        }
        pid
    }

    /// The zygote's next message, a spare handed over (`None`: it could
    /// not make one, and said why on its stderr).
    fn receive_spare(&self) -> io::Result<Option<Spare>> {
        let Some(mut message) = recv(&self.socket)? else {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the zygote has ended"));
        };
        if message.args.first().is_none_or(|a| a != SPARE) {
            return Err(io::Error::other("the zygote sent something else than a spare"));
        }
        let pid = message.args.get(1).and_then(|p| p.to_str()?.parse::<u32>().ok());
        Ok(pid
            .zip(message.fds.pop())
            .map(|(pid, (_, socket))| Spare { pid, socket: UnixStream::from(socket) }))
    }
}

/// `request` sent to `spare` once it is ready; `None` when it has died
/// (the zygote then forks a fresh launch).
fn through_spare(spare: Spare, request: &Request) -> Option<io::Result<u32>> {
    let mut ready = [0u8; 1];
    spare.socket.set_read_timeout(Some(SILENCE)).ok()?;
    (&spare.socket).read_exact(&mut ready).ok()?;
    if let Err(e) = move_into_cgroups(request, spare.pid) {
        return Some(Err(e));
    }
    send(&spare.socket, request).ok()?;
    Some(Ok(spare.pid))
}

/// Moves a spare's helper, forked before its launch was asked for, into
/// the cgroups the request names ([`CGROUP_PROCS`]), before the
/// cage's first process gets the request: that one enters them itself,
/// first.
fn move_into_cgroups(request: &Request, pid: u32) -> io::Result<()> {
    let named = request.env.iter().find(|(key, _)| key == CGROUP_PROCS);
    let Some((_, named)) = named else { return Ok(()) };
    for procs in named.to_string_lossy().lines().filter(|l| !l.is_empty()) {
        std::fs::write(procs, pid.to_string()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot move the cage's helper into the cgroup {procs}: {e}"),
            )
        })?;
    }
    Ok(())
}
