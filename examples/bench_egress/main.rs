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
//!   the ratio to direct (goal: at least 80 %), the CPU time the whole
//!   process (origin, proxy and client alike) spent per MiB, and the
//!   proxy's own thread's CPU per MiB. The load average is printed beside:
//!   on a loopback where both ends are busy copying, every copy the proxy
//!   adds takes cores from the two ends.
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

    let small = format!("GET /{SMALL} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n");
    let absolute = format!(
        "GET http://bench.test/{SMALL} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n"
    );
    let mut times: [Vec<Duration>; 3] = Default::default();
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
    }
    let [direct, http, connect] = times.map(|t| percentiles(t, [50, 99]));
    println!(
        "latency per request, {runs} requests of {SMALL} bytes each on a new connection (load average {}):",
        load()
    );
    println!("  {:<28} {:>9} {:>9} {:>11} {:>11}", "", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms");
    for (name, at) in [
        ("direct on loopback", direct),
        ("proxy, plain HTTP", http),
        ("proxy, GET in CONNECT", connect),
    ] {
        println!(
            "  {name:<28} {:>9.3} {:>9.3} {:>+11.3} {:>+11.3}",
            at[0],
            at[1],
            at[0] - direct[0],
            at[1] - direct[1]
        );
    }

    println!("throughput, best of {ROUNDS} downloads each (load average {}):", load());
    println!(
        "  {:>5} {:>8} {:>8} {:>6} {:>8} {:>6} | CPU ms/MiB: {:>6} {:>6} {:>6} | proxy thread: {:>6} {:>6}",
        "MiB", "direct", "proxy", "ratio", "splicing", "ratio", "direct", "proxy", "splice", "proxy", "splice"
    );
    for &mib in &sizes {
        let big =
            format!("GET /{} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n", mib << 20);
        let mut best = [0f64; 3];
        let mut cpu = [f64::MAX; 3];
        let mut relay = [f64::MAX; 3];
        for _ in 0..ROUNDS {
            let ways = [
                (TcpStream::connect(origin)?, None),
                (tunnel(proxy)?, Some("teneral-egress")),
                (tunnel(splicing)?, Some(SPLICING)),
            ];
            for (i, (stream, thread)) in ways.into_iter().enumerate() {
                let (t, used) = (Instant::now(), cpu_ms());
                let relayed = thread.map(thread_cpu_ms).unwrap_or(0.0);
                let n = fetch(stream, &big)?;
                let mibs = n as f64 / (1 << 20) as f64;
                best[i] = best[i].max(mibs / t.elapsed().as_secs_f64());
                cpu[i] = cpu[i].min((cpu_ms() - used) / mibs);
                relay[i] =
                    relay[i].min((thread.map(thread_cpu_ms).unwrap_or(0.0) - relayed) / mibs);
            }
        }
        let [proxied, spliced] = [best[1] / best[0] * 100.0, best[2] / best[0] * 100.0];
        let verdict = if proxied >= 80.0 { "" } else { "  proxy BELOW 80 %" };
        println!(
            "  {mib:>5} {:>8.0} {:>8.0} {proxied:>5.0}% {:>8.0} {spliced:>5.0}% |             {:>6.3} {:>6.3} {:>6.3} |               {:>6.3} {:>6.3}{verdict}",
            best[0], best[1], best[2], cpu[0], cpu[1], cpu[2], relay[1], relay[2]
        );
    }
    println!(
        "  (MiB/s; ratio = through the proxy / direct, goal >= 80 %; load average after: {})",
        load()
    );

    if skip_starts {
        return Ok(());
    }
    cage::starts(runs, origin.port(), [proxy.port(), splicing.port()], &sizes)
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
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis: state is the
        // 3rd field of the line, utime and stime the 14th and 15th.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        return (ticks(11) + ticks(12)) * 1000.0 / hz;
    }
    0.0
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
    let mut s = TcpStream::connect(proxy)?;
    s.set_nodelay(true)?;
    s.write_all(b"CONNECT bench.test:80 HTTP/1.1\r\nHost: bench.test:80\r\n\r\n")?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            bail!("the proxy closed the tunnel: {}", String::from_utf8_lossy(&head));
        }
        head.push(byte[0]);
    }
    if !head.starts_with(b"HTTP/1.1 200") {
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
