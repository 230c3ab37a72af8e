//! A generation's way out: the egress proxy the kernel serves on its
//! loopback and forwards into the generation's network namespace, which
//! has nothing else but loopback. The body's tools find it through
//! `HTTPS_PROXY` / `HTTP_PROXY` ([`environment`]).
//!
//! - [`policy`]: what `TENERAL_EGRESS` lets out, as a pure decision; never
//!   an address of the host's own networks.
//! - [`request`]: the request head, read strictly.
//! - [`server`]: the proxy itself (CONNECT and plain HTTP, bounded).
//! - [`splice`]: an open tunnel's bytes moved inside Linux instead of
//!   copied through the proxy; measured slower than copying on this Linux,
//!   so kept for the bench's comparison ([`server::Egress::splicing`]).
//! - [`refusals`]: one log line per refused host per minute, with a count.
//!
//! The proxy runs inside the kernel's process, on a thread and runtime of
//! its own ([`shared`]): it holds no secret (the model's key stays in the
//! model proxy) and runs none of the agent's code, so a child of its own
//! would add a process and a cage profile without taking anything out of
//! reach; its own runtime keeps a busy download from slowing the
//! supervisor's single thread. One proxy serves every generation of the
//! kernel, started at the first one.
//!
//! What does not go through it: anything but TCP (UDP, raw sockets, ICMP:
//! the namespace has no route out), and name resolution from inside (there
//! is no DNS server in the namespace; a client that resolves before it
//! connects fails; through the proxy the name is resolved by the proxy).

#[cfg(test)]
mod bulk_tests;
pub mod policy;
pub mod refusals;
pub mod request;
pub mod server;
pub mod splice;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

pub use policy::{decide, Policy, Verdict};
pub use server::{Config, Egress};

/// The address of this process's egress proxy for `config`, started (on a
/// thread of its own, for the rest of the process's life) the first time it
/// is asked for.
pub fn shared(config: &Config) -> io::Result<SocketAddr> {
    static RUNNING: OnceLock<Mutex<Vec<(Config, SocketAddr)>>> = OnceLock::new();
    let mut running =
        RUNNING.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, addr)) = running.iter().find(|(c, _)| c == config) {
        return Ok(*addr);
    }
    let addr = on_thread("teneral-egress", config.clone(), |egress| egress)?;
    teneral_core::log::info(format!(
        "egress proxy on {addr}: generations reach {} through it",
        config.policy.describe()
    ));
    running.push((config.clone(), addr));
    Ok(addr)
}

/// Serves a proxy for `config` on a new thread named `name`, with a
/// runtime of its own, for the rest of the process's life; `adjust` sets it
/// up before it serves (the bench's splicing proxy). Its address.
pub fn on_thread(
    name: &str,
    config: Config,
    adjust: fn(Egress) -> Egress,
) -> io::Result<SocketAddr> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new().name(name.into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            match Egress::bind(([127, 0, 0, 1], 0).into(), config).await {
                Ok(egress) => {
                    let egress = adjust(egress);
                    let _ = tx.send(egress.local_addr());
                    egress.serve().await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    })?;
    rx.recv().map_err(|_| io::Error::other(format!("the egress proxy's thread {name} ended")))?
}

/// The variables that point a body's tools at the proxy on `port` of its
/// loopback: `HTTPS_PROXY`, `HTTP_PROXY` and their lower-case forms, and `NO_PROXY` for loopback (inside the namespace only the
/// forwarded ports are there: the model and this proxy).
pub fn environment(port: u16) -> Vec<(String, OsString)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env = Vec::new();
    for name in ["HTTPS_PROXY", "HTTP_PROXY"] {
        env.push((name.to_owned(), OsString::from(&url)));
        env.push((name.to_ascii_lowercase(), OsString::from(&url)));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.to_owned(), OsString::from("127.0.0.1,localhost,::1")));
    }
    env
}
