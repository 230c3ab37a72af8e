//! Launches of the cage's helper sent to a zygote (`teneral_cage::zygote`)
//! instead of executed, once the kernel said to use one.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use teneral_cage::zygote;
use tokio::sync::oneshot;

use super::{groups, lock_registry, receiver, Child, Output, Spec};

/// The zygote that takes confined launches, once [`use_zygote`] set one.
fn zygote_slot() -> &'static Mutex<Option<zygote::Zygote>> {
    static ZYGOTE: OnceLock<Mutex<Option<zygote::Zygote>>> = OnceLock::new();
    ZYGOTE.get_or_init(|| Mutex::new(None))
}

/// From now on, every launch of `zygote`'s helper program (`confine ...`,
/// as `confine::wrap` makes them) is forked by the zygote instead of
/// executed: the same cage without the helper's exec, and with namespaces
/// made ahead of need. Other launches are unchanged.
pub fn use_zygote(zygote: zygote::Zygote) {
    *zygote_slot().lock().unwrap_or_else(|p| p.into_inner()) = Some(zygote);
}

/// Whether `spec` is a launch the zygote in use would take (the helper's
/// `confine ...`).
pub fn goes_through_zygote(spec: &Spec) -> bool {
    let slot = zygote_slot().lock().unwrap_or_else(|p| p.into_inner());
    slot.as_ref().is_some_and(|z| {
        spec.program == z.helper() && spec.args.first().is_some_and(|a| a == "confine")
    })
}

/// Launches go back to executing the helper; the zygote, if any, is
/// returned (dropping it closes its socket, and it ends).
pub fn stop_using_zygote() -> Option<zygote::Zygote> {
    zygote_slot().lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// How many launches a zygote has started in this process.
pub fn zygote_launches() -> usize {
    ZYGOTE_LAUNCHES.load(Ordering::Relaxed)
}

static ZYGOTE_LAUNCHES: AtomicUsize = AtomicUsize::new(0);

/// `spec` started by the zygote in use when it is a launch of its helper
/// (`Ok`, with how it went), else `spec` back, to be executed.
pub(super) fn spawn(spec: Spec) -> Result<io::Result<Child>, Spec> {
    let mut slot = zygote_slot().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(zygote) = slot.as_ref() {
        if spec.program == zygote.helper() && spec.args.first().is_some_and(|a| a == "confine") {
            let started = spawn_through(zygote, spec);
            if let Err(e) = &started {
                use io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof, WouldBlock};
                if matches!(e.kind(), BrokenPipe | ConnectionReset | UnexpectedEof | WouldBlock) {
                    // The zygote is gone, or silent past its time (WouldBlock):
                    // later launches execute the helper.
                    slot.take();
                    teneral_core::log::warn(format!(
                        "the cage's zygote is gone ({e}); confined launches execute the \
                         helper from now on"
                    ));
                }
            } else {
                ZYGOTE_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(started);
        }
    }
    drop(slot);
    Err(spec)
}

/// `spec` (a launch of the helper) started by `zygote`: the same child as
/// [`spawn`] makes, with its pipes made here and passed along.
fn spawn_through(zygote: &zygote::Zygote, spec: Spec) -> io::Result<Child> {
    let null = || File::open("/dev/null").map(OwnedFd::from);
    let stdin = match spec.stdin {
        Some(fd) => fd,
        None => null()?,
    };
    let mut fds = vec![(0, stdin)];
    let mut readers = [None, None];
    for (target, out) in [(1, spec.stdout), (2, spec.stderr)] {
        let fd = match out {
            Output::Null => null()?,
            Output::File(f) => OwnedFd::from(f),
            Output::Pipe => {
                let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
                readers[target as usize - 1] = Some(read);
                write
            }
        };
        fds.push((target, fd));
    }
    // The benchmark's descriptor for the cage's steps (`teneral_cage::steps`),
    // when it names one: the same file, opened again for appending.
    let bench = spec.env.iter().find(|(k, _)| k == teneral_cage::steps::ENV);
    if let Some(fd) = bench.and_then(|(_, v)| v.to_str()?.parse::<i32>().ok()) {
        let path = format!("/proc/self/fd/{fd}");
        if let (true, Ok(file)) = (fd > 2, std::fs::OpenOptions::new().append(true).open(path)) {
            fds.push((fd, OwnedFd::from(file)));
        }
    }
    if let Some(hold) = spec.hold {
        fds.push((zygote::HOLD, hold));
    }
    let request = zygote::Request {
        args: spec.args,
        cwd: spec.cwd,
        env: spec.env.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        fds,
    };
    let (tx, rx) = oneshot::channel();
    // As in spawn: registered before the reaper can collect it.
    let mut reg = lock_registry();
    let zygote::Launched { pid, first } = zygote.launch(&request)?;
    reg.insert(pid as i32, tx);
    groups::started(pid);
    drop(reg);
    drop(request);
    let [out, err] = readers;
    let stdout = out.map(receiver).transpose()?;
    let stderr = err.map(receiver).transpose()?;
    Ok(Child { pid, first, exit: Some(rx), done: None, stdout, stderr })
}
