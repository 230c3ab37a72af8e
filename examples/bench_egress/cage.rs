//! The generation's side of `scripts/bench-egress`: its start in its own
//! network namespace, and `curl` downloading from inside its cage.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use teneral::confine::{self, host, plan, Profile};

use super::{load, median_ms};

/// The generation profile's start, before and after its network namespace.
pub fn starts(runs: usize, model: u16, proxies: [u16; 2], sizes: &[usize]) -> Result<()> {
    let proxy = proxies[0];
    // The kernel of the same profile as this example (target/<profile>/).
    let exe = std::env::current_exe()?;
    let teneral = exe.ancestors().nth(2).context("no target directory")?.join("teneral");
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
    let caged = |argv| confine::wrap_with(&profile(vec![model, proxy]), &options, argv);
    let namespace = confine::wrap_with(&profile(vec![]), &options, truth())?;
    // The generation's plan as it was before: the host's network.
    host::prepare_generation(&home)?;
    let mut before = plan::generation(&home, &host::tracked_names(&home)?, &host::host(&[&home]));
    before.rules.retain(|r| r.path.exists());
    before.net = teneral_cage::plan::Net::Open;
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
    downloads(model, proxies, sizes, &home, caged)
}

/// A body's real path: `curl` downloading through the proxy from inside a
/// generation's cage (its namespace's forwarded port, the relay, the
/// proxy), against the same `curl` on the host through the proxy and
/// directly. Best of 3 each, `curl`'s own measure of the transfer.
fn downloads(
    origin: u16,
    [proxy, splicing]: [u16; 2],
    sizes: &[usize],
    home: &std::path::Path,
    caged: impl Fn(Vec<OsString>) -> std::io::Result<Vec<OsString>>,
) -> Result<()> {
    let curl = |url: String, through: Option<u16>| {
        let mut argv: Vec<OsString> =
            ["curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}"].map(Into::into).into();
        if let Some(proxy) = through {
            argv.extend(["-p", "-x"].map(OsString::from));
            argv.push(format!("http://127.0.0.1:{proxy}").into());
        }
        argv.push(url.into());
        argv
    };
    println!("curl's downloads, best of 3 (load average {}):", load());
    println!(
        "  {:>5} {:>8} {:>12} {:>6} {:>12} {:>6} {:>14} {:>6} | CPU ms/MiB: {:>6} {:>6} {:>6} {:>6}",
        "MiB",
        "direct",
        "proxy, host",
        "ratio",
        "proxy, cage",
        "ratio",
        "splicing, host",
        "ratio",
        "direct",
        "host",
        "cage",
        "splice"
    );
    for &mib in sizes {
        let n = mib << 20;
        let cases = [
            curl(format!("http://127.0.0.1:{origin}/{n}"), None),
            curl(format!("http://bench.test/{n}"), Some(proxy)),
            caged(curl(format!("http://bench.test/{n}"), Some(proxy)))?,
            curl(format!("http://bench.test/{n}"), Some(splicing)),
        ];
        let mut best = [0f64; 4];
        let mut cpu = [f64::MAX; 4];
        for _ in 0..3 {
            for (i, argv) in cases.iter().enumerate() {
                let busy = busy_ms();
                let out = Command::new(&argv[0])
                    .args(&argv[1..])
                    .current_dir(home)
                    .stdin(Stdio::null())
                    .output()
                    .context("cannot run curl")?;
                let text = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() {
                    bail!(
                        "curl ({i}): {}: {text} {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let speed: f64 =
                    text.trim().parse().with_context(|| format!("curl said {text:?}"))?;
                best[i] = best[i].max(speed / (1 << 20) as f64);
                cpu[i] = cpu[i].min((busy_ms() - busy) / mib as f64);
            }
        }
        // `/proc/stat` counts in ticks of 10 ms: below 64 MiB a download
        // takes a few of them, too few to divide.
        let cpu = cpu.map(|ms| if mib >= 64 { format!("{ms:.2}") } else { "-".to_owned() });
        println!(
            "  {mib:>5} {:>8.0} {:>12.0} {:>5.0}% {:>12.0} {:>5.0}% {:>14.0} {:>5.0}% |             {:>6} {:>6} {:>6} {:>6}",
            best[0],
            best[1],
            best[1] / best[0] * 100.0,
            best[2],
            best[2] / best[0] * 100.0,
            best[3],
            best[3] / best[0] * 100.0,
            cpu[0],
            cpu[1],
            cpu[2],
            cpu[3],
        );
    }
    println!(
        "  (MiB/s; CPU ms/MiB: the whole machine's busy time per MiB, curl, cage, relay and proxy alike, the least of 3)"
    );
    Ok(())
}

/// The whole machine's busy CPU time so far (every core's user, system,
/// interrupt and steal time from `/proc/stat`), in milliseconds: a caged
/// download's relay is no thread of this process.
fn busy_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    let ticks: Vec<f64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let busy: f64 =
        ticks.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy * 1000.0 / hz
}
