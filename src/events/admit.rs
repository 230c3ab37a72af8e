//! Who may use a generation's event channel: its own body, nobody else.
//!
//! The socket's path is not a secret (it is in the journal, in
//! `/proc/net/unix`), so the kernel checks each connection's peer, as the
//! operating system reports it (`SO_PEERCRED`, taken at `connect`), against
//! the body it started: the peer must be the body's process, one of its
//! descendants (its parent chain, read from `/proc/<pid>/stat`, reaches the
//! body within [`MAX_LINEAGE`] steps), or a process in the body's own unit
//! cgroup when the body runs as a systemd unit. A connection made before the
//! supervisor names the body ([`Admit::set_body`]) waits for it, a bounded
//! time, and is then judged as any other: a body may connect the moment it
//! starts, before its starter has learned its pid.
//!
//! A pid names a process only while it runs: one that connected and ended
//! could have its pid taken by a process of the body's before the kernel
//! reads `/proc`. Where Linux hands out the peer's pidfd (`SO_PEERPIDFD`,
//! 6.5 and later), the facts read are kept only if that process still runs
//! after they were read; a peer that ended first is refused
//! ([`Refusal::Ended`]).
//!
//! Invariants: the decision ([`decide`]) is pure over what was read; a peer
//! whose facts cannot be read is refused; the kernel's own cgroup never
//! counts as a body's (a body run directly shares it).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use teneral_core::log;

/// How many parents are followed from a peer before giving up.
pub const MAX_LINEAGE: usize = 64;

/// A connection's peer, as the kernel found it when it accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: Option<u32>,
    pub uid: u32,
    /// The peer's pid, then its parent, its grandparent, ... as far as
    /// they could be read, at most [`MAX_LINEAGE`] of them.
    pub lineage: Vec<u32>,
    /// The peer's cgroup path, when it could be read.
    pub cgroup: Option<String>,
    /// The process that connected had ended by the time its facts were
    /// read (so they may be another process's).
    pub ended: bool,
}

/// The body a channel serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub pid: u32,
    /// The cgroup of the body's own systemd unit, when it runs as one.
    pub cgroup: Option<String>,
}

/// Whom a channel admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// No body yet: everyone is refused.
    Nobody,
    /// Anyone who can reach the socket (`teneral serve-events`, a test tool).
    Anyone,
    Body(Body),
}

/// Why a peer was refused; the text is sent to it before the connection closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "refused: this generation's body has not started yet; only its body, once started, \
         may connect"
    )]
    NotStarted,
    #[error(
        "refused: the connection carries no process id; only this generation's body may connect"
    )]
    NoPid,
    #[error(
        "refused: process {pid} (uid {uid}) is not this generation's body (pid {body}), a \
         descendant of it, or in its unit; this socket serves that generation alone"
    )]
    Foreign { pid: u32, uid: u32, body: u32 },
    #[error(
        "refused: process {pid}, which connected, ended before it could be judged; only this \
         generation's body may connect"
    )]
    Ended { pid: u32 },
}

/// Decides whether `peer` may use a channel that admits `who`.
pub fn decide(who: &Who, peer: &Peer) -> Result<(), Refusal> {
    let body = match who {
        Who::Anyone => return Ok(()),
        Who::Nobody => return Err(Refusal::NotStarted),
        Who::Body(body) => body,
    };
    let Some(pid) = peer.pid.filter(|p| *p > 0) else { return Err(Refusal::NoPid) };
    if peer.ended {
        return Err(Refusal::Ended { pid });
    }
    if pid == body.pid || peer.lineage.iter().take(MAX_LINEAGE).any(|p| *p == body.pid) {
        return Ok(());
    }
    let in_unit = match (&body.cgroup, &peer.cgroup) {
        (Some(unit), Some(theirs)) => {
            theirs == unit || theirs.strip_prefix(unit.as_str()).is_some_and(|r| r.starts_with('/'))
        }
        _ => false,
    };
    if in_unit {
        return Ok(());
    }
    Err(Refusal::Foreign { pid, uid: peer.uid, body: body.pid })
}

/// The parent pid in the text of `/proc/<pid>/stat`. The command name (in
/// parentheses) may hold anything, so fields are counted after its last `)`.
pub fn parse_parent(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// The cgroup path in the text of `/proc/<pid>/cgroup`: the unified
/// hierarchy's (`0::/...`), else systemd's own on a hybrid system.
pub fn parse_cgroup(text: &str) -> Option<String> {
    let line = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_owned);
    line("0::").filter(|p| p != "/").or_else(|| line("1:name=systemd:"))
}

/// Whether `cgroup` is the own cgroup of the systemd unit `unit`: its last
/// part names the unit, and it is not the kernel's own (`kernel`).
pub fn is_unit_cgroup(cgroup: &str, unit: &str, kernel: Option<&str>) -> bool {
    let last = cgroup.rsplit('/').next().unwrap_or_default();
    let named = !unit.is_empty() && (last == unit || last == format!("{unit}.service"));
    named && Some(cgroup) != kernel
}

/// `pid`, then its parents as far as `/proc` tells, at most [`MAX_LINEAGE`].
fn lineage(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut at = pid;
    while out.len() < MAX_LINEAGE && at > 1 {
        let stat = std::fs::read_to_string(format!("/proc/{at}/stat")).unwrap_or_default();
        match parse_parent(&stat) {
            Some(parent) if parent > 0 => {
                out.push(parent);
                at = parent;
            }
            _ => break,
        }
    }
    out
}

fn cgroup_of(pid: &str) -> Option<String> {
    parse_cgroup(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)
}

impl Peer {
    /// What `/proc` tells of the process whose credentials a connection carries.
    pub fn of(pid: Option<i32>, uid: u32) -> Self {
        let pid = pid.and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0);
        Peer {
            pid,
            uid,
            lineage: pid.map(lineage).unwrap_or_default(),
            cgroup: pid.and_then(|p| cgroup_of(&p.to_string())),
            ended: false,
        }
    }

    /// A peer of whom nothing could be learned: refused by every body.
    pub fn unknown() -> Self {
        Peer { pid: None, uid: u32::MAX, lineage: vec![], cgroup: None, ended: false }
    }

    /// What Linux and `/proc` tell of the process that made `socket`'s
    /// connection: its credentials, then its facts, then whether its pidfd
    /// says it has ended since (on a Linux without `SO_PEERPIDFD`, the pid
    /// alone, as before).
    pub fn of_connection(socket: &tokio::net::UnixStream) -> Self {
        // tokio's credentials, not rustix's: a peer in a PID namespace this
        // process cannot see has pid 0, which rustix's `Pid` cannot hold.
        let Ok(cred) = socket.peer_cred() else { return Peer::unknown() };
        let pidfd = crate::sys::peer_pidfd(socket.as_fd());
        let mut peer = Peer::of(cred.pid(), cred.uid());
        peer.ended = match pidfd {
            Ok(pidfd) => has_ended(&pidfd),
            Err(e) => e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()),
        };
        peer
    }
}

/// Whether the process `pidfd` names has ended (its pidfd reads as ready).
/// A pidfd that cannot be asked counts as ended: its facts are refused,
/// not trusted.
fn has_ended(pidfd: &OwnedFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&now)).map_or(true, |ready| ready > 0)
}

/// A channel's admission, shared between the channel and the supervisor:
/// cheap to clone, set once the body's pid is known.
#[derive(Debug, Clone)]
pub struct Admit(Arc<watch::Sender<Who>>);

impl Default for Admit {
    fn default() -> Self {
        Self::new()
    }
}

impl Admit {
    /// Refuses everyone until [`Admit::set_body`].
    pub fn new() -> Self {
        Admit(Arc::new(watch::Sender::new(Who::Nobody)))
    }

    /// Admits anyone who can reach the socket. Only for `teneral
    /// serve-events`, where a test drives a body by hand.
    pub fn anyone() -> Self {
        Admit(Arc::new(watch::Sender::new(Who::Anyone)))
    }

    /// Admits the body started as `pid` and its descendants; with `unit`
    /// (the systemd unit it runs in), also every process of that unit's
    /// cgroup, read now from the body's `/proc/<pid>/cgroup`.
    pub fn set_body(&self, pid: u32, unit: Option<&str>) {
        let cgroup = unit.and_then(|unit| {
            let theirs = cgroup_of(&pid.to_string())?;
            let kernel = cgroup_of("self");
            if is_unit_cgroup(&theirs, unit, kernel.as_deref()) {
                Some(theirs)
            } else {
                log::info(format!(
                    "event socket: the body's cgroup {theirs} is not unit {unit}'s own; \
                     admitting its process tree only"
                ));
                None
            }
        });
        self.0.send_replace(Who::Body(Body { pid, cgroup }));
    }

    /// Whether `peer` may use the channel now.
    pub fn check(&self, peer: &Peer) -> Result<(), Refusal> {
        decide(&self.0.borrow(), peer)
    }

    /// Whether `peer` may use the channel, once the body is named: waits
    /// for [`Admit::set_body`] at most `within`, then decides (so a peer
    /// still unjudged then is refused as [`Refusal::NotStarted`]).
    pub async fn check_when_named(&self, peer: &Peer, within: Duration) -> Result<(), Refusal> {
        let mut named = self.0.subscribe();
        let _ = tokio::time::timeout(within, named.wait_for(|who| *who != Who::Nobody)).await;
        self.check(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(pid: u32, lineage: &[u32], cgroup: Option<&str>) -> Peer {
        Peer {
            pid: Some(pid),
            uid: 1000,
            lineage: lineage.to_vec(),
            cgroup: cgroup.map(Into::into),
            ended: false,
        }
    }

    #[test]
    fn decide_table() {
        let unit = "/user.slice/user@1000.service/app.slice/teneral-gen-abc.service";
        let body =
            |cgroup: Option<&str>| Who::Body(Body { pid: 100, cgroup: cgroup.map(Into::into) });
        let foreign = Err(Refusal::Foreign { pid: 300, uid: 1000, body: 100 });
        let table: Vec<(Who, Peer, Result<(), Refusal>)> = vec![
            (Who::Anyone, peer(300, &[300, 1], None), Ok(())),
            (Who::Nobody, peer(100, &[100, 1], None), Err(Refusal::NotStarted)),
            (body(None), peer(100, &[100, 50, 1], None), Ok(())),
            (body(None), peer(300, &[300, 200, 100, 50, 1], None), Ok(())),
            (body(None), peer(300, &[300, 50, 1], None), foreign.clone()),
            (body(None), peer(300, &[300, 50, 1], Some(unit)), foreign.clone()),
            (body(Some(unit)), peer(300, &[300, 1], Some(unit)), Ok(())),
            (body(Some(unit)), peer(300, &[300, 1], Some(&format!("{unit}/sub"))), Ok(())),
            (body(Some(unit)), peer(300, &[300, 1], Some(&format!("{unit}x"))), foreign.clone()),
            (body(Some(unit)), peer(300, &[300, 1], None), foreign),
            (
                body(None),
                Peer { pid: None, uid: 0, lineage: vec![], cgroup: None, ended: false },
                Err(Refusal::NoPid),
            ),
            (
                body(None),
                Peer { ended: true, ..peer(100, &[100, 50, 1], None) },
                Err(Refusal::Ended { pid: 100 }),
            ),
            (Who::Anyone, Peer { ended: true, ..peer(300, &[300, 1], None) }, Ok(())),
        ];
        for (who, peer, want) in table {
            assert_eq!(decide(&who, &peer), want, "{who:?} {peer:?}");
        }
    }

    /// A process that connects and ends before the kernel reads its facts
    /// is refused as ended, where Linux hands out the peer's pidfd; a live
    /// one (this test itself) is not.
    #[tokio::test]
    async fn a_peer_that_ended_before_it_was_judged_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let path = dir.path().join("events.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("the socket binds");
        let connect =
            "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])";
        crate::spawn::start_reaper_of_own_children().expect("the reaper starts");
        let spec = crate::spawn::Spec::new("/usr/bin/python3", "/").arg("-c").arg(connect);
        let mut peer = crate::spawn::spawn(spec.arg(&path)).expect("python3 starts");
        assert_eq!(peer.wait().await, crate::spawn::Exit::Code(0), "it connected and ended");
        let (gone, _) = listener.accept().await.expect("its connection waits in the backlog");
        let live = tokio::net::UnixStream::connect(&path).await.expect("this test connects");
        let (here, _) = listener.accept().await.expect("and is accepted");

        let who = Who::Body(Body { pid: std::process::id(), cgroup: None });
        let ours = Peer::of_connection(&here);
        assert!(!ours.ended, "{ours:?}");
        assert_eq!(decide(&who, &ours), Ok(()));
        let theirs = Peer::of_connection(&gone);
        match crate::sys::peer_pidfd(gone.as_fd()) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOPROTOOPT.raw_os_error()) => {
                eprintln!("skipped: this Linux has no SO_PEERPIDFD (6.5 and later have)");
            }
            _ => {
                let pid = theirs.pid.unwrap_or_default();
                assert!(theirs.ended, "{theirs:?}");
                assert_eq!(decide(&who, &theirs), Err(Refusal::Ended { pid }));
            }
        }
        drop(live);
    }

    #[test]
    fn a_lineage_past_the_bound_does_not_count() {
        let mut lineage: Vec<u32> = (1000..1000 + MAX_LINEAGE as u32).collect();
        lineage.push(100);
        let who = Who::Body(Body { pid: 100, cgroup: None });
        assert!(decide(&who, &peer(1000, &lineage, None)).is_err());
    }

    #[test]
    fn parse_parent_table() {
        let table = [
            ("42 (bash) S 7 42 42 0 -1", Some(7)),
            ("42 (a) b) R 9 1 1", Some(9)),
            ("42 (x\n) 1 2) S 3 4", Some(3)),
            ("42 (bash) S", None),
            ("garbage", None),
        ];
        for (stat, want) in table {
            assert_eq!(parse_parent(stat), want, "{stat:?}");
        }
    }

    #[test]
    fn cgroup_table() {
        let v2 = "0::/user.slice/u.service/app.slice/t.service\n";
        let hybrid = "9:name=systemd:/\n1:name=systemd:/a/t.service\n0::/\n";
        assert_eq!(parse_cgroup(v2).as_deref(), Some("/user.slice/u.service/app.slice/t.service"));
        assert_eq!(parse_cgroup(hybrid).as_deref(), Some("/a/t.service"));
        assert_eq!(parse_cgroup("4:memory:/x\n"), None);
        assert!(is_unit_cgroup("/a/t.service", "t", None));
        assert!(is_unit_cgroup("/a/t.service", "t.service", Some("/a/k.service")));
        assert!(!is_unit_cgroup("/a/t.service", "t", Some("/a/t.service")), "the kernel's own");
        assert!(!is_unit_cgroup("/a/other.service", "t", None));
        assert!(!is_unit_cgroup("/a/t.service", "", None));
    }
}
