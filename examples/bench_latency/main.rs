//! Benchmark behind `scripts/bench-latency`: owner line to journal latency,
//! idle wake-ups and idle memory of the kernel and the seed body, each
//! printed beside its goal (docs/speed.md).
//!
//! It makes a temporary individual holding this repository's body, runs the
//! release `teneral run` on it with the stand-in model, and measures:
//! - the time from an owner line's file appearing in `.teneral/owner/` to its
//!   `owner.line` event in the journal (the body is at rest each time);
//! - context switches of every thread of the kernel and the body over an idle
//!   period (each is a wake-up; see wakeups.rs);
//! - their resident memory when idle;
//! - the owner lines again with a spinning thread on every core, printed
//!   beside the idle figure (the goal is the idle one's).
//!
//! `scripts/bench-latency --base` builds this program inside an older tree
//! too, so it uses only what that tree offers: a setting the tree does not
//! know is left out of `.env` (a kernel refuses names it does not know).

mod journal;
mod smaps;
mod wakeups;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use journal::{still_running, JournalWatch};
use smaps::{body_process, child_running, mb, rss_mb, Smaps};

/// The goals (docs/speed.md).
const P99_GOAL_MS: f64 = 5.0;
const KERNEL_GOAL_MB: f64 = 8.0;
const BODY_GOAL_MB: f64 = 5.0;

/// The test individual's settings. One a tree does not know is left out.
const SETTINGS: &[(&str, &str)] = &[
    ("TENERAL_PROVIDER", "standin"),
    ("TENERAL_HEARTBEAT_MINUTES", "0"),
    // The gate's warm-up would build in the background while we measure.
    ("TENERAL_WARM_GATE", "off"),
];

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let lines: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let idle_secs: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(60);
    if lines == 0 {
        bail!("give at least one line");
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Cargo runs this as <target>/release/examples/<name>, wherever
    // CARGO_TARGET_DIR puts <target>.
    let target =
        std::env::current_exe()?.ancestors().nth(3).context("no target directory")?.to_path_buf();
    let teneral = target.join("release/teneral");
    if !teneral.exists() {
        bail!("build the kernel first: cargo build --release --bins");
    }
    let dir = tempfile::Builder::new().prefix("tnl-bench").tempdir()?;
    let home = dir.path();
    make_individual(&root, &target, home)?;

    let log_path = home.join("kernel.log");
    let log = std::fs::File::create(&log_path)?;
    let mut kernel = Command::new(&teneral)
        .arg("run")
        .arg("--dir")
        .arg(home)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let result = measure(home, lines, idle_secs, &mut kernel);
    let _ = Command::new("kill").arg("-TERM").arg(kernel.id().to_string()).status();
    let _ = kernel.wait();
    if result.is_err() {
        eprintln!("the kernel log's last 30 lines:\n{}", journal::tail(&log_path, 30));
    }
    result
}

fn make_individual(root: &Path, target: &Path, home: &Path) -> Result<()> {
    let status = Command::new("cp").arg("-r").arg(root.join("body")).arg(home).status()?;
    if !status.success() {
        bail!("cannot copy body/");
    }
    let _ = std::fs::remove_dir_all(home.join("body/target"));
    std::fs::copy(root.join("BIRTH.md"), home.join("BIRTH.md"))?;
    std::fs::write(
        home.join(".gitignore"),
        "/.teneral\n/.env\n/memory\n/soul\n/inbox\n/kernel.log\n",
    )?;
    let mut env = String::new();
    for (name, value) in SETTINGS {
        if mentions(&root.join("src"), &format!("\"{name}\"")) {
            env.push_str(&format!("{name}={value}\n"));
        } else {
            println!("(this tree does not know {name}: left out of .env)");
        }
    }
    std::fs::write(home.join(".env"), env)?;
    // Reuse the build cache of the tests, if there is one.
    std::fs::create_dir_all(home.join(".teneral"))?;
    let cache = target.join("test-bodies");
    std::fs::create_dir_all(&cache)?;
    std::os::unix::fs::symlink(&cache, home.join(".teneral/target"))?;
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bench"],
    ] {
        let ok = Command::new("git").args(args).current_dir(home).status()?.success();
        if !ok {
            bail!("git {args:?} failed");
        }
    }
    Ok(())
}

/// Whether a `.rs` file under `dir` holds `needle`.
fn mentions(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            mentions(&path, needle)
        } else {
            path.extension().is_some_and(|x| x == "rs")
                && std::fs::read_to_string(&path).is_ok_and(|t| t.contains(needle))
        }
    })
}

fn measure(home: &Path, lines: usize, idle_secs: u64, kernel: &mut Child) -> Result<()> {
    let journal = home.join("memory/journal.jsonl");
    let mut watch = JournalWatch::new(home, kernel)?;
    // The birth turn (after the body's first build): wait until the agent is at rest.
    watch.until(0, Duration::from_secs(1800), kernel, |text| text.contains(TURN_ENDED))?;
    let body_pid = body_process(journal::started_pid(&journal)?);

    let load_before = load();
    let latencies = owner_lines(&mut watch, home, lines, kernel, "bench line")?;
    let (p50, p99, max) = spread(&latencies);
    println!("owner line -> journal over {lines} lines:");
    println!("  p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms");
    println!(
        "  goal p99 <= {P99_GOAL_MS} ms over 1,000 lines on an idle machine: {}{}",
        verdict(p99 <= P99_GOAL_MS),
        if lines < 1000 { " (fewer lines than the goal's)" } else { "" }
    );

    std::thread::sleep(Duration::from_secs(1));
    let load_idle = load();
    let (k, b) = idle_window(kernel, body_pid, Duration::from_secs(idle_secs))?;
    println!("wake-ups over {idle_secs} s idle (context switches of every thread, ended ones too; goal 0):");
    println!("  kernel {}, body {}", k.total, b.total);
    for (who, w) in [("kernel", &k), ("body", &b)] {
        if w.total > 0 {
            println!("    the {who}'s threads that woke: {}", w.who());
        }
    }
    let (krss, brss) = (rss_mb(kernel.id())?, rss_mb(body_pid)?);
    println!("resident memory idle:");
    println!(
        "  kernel {krss:.1} MB, body {brss:.1} MB (goals: kernel <= {KERNEL_GOAL_MB} MB, {}; \
         body <= {BODY_GOAL_MB} MB, {})",
        verdict(krss <= KERNEL_GOAL_MB),
        verdict(brss <= BODY_GOAL_MB)
    );
    if let Some(model) = child_running(kernel.id(), "standin") {
        println!("  the stand-in model, a process of its own: {:.1} MB", rss_mb(model)?);
    }
    println!("idle memory split (/proc/<pid>/smaps; PSS shares each page among its users):");
    for (who, pid) in [("kernel", kernel.id()), ("body", body_pid)] {
        let m = Smaps::read(pid)?;
        println!(
            "  {who} RSS {:.1} MB, PSS {:.1} MB, anon {:.1} MB, file {:.1} MB",
            mb(m.rss),
            mb(m.pss),
            mb(m.anon),
            mb(m.rss - m.anon)
        );
        println!("    {}", m.parts());
    }
    println!(
        "machine load (1 min): {load_before} before the lines, {load_idle} after them, {} after \
         the idle window",
        load()
    );

    // The same lines again with every core kept busy by this process.
    let spinners = std::thread::available_parallelism().map_or(2, |n| n.get());
    let latencies = {
        let _busy = Busy::start(spinners);
        owner_lines(&mut watch, home, lines, kernel, "loaded line")?
    };
    let (p50, p99, max) = spread(&latencies);
    println!("owner line -> journal over {lines} lines, {spinners} threads spinning beside it:");
    println!(
        "  loaded p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms (no goal: printed beside)"
    );
    Ok(())
}

/// Time from one owner line to the next at the least. A turn of the seed
/// body on the stand-in sends three events (`reply`, `usage`,
/// `turn.ended`), and a body may send 100 a second after a burst of 1,000
/// (docs/contract.md, section 3); lines sent as fast as the stand-in
/// answers would pass that rate after a few hundred, and the kernel would
/// drop the body's replies. At this pace a turn's events come at 75 a
/// second.
const PACE: Duration = Duration::from_millis(40);

/// Writes `lines` owner lines one at a time, at most one per [`PACE`], and
/// returns, sorted, the time from each line's file to its `owner.line`
/// event; each waits until the agent is at rest again.
fn owner_lines(
    watch: &mut JournalWatch,
    home: &Path,
    lines: usize,
    kernel: &mut Child,
    text: &str,
) -> Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(lines);
    for i in 0..lines {
        // Marked before the line: its turn may have ended by the time the
        // journal is read for its `owner.line`.
        let mark = watch.mark();
        let start = Instant::now();
        let name = teneral_core::owner::write_line(home, &format!("{text} {i}"))?;
        let needle = format!(r#""file":"{name}""#);
        watch.until(mark, Duration::from_secs(30), kernel, |t| t.contains(&needle))?;
        latencies.push(start.elapsed());
        watch.until(mark, Duration::from_secs(30), kernel, |t| t.contains(TURN_ENDED))?;
        std::thread::sleep(PACE.saturating_sub(start.elapsed()));
    }
    latencies.sort();
    Ok(latencies)
}

/// p50, p99 and the largest of sorted latencies, in milliseconds.
fn spread(sorted: &[Duration]) -> (f64, f64, f64) {
    let pct = |p: f64| ms(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]);
    (pct(0.50), pct(0.99), pct(1.0))
}

/// Threads that spin until dropped: a machine whose every core is busy.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(n: usize) -> Busy {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Samples the threads of the kernel and the body every 100 ms for `idle`.
fn idle_window(
    kernel: &mut Child,
    body: u32,
    idle: Duration,
) -> Result<(wakeups::Woken, wakeups::Woken)> {
    let gone = |who: &str| anyhow::anyhow!("the {who} ended while idle");
    let mut k =
        wakeups::Window::start(&wakeups::sample(kernel.id()).ok_or_else(|| gone("kernel"))?);
    let mut b = wakeups::Window::start(&wakeups::sample(body).ok_or_else(|| gone("body"))?);
    let end = Instant::now() + idle;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        still_running(kernel)?;
        k.see(&wakeups::sample(kernel.id()).ok_or_else(|| gone("kernel"))?);
        b.see(&wakeups::sample(body).ok_or_else(|| gone("body"))?);
    }
    Ok((k.woken(), b.woken()))
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// The machine's 1-minute load average.
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}

const TURN_ENDED: &str = r#""type":"turn.ended""#;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
