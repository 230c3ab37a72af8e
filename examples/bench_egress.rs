//! Benchmark behind `scripts/bench-egress`: what the egress proxy and the
//! generation's network namespace cost.
//!
//! - Latency: N requests, each on a new connection, to an origin on
//!   loopback, directly and through the proxy (plain HTTP and CONNECT);
//!   medians and the proxy's extra per request.
//! - Throughput: downloads of each size (MiB, a comma-separated list)
//!   directly and through a CONNECT tunnel; MiB/s, the ratio (goal: at
//!   least 80 %), and the CPU time the whole process (origin, proxy and
//!   client alike) spent per MiB, with the load average beside: on a
//!   loopback where both ends are busy copying, a proxy that copies each
//!   byte twice more halves what the cores can carry.
//! - Start: `/bin/true` through `teneral confine` in the generation profile
//!   as it was (the host's network), in its own network namespace, and in
//!   it with the two forwarded ports (model and egress), interleaved;
//!   medians and differences.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use teneral::confine::{self, host, plan, Profile};
use teneral::egress::{self, Config, Policy};

const SMALL: usize = 100;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(300);
    let sizes: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "1,16,128,512".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let origin = origin()?;
    let config = Config { policy: Policy::Public, stand_ins: vec![("bench.test".into(), origin)] };
    let proxy = egress::shared(&config)?;

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
    let [direct, http, connect] = times.map(median_ms);
    println!("latency, median of {runs} requests of {SMALL} bytes, each on a new connection:");
    println!("  direct on loopback       {direct:7.3} ms");
    println!("  through the proxy, HTTP  {http:7.3} ms   +{:.3} ms", http - direct);
    println!("  through the proxy, CONNECT {connect:5.3} ms   +{:.3} ms", connect - direct);

    println!("throughput, best of 3 downloads each (load average {}):", load());
    println!(
        "  {:>8} {:>14} {:>14} {:>7} {:>16} {:>16}",
        "MiB", "direct MiB/s", "tunnel MiB/s", "ratio", "direct CPU ms/MiB", "tunnel CPU ms/MiB"
    );
    for mib in sizes {
        let big =
            format!("GET /{} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n", mib << 20);
        let mut best = [0f64; 2];
        let mut cpu = [f64::MAX; 2];
        for _ in 0..3 {
            for (i, stream) in [TcpStream::connect(origin)?, tunnel(proxy)?].into_iter().enumerate()
            {
                let (t, used) = (Instant::now(), cpu_ms());
                let n = fetch(stream, &big)?;
                let mibs = n as f64 / (1 << 20) as f64;
                best[i] = best[i].max(mibs / t.elapsed().as_secs_f64());
                cpu[i] = cpu[i].min((cpu_ms() - used) / mibs);
            }
        }
        let ratio = best[1] / best[0] * 100.0;
        let verdict = if ratio >= 80.0 { "" } else { " BELOW 80 %" };
        println!(
            "  {mib:>8} {:>14.0} {:>14.0} {ratio:>6.0}% {:>16.3} {:>16.3}{verdict}",
            best[0], best[1], cpu[0], cpu[1]
        );
    }
    println!("  (load average after: {})", load());

    starts(runs, origin.port(), proxy.port())
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

fn median_ms(mut t: Vec<Duration>) -> f64 {
    t.sort();
    t[t.len() / 2].as_secs_f64() * 1000.0
}

/// The generation profile's start, before and after its network namespace.
fn starts(runs: usize, model: u16, proxy: u16) -> Result<()> {
    let target =
        std::env::current_exe()?.ancestors().nth(3).context("no target directory")?.to_path_buf();
    let teneral = target.join("release/teneral");
    if !teneral.exists() {
        bail!("build the kernel first: cargo build --release --bins");
    }
    let dir = tempfile::Builder::new().prefix("tnl-bench").tempdir()?;
    let home = dir.path().join("individual");
    std::fs::create_dir_all(&home)?;
    std::fs::write(home.join("README.md"), "bench\n")?;
    let repo = git2::Repository::init(&home)?;
    let mut index = repo.index()?;
    index.add_path(std::path::Path::new("README.md"))?;
    index.write()?;
    let truth = || vec![OsString::from("/bin/true")];
    let options = confine::Options { exe: Some(teneral.clone()), ..confine::Options::default() };
    let profile = |forward| Profile::Generation { home: home.clone(), forward };
    let forwarded = confine::wrap_with(&profile(vec![model, proxy]), &options, truth())?;
    let namespace = confine::wrap_with(&profile(vec![]), &options, truth())?;
    // The generation's plan as it was before: the host's network.
    host::prepare_generation(&home)?;
    let mut before = plan::generation(&home, &host::tracked_names(&home)?, &host::host(&[&home]));
    before.rules.retain(|r| r.path.exists());
    before.net = plan::Net::Open;
    let before = host::helper_argv(&teneral, before.to_args(), truth());
    let cases: [(&str, Vec<OsString>); 4] = [
        ("plain fork+exec", truth()),
        ("generation, host network", before),
        ("generation, own netns", namespace),
        ("generation, netns + 2 fwd", forwarded),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    for _ in 0..runs {
        for (i, (name, argv)) in cases.iter().enumerate() {
            let start = Instant::now();
            let status = Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(&home)
                .stdin(Stdio::null())
                .status()
                .with_context(|| format!("{name}: cannot start"))?;
            times[i].push(start.elapsed());
            if !status.success() {
                bail!("{name}: {status}");
            }
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median_ms).collect();
    println!("start, median of {runs} runs each of /bin/true:");
    for (i, ((name, _), median)) in cases.iter().zip(&medians).enumerate() {
        if i == 0 {
            println!("  {name:<27} {median:7.3} ms");
        } else {
            println!(
                "  {name:<27} {median:7.3} ms   +{:.3} ms over plain, {:+.3} ms over the host network",
                median - medians[0],
                median - medians[1]
            );
        }
    }
    Ok(())
}
