//! The species' only `unsafe` call: registering the kernel's own HTTP
//! transport with git2 ([`super::transport`]).

use git2::transport::Transport;
use git2::Remote;

/// Has git2 build its transport for `<scheme>://` remotes with `factory`.
///
/// Called once per scheme, from `transport::install` under a `OnceLock`.
pub fn register_transport<F>(scheme: &str, factory: F) -> Result<(), git2::Error>
where
    F: Fn(&Remote<'_>) -> Result<Transport, git2::Error> + Send + Sync + 'static,
{
    // SAFETY: git2 marks this unsafe because libgit2's list of transports is
    // not locked: registering must not race another thread looking a
    // transport up (every remote operation does, a local clone too). The
    // kernel registers from `upstream::tip` on its runtime's one thread,
    // before it starts the first fetch's thread, under a OnceLock; the other
    // remote operation of the kernel, the clone of the agent's workspace
    // (repo::ensure_candidate), runs on that same thread, so never at once
    // with this. Tests that call `tip` from several threads meet the
    // OnceLock, which lets only one register and holds the others until
    // it is done.
    unsafe { git2::transport::register(scheme, factory) }
}
