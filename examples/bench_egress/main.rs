//! Benchmark behind `scripts/bench-egress`: what the egress proxy and the
//! generation's network namespace cost.
//!
//! - Latency a body pays per request: N small requests, each on a new
//!   connection, to an origin on loopback, directly and through the proxy
//!   (plain HTTP, and a GET inside a CONNECT tunnel); p50, p99 and the
//!   proxy's extra at each.
//! - Throughput: downloads of each size (MiB, a comma-separated list)
//!   directly, through the proxy's CONNECT tunnel (which copies), and
//!   through a second proxy that splices (`Egress::splicing`, the relay
//!   the kernel used before it measured slower); MiB/s (best of the rounds),
//!   the ratio to direct, the CPU time the whole
//!   process (origin, proxy and client alike) spent per MiB, and the
//!   proxy's own thread's CPU per MiB. The load average is printed beside:
//!   on a loopback where both ends are busy copying, every copy the proxy
//!   adds takes cores from the two ends.
//! - The peer, Debian's `tinyproxy` (a forward proxy, configured in a
//!   temporary file for plain HTTP and CONNECT on loopback, started under a
//!   time limit and stopped at the end): the same requests and downloads
//!   in the same run, its added latency, MiB/s and its process's CPU per
//!   MiB beside ours. Goal: ours adds no more latency and carries at least
//!   as much, for no more CPU per MiB.
//! - Start: `/bin/true` through `teneral confine` in the generation profile
//!   as it was (the host's network), in its own network namespace, and in
//!   it with the two forwarded ports (model and egress), interleaved;
//!   medians and differences.
//! - `curl` downloading each size directly, through the proxy from the
//!   host, through it from inside a generation's cage (its namespace's
//!   forwarded port and relay), and through the splicing proxy: MiB/s, the
//!   ratio to direct, and the whole machine's CPU time per MiB (from
//!   `/proc/stat`: the relay is another process), the least of 3 (in
//!   `cage.rs`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use teneral::egress::{self, Config, Egress, Policy};

mod cage;

const SMALL: usize = 100;
/// The rounds of each download size (the best one counts).
const ROUNDS: usize = 3;
/// The thread of the splicing proxy (the kernel's is `teneral-egress`).
const SPLICING: &str = "egress-splicing";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(300);
    let sizes: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "1,16,128,512".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let skip_starts = args.next().as_deref() == Some("--no-starts");
    let origin = origin()?;
    let config = Config { policy: Policy::Public, stand_ins: vec![("bench.test".into(), origin)] };
    let proxy = egress::shared(&config)?;
    let splicing = splicing_proxy(config)?;
    // The peer: Debian's tinyproxy, a plain forward proxy, on the same
    // origin (by its address: it resolves names itself).
    let peer = match Tinyproxy::start() {
        Ok(peer) => Some(peer),
        Err(e) => {
            println!("tinyproxy: not measured ({e})");
            None
        }
    };

    let small = format!("GET /{SMALL} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n");
    let absolute = format!(
        "GET http://bench.test/{SMALL} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n"
    );
    let peer_absolute = format!(
        "GET http://{origin}/{SMALL} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"
    );
    let mut times: [Vec<Duration>; 5] = Default::default();
    for _ in 0..runs {
        let t = Instant::now();
        fetch(TcpStream::connect(origin)?, &small)?;
        times[0].push(t.elapsed());
        let t = Instant::now();
        fetch(TcpStream::connect(proxy)?, &absolute)?;
        times[1].push(t.elapsed());
        let t = Instant::now();
        fetch(tunnel(proxy)?, &small)?;
        times[2].push(t.elapsed());
        if let Some(peer) = &peer {
            let t = Instant::now();
            fetch(TcpStream::connect(peer.addr)?, &peer_absolute)?;
            times[3].push(t.elapsed());
            let t = Instant::now();
            fetch(tunnel_to(peer.addr, &origin.to_string())?, &small)?;
            times[4].push(t.elapsed());
        }
    }
    let [direct, http, connect, peer_http, peer_connect] = times.map(|t| percentiles(t, [50, 99]));
    println!(
        "latency per request, {runs} requests of {SMALL} bytes each on a new connection (load average {}):",
        load()
    );
    println!("  {:<28} {:>9} {:>9} {:>11} {:>11}", "", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms");
    let mut rows = vec![
        ("direct on loopback", direct),
        ("proxy, plain HTTP", http),
        ("proxy, GET in CONNECT", connect),
    ];
    if peer.is_some() {
        rows.push(("tinyproxy, plain HTTP", peer_http));
        rows.push(("tinyproxy, GET in CONNECT", peer_connect));
    }
    for (name, at) in rows {
        println!(
            "  {name:<28} {:>9.3} {:>9.3} {:>+11.3} {:>+11.3}",
            at[0],
            at[1],
            at[0] - direct[0],
            at[1] - direct[1]
        );
    }
    if peer.is_some() {
        let ratio = |ours: f64, theirs: f64, base: f64| {
            let theirs = theirs - base;
            if theirs > 0.0 {
                format!("{:.2}", (ours - base) / theirs)
            } else {
                "-".into()
            }
        };
        println!(
            "  added p50, ours / tinyproxy's: plain HTTP {}, GET in CONNECT {} (goal: at most 1)",
            ratio(http[0], peer_http[0], direct[0]),
            ratio(connect[0], peer_connect[0], direct[0])
        );
    }

    println!("throughput, best of {ROUNDS} downloads each (load average {}):", load());
    println!(
        "  {:>5} {:>8} {:>8} {:>6} {:>8} {:>6} | CPU ms/MiB: {:>6} {:>6} {:>6} | proxy thread: {:>6} {:>6}",
        "MiB", "direct", "proxy", "ratio", "splicing", "ratio", "direct", "proxy", "splice", "proxy", "splice"
    );
    let mut peer_rows = Vec::new();
    for &mib in &sizes {
        let big =
            format!("GET /{} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n", mib << 20);
        let mut best = [0f64; 4];
        let mut cpu = [f64::MAX; 4];
        let mut relay = [f64::MAX; 4];
        for _ in 0..ROUNDS {
            let mut ways = vec![
                (TcpStream::connect(origin)?, Relay::None),
                (tunnel(proxy)?, Relay::Thread("teneral-egress")),
                (tunnel(splicing)?, Relay::Thread(SPLICING)),
            ];
            if let Some(peer) = &peer {
                ways.push((tunnel_to(peer.addr, &origin.to_string())?, Relay::Process(peer.pid)));
            }
            for (i, (stream, relay_by)) in ways.into_iter().enumerate() {
                let (t, used) = (Instant::now(), cpu_ms());
                let relayed = relay_by.cpu_ms();
                let n = fetch(stream, &big)?;
                let mibs = n as f64 / (1 << 20) as f64;
                best[i] = best[i].max(mibs / t.elapsed().as_secs_f64());
                cpu[i] = cpu[i].min((cpu_ms() - used) / mibs);
                relay[i] = relay[i].min((relay_by.cpu_ms() - relayed) / mibs);
            }
        }
        let [proxied, spliced] = [best[1] / best[0] * 100.0, best[2] / best[0] * 100.0];
        println!(
            "  {mib:>5} {:>8.0} {:>8.0} {proxied:>5.0}% {:>8.0} {spliced:>5.0}% |             {:>6.3} {:>6.3} {:>6.3} |               {:>6.3} {:>6.3}",
            best[0], best[1], best[2], cpu[0], cpu[1], cpu[2], relay[1], relay[2]
        );
        if peer.is_some() {
            peer_rows.push((mib, best[0], best[1], best[3], relay[1], relay[3]));
        }
    }
    println!("  (MiB/s; ratio = through the proxy / direct; load average after: {})", load());
    if !peer_rows.is_empty() {
        println!(
            "beside tinyproxy, the same downloads in CONNECT (goal: ours carries at least what \
             tinyproxy carries, for no more proxy CPU per MiB):"
        );
        println!(
            "  {:>5} {:>8} {:>8} {:>6} {:>10} {:>6} | proxy CPU ms/MiB: {:>6} {:>10}",
            "MiB", "direct", "ours", "ratio", "tinyproxy", "ratio", "ours", "tinyproxy"
        );
        for (mib, direct, ours, theirs, our_cpu, their_cpu) in peer_rows {
            let verdict = if ours >= theirs { "" } else { "  ours BELOW tinyproxy" };
            println!(
                "  {mib:>5} {direct:>8.0} {ours:>8.0} {:>5.0}% {theirs:>10.0} {:>5.0}% |                   {our_cpu:>6.3} {their_cpu:>10.3}   ours/tinyproxy {:.2}{verdict}",
                ours / direct * 100.0,
                theirs / direct * 100.0,
                ours / theirs
            );
        }
    }

    if skip_starts {
        return Ok(());
    }
    cage::starts(runs, origin.port(), [proxy.port(), splicing.port()], &sizes)
}

/// Where a download's relaying CPU time is counted.
enum Relay {
    None,
    /// A thread of this process, by name.
    Thread(&'static str),
    /// Another process (tinyproxy).
    Process(u32),
}

impl Relay {
    fn cpu_ms(&self) -> f64 {
        match self {
            Relay::None => 0.0,
            Relay::Thread(name) => thread_cpu_ms(name),
            Relay::Process(pid) => stat_cpu_ms(&format!("/proc/{pid}/stat")),
        }
    }
}

/// Debian's tinyproxy on loopback, configured in a file of its own for
/// CONNECT to any port and plain HTTP, started under a time limit and
/// stopped when this ends.
struct Tinyproxy {
    addr: SocketAddr,
    pid: u32,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Tinyproxy {
    fn start() -> Result<Tinyproxy> {
        let program = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .chain([std::path::PathBuf::from("/usr/bin"), "/usr/sbin".into()])
            .map(|dir| dir.join("tinyproxy"))
            .find(|p| p.is_file());
        let Some(program) = program else {
            bail!("no tinyproxy on PATH; scripts/deps installs it");
        };
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile::Builder::new().prefix("tnl-tinyproxy").tempdir()?;
        let conf = dir.path().join("tinyproxy.conf");
        // No ConnectPort line: CONNECT to every port. As root it must be
        // told whom to become.
        let mut text = format!(
            "Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 60\nMaxClients 200\n\
             LogLevel Critical\nDisableViaHeader Yes\n"
        );
        if rustix::process::geteuid().is_root() {
            text.push_str("User nobody\nGroup nogroup\n");
        }
        std::fs::write(&conf, text)?;
        let child = std::process::Command::new("timeout")
            .args(["--signal=KILL", "3600"])
            .arg(&program)
            .arg("-d")
            .arg("-c")
            .arg(&conf)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let end = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            if Instant::now() > end {
                bail!("tinyproxy did not listen on {addr} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The proxy itself: timeout's child.
        let children =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
                .unwrap_or_default();
        let pid = children.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Ok(Tinyproxy { addr, pid, child, _dir: dir })
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        if self.pid > 0 {
            // SAFETY: a signal to the process this benchmark started.
            unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A second proxy, on a thread and runtime of its own as the shared one,
/// that splices its tunnels' bytes instead of copying them.
fn splicing_proxy(config: Config) -> Result<SocketAddr> {
    Ok(egress::on_thread(SPLICING, config, Egress::splicing)?)
}

/// CPU time so far of this process's thread named `name`, from
/// `/proc/self/task/*/stat` (clock ticks: 10 ms steps, fine for the
/// hundreds of milliseconds a large download takes).
fn thread_cpu_ms(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        return stat_cpu_ms(&task.path().join("stat").display().to_string());
    }
    0.0
}

/// The user and system CPU time a `stat` file of /proc counts, in ms.
fn stat_cpu_ms(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The fields after the command's closing parenthesis: state is the
    // 3rd field of the line, utime and stime the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) * 1000.0 / hz
}

/// An origin on loopback: `GET /<n>` answers `n` bytes.
fn origin() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    Ok(addr)
}

fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let n: usize =
        text.split(' ').nth(1).and_then(|p| p.trim_start_matches('/').parse().ok()).unwrap_or(0);
    if write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n").is_err() {
        return;
    }
    let chunk = vec![b'x'; 256 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        if s.write_all(&chunk[..k]).is_err() {
            return;
        }
        left -= k;
    }
}

/// A CONNECT tunnel to bench.test through the proxy.
fn tunnel(proxy: SocketAddr) -> Result<TcpStream> {
    tunnel_to(proxy, "bench.test:80")
}

/// A CONNECT tunnel to `target` (host:port) through the proxy.
fn tunnel_to(proxy: SocketAddr, target: &str) -> Result<TcpStream> {
    let mut s = TcpStream::connect(proxy)?;
    s.set_nodelay(true)?;
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            bail!("the proxy closed the tunnel: {}", String::from_utf8_lossy(&head));
        }
        head.push(byte[0]);
    }
    if !(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")) {
        bail!("the proxy refused: {}", String::from_utf8_lossy(&head));
    }
    Ok(s)
}

/// Sends `request`, reads the answer to its end; the bytes read.
fn fetch(mut s: TcpStream, request: &str) -> Result<usize> {
    s.set_nodelay(true)?;
    s.write_all(request.as_bytes())?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n;
    }
    if total < SMALL {
        bail!("a short answer: {total} bytes");
    }
    Ok(total)
}

/// CPU time of the whole process (every thread) so far.
fn cpu_ms() -> f64 {
    // SAFETY: `usage` is a valid rusage for the call to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// The 1, 5 and 15 minute load averages.
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn median_ms(t: Vec<Duration>) -> f64 {
    percentiles(t, [50])[0]
}

/// The given percentiles of `t`, in milliseconds (nearest rank).
fn percentiles<const N: usize>(mut t: Vec<Duration>, at: [usize; N]) -> [f64; N] {
    t.sort();
    at.map(|p| {
        let rank = (t.len() * p).div_ceil(100).clamp(1, t.len().max(1));
        t.get(rank - 1).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    })
}
