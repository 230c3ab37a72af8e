//! The zygote: one `teneral-confine zygote` per kernel that forks each
//! confined launch, so that no launch pays for executing the helper, and
//! whose spare has made the costly namespaces before the launch is asked
//! for (the kernel's side is `crate::spawn::zygote`).
//!
//! - The zygote is single-threaded, reads requests on its stdin (a Unix
//!   socket only the kernel holds) and answers each with the pid of the
//!   launch's process. Every process it makes is cloned with `CLONE_PARENT`
//!   (`sys::fork_sibling`): the kernel's child, reaped and signalled by the
//!   kernel, in a process group of its own, with SIGKILL as its
//!   parent-death signal; so no cage outlives the kernel, as before.
//! - The spare: one launch made ahead, which has made its own network
//!   namespace (loopback up), the user namespace (not root) or the one
//!   its task limit counts in (root) and a PID namespace, and has forked
//!   into it: the helper supervises outside ([`super::init`]), and the
//!   cage's first process waits for one request on a socket of its own. The zygote
//!   hands that socket and the helper's pid to the kernel, which sends a
//!   request that fits straight to the spare (one hand-off, not two), moves
//!   the helper into the launch's cgroups first, and asks for the next
//!   spare. A spare takes exactly one launch: a namespace made ahead is
//!   never used by two, so no check can reach another through loopback or
//!   abstract sockets. Only the first process takes the request's
//!   descriptors: the helper's own rare words (a supervisor that cannot
//!   confine itself) go to the zygote's stderr.
//! - A launch the spare cannot take (the host's network, forwarded ports,
//!   a test's pretended missing feature) is forked fresh and makes every
//!   namespace itself, as the executed helper does.
//!
//! Either way the launch then runs the helper's own code
//! ([`super::helper::run`]) with the request's descriptors, environment
//! and working directory: every wall is the same.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::process::{Pid, Signal};

use super::plan::{Net, Plan};
use super::{helper, init, sys, EXIT_NAMESPACES, EXIT_USAGE};
use crate::spawn::zygote::{answer, recv, send, spare_message, Request, SPARE};

/// What a spare made ahead of its launch.
#[derive(Default)]
pub struct Ahead {
    /// The user namespace root's body counts its task limit in.
    pub counted: Option<OwnedFd>,
    /// This process is in a user namespace of its own already.
    pub user: bool,
    /// This process is in a network namespace of its own, loopback up.
    pub net: bool,
    /// This process is the first of a PID namespace of its own, and the
    /// helper outside supervises it.
    pub inside: Option<init::Inside>,
    /// What failed while making them: the launch fails with it.
    pub failed: Option<String>,
}

impl Ahead {
    /// The descriptors this holds, which the launch keeps to itself.
    pub fn fds(&self) -> Vec<i32> {
        let mut fds: Vec<i32> = self.counted.iter().map(AsRawFd::as_raw_fd).collect();
        fds.extend(self.inside.as_ref().map(init::Inside::fd));
        fds
    }

    /// Makes the namespaces a loopback-only launch needs before its plan
    /// is known, in the order the helper makes them, then forks into the
    /// PID namespace: returns in the cage's first process (the helper
    /// supervises and never returns, holding none of the zygote's
    /// descriptors: the spare's socket reaches the first process alone).
    fn make() -> Ahead {
        let mut ahead = Ahead::default();
        if let Err(e) = ahead.fill() {
            ahead.failed = Some(e);
        }
        ahead
    }

    fn fill(&mut self) -> Result<(), String> {
        if rustix::process::getuid().is_root() {
            let fd = sys::user_namespace_fd(super::identity::EVERY_ID_BUT_ROOT)
                .map_err(|e| format!("cannot make the user namespace of the task limit: {e}"))?;
            self.counted = Some(fd);
        }
        if !super::namespaces::has_sys_admin() {
            super::namespaces::enter_user()?;
            self.user = true;
        }
        crate::sys::unshare(rustix::thread::UnshareFlags::NEWNET)
            .map_err(|e| format!("cannot make a network namespace: {e}"))?;
        crate::sys::loopback_up().map_err(|e| format!("cannot bring loopback up: {e}"))?;
        self.net = true;
        crate::sys::unshare(rustix::thread::UnshareFlags::NEWPID)
            .map_err(|e| format!("cannot make a PID namespace: {e}"))?;
        self.inside = Some(init::fork_first()?);
        Ok(())
    }
}

/// `teneral-confine zygote`: hands the kernel a spare, then serves
/// requests on stdin until the kernel closes it; returns the exit status.
pub fn main() -> i32 {
    let kernel = match take_stdin() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("teneral-confine zygote: stdin: {e}; the kernel starts it with a socket");
            return EXIT_USAGE;
        }
    };
    // Its parent is the kernel, which every launch's process must have too.
    let kernel_pid = rustix::process::getppid();
    if hand_over_spare(&kernel, kernel_pid).is_err() {
        return 0;
    }
    loop {
        let request = match recv(&kernel) {
            Ok(Some(request)) => request,
            Ok(None) => return 0,
            // The kernel closed its end with a spare unread: it has stopped.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return 0,
            Err(e) => {
                eprintln!("teneral-confine zygote: a request could not be read: {e}");
                return EXIT_USAGE;
            }
        };
        if request.args.first().is_some_and(|a| a == SPARE) {
            if hand_over_spare(&kernel, kernel_pid).is_err() {
                return 0;
            }
            continue;
        }
        let result = launch(request, &kernel, kernel_pid);
        if answer(&kernel, result).is_err() {
            return 0;
        }
    }
}

/// Makes a spare and sends the kernel its pid and socket (`spare <pid>`),
/// or `spare` alone when it cannot (and says why on stderr). `Err` when
/// the kernel is gone.
fn hand_over_spare(kernel: &UnixStream, kernel_pid: Option<Pid>) -> std::io::Result<()> {
    let message = match make_spare(kernel, kernel_pid) {
        Ok((pid, socket)) => {
            spare_message(vec![pid.to_string().into()], vec![(0, OwnedFd::from(socket))])
        }
        Err(e) => {
            eprintln!("teneral-confine zygote: no spare: {e}");
            spare_message(Vec::new(), Vec::new())
        }
    };
    send(kernel, &message)
}

/// Fd 0 (the kernel's socket) moved to a close-on-exec descriptor, with
/// /dev/null left at 0.
fn take_stdin() -> std::io::Result<OwnedFd> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned()?;
    let null = OwnedFd::from(std::fs::File::open("/dev/null")?);
    sys::dup_to(&null, 0)?;
    Ok(fd)
}

/// The plan's arguments of a request (`confine [--source ID] plan -- argv`),
/// checked to come from this program's sources.
fn plan_args(args: &[OsString]) -> Result<&[OsString], String> {
    let rest = match args.split_first() {
        Some((first, rest)) if first == "confine" => rest,
        _ => return Err("a request starts with `confine`".into()),
    };
    match rest {
        [flag, id, rest @ ..] if flag == "--source" => {
            if id != super::host::SOURCE_ID {
                return Err(format!(
                    "the zygote was built from other sources ({}) than the kernel ({}); build \
                     both programs again: cargo build --bins",
                    super::host::SOURCE_ID,
                    id.to_string_lossy()
                ));
            }
            Ok(rest)
        }
        rest => Ok(rest),
    }
}

/// Whether a spare can take the launch the helper's arguments `args`
/// describe (`confine [--source ID] plan -- argv`, of these sources).
pub fn fits(args: &[OsString]) -> bool {
    plan_args(args).is_ok_and(|rest| Plan::from_args(rest).is_ok_and(|(plan, _)| spare_fits(&plan)))
}

/// Whether a spare can take the launch of `plan`: loopback only, nothing
/// forwarded (the relay is forked in the kernel's network), nothing
/// pretended missing.
pub fn spare_fits(plan: &Plan) -> bool {
    plan.net == Net::Loopback && plan.forward.is_empty() && plan.pretend_missing.is_empty()
}

/// Forks a fresh launch, which makes every namespace itself.
fn launch(request: Request, kernel: &UnixStream, kernel_pid: Option<Pid>) -> Result<i32, String> {
    plan_args(&request.args)?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    match sys::fork_sibling().map_err(|e| format!("cannot fork the launch: {e}"))? {
        Some(pid) => {
            drop(write);
            // Answered once it has its own group, so that the kernel's
            // first signal to the group reaches it (or once it has ended).
            let _ = rustix::io::read(&read, &mut [0u8; 1]);
            Ok(pid)
        }
        None => {
            sys::close_in_child(kernel.as_raw_fd());
            drop(read);
            if let Err(e) = as_kernels_child(kernel_pid) {
                eprintln!("teneral-confine zygote: launch: {e}");
                std::process::exit(EXIT_NAMESPACES)
            }
            let _ = rustix::io::write(&write, &[1]);
            drop(write);
            std::process::exit(become_launch(request, Ahead::default()))
        }
    }
}

/// Forks a spare: its pid, and the socket on which it says it is ready and
/// takes its request.
fn make_spare(kernel: &UnixStream, kernel_pid: Option<Pid>) -> std::io::Result<(i32, UnixStream)> {
    let (ours, theirs) = UnixStream::pair()?;
    match sys::fork_sibling()? {
        Some(pid) => Ok((pid, ours)),
        None => {
            sys::close_in_child(kernel.as_raw_fd());
            sys::close_in_child(ours.as_raw_fd());
            std::mem::forget(ours);
            std::process::exit(spare_main(theirs, kernel_pid))
        }
    }
}

/// The spare: its own process group and the kernel's death first, then
/// the namespaces and the fork into the PID namespace, then (in the first
/// process) one request.
fn spare_main(socket: UnixStream, kernel_pid: Option<Pid>) -> i32 {
    if let Err(e) = as_kernels_child(kernel_pid) {
        eprintln!("teneral-confine zygote: spare: {e}");
        return EXIT_NAMESPACES;
    }
    let ahead = Ahead::make();
    if (&socket).write_all(&[1]).is_err() {
        return 0;
    }
    let request = match recv(&socket) {
        Ok(Some(request)) => request,
        // The zygote ended (with the kernel, or by its own fault).
        _ => return 0,
    };
    drop(socket);
    become_launch(request, ahead)
}

/// What `spawn` gives a child of the kernel: a process group of its own
/// and SIGKILL when the kernel ends (and an end now if it has).
fn as_kernels_child(kernel_pid: Option<Pid>) -> Result<(), String> {
    rustix::process::setpgid(None, None).map_err(|e| format!("setpgid: {e}"))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("cannot die with the kernel: {e}"))?;
    if rustix::process::getppid() != kernel_pid {
        return Err("the kernel is gone".into());
    }
    Ok(())
}

/// Takes the request's descriptors, environment and directory, then runs
/// the helper; returns the status of the step that failed.
fn become_launch(request: Request, ahead: Ahead) -> i32 {
    if let Err(e) = take_descriptors(request.fds) {
        eprintln!("teneral confine: descriptors: {e}");
        return EXIT_USAGE;
    }
    for (key, _) in std::env::vars_os() {
        std::env::remove_var(key);
    }
    for (key, value) in &request.env {
        if !key.is_empty() && !key.as_encoded_bytes().contains(&b'=') {
            std::env::set_var(key, value);
        }
    }
    if let Err(e) = std::env::set_current_dir(&request.cwd) {
        eprintln!("teneral confine: cannot enter {}: {e}", request.cwd.display());
        return EXIT_USAGE;
    }
    match plan_args(&request.args) {
        Ok(args) => helper::run(args, ahead),
        Err(e) => {
            eprintln!("teneral confine: arguments: {e}");
            EXIT_USAGE
        }
    }
}

/// Puts each received descriptor at its number (0, 1, 2, the benchmark's).
fn take_descriptors(fds: Vec<(i32, OwnedFd)>) -> Result<(), String> {
    // Out of the way first, so no target closes a descriptor still to come.
    let mut moved = Vec::with_capacity(fds.len());
    for (target, fd) in fds {
        if !(0..64).contains(&target) {
            return Err(format!("descriptor number {target} is not one a launch gets"));
        }
        let high = rustix::io::fcntl_dupfd_cloexec(&fd, 64).map_err(|e| format!("dup: {e}"))?;
        moved.push((target, high));
    }
    for (target, fd) in moved {
        sys::dup_to(&fd, target).map_err(|e| format!("dup2 to {target}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_takes_only_loopback_launches_without_forwards() {
        let plan = |net: Net, forward: Vec<u16>, pretend: Vec<String>| {
            let mut plan = Plan::empty("gate", net);
            plan.forward = forward;
            plan.pretend_missing = pretend;
            plan
        };
        let table = [
            (plan(Net::Loopback, vec![], vec![]), true),
            (plan(Net::Open, vec![], vec![]), false),
            (plan(Net::Loopback, vec![8080], vec![]), false),
            (plan(Net::Loopback, vec![], vec!["seccomp".into()]), false),
        ];
        for (plan, want) in table {
            assert_eq!(spare_fits(&plan), want, "{plan:?}");
        }
    }

    #[test]
    fn a_spare_fits_the_helpers_arguments_of_a_loopback_plan_of_these_sources() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let ours = super::super::host::SOURCE_ID;
        let plan = |net: Net, forward: Vec<u16>| {
            let mut plan = Plan::empty("gate", net);
            plan.forward = forward;
            plan.to_args()
        };
        let with = |source: &str, plan: Vec<OsString>| {
            let mut all = args(&["confine", "--source", source]);
            all.extend(plan);
            all.extend(args(&["--", "/bin/true"]));
            all
        };
        assert!(fits(&with(ours, plan(Net::Loopback, vec![]))));
        assert!(!fits(&with(ours, plan(Net::Open, vec![]))), "the host's network");
        assert!(!fits(&with(ours, plan(Net::Loopback, vec![8080]))), "a forwarded port");
        assert!(!fits(&with("0000", plan(Net::Loopback, vec![]))), "other sources");
        assert!(!fits(&args(&["confine", "--source", ours, "--bogus"])), "no plan");
    }

    #[test]
    fn a_request_from_other_sources_is_refused() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let ours = super::super::host::SOURCE_ID;
        let table = [
            (args(&["confine", "--source", ours, "--profile", "gate"]), Ok(2)),
            (args(&["confine", "--profile", "gate"]), Ok(2)),
            (args(&["confine", "--source", "0000", "--"]), Err("other sources")),
            (args(&["run", "--"]), Err("starts with")),
        ];
        for (given, want) in table {
            match (plan_args(&given), want) {
                (Ok(rest), Ok(n)) => assert_eq!(rest.len(), n, "{given:?}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{given:?}: {e}"),
                (got, want) => panic!("{given:?}: got {got:?}, wanted {want:?}"),
            }
        }
    }
}
