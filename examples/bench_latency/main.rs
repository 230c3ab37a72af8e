//! Benchmark behind `scripts/bench-latency`: owner line to journal latency,
//! idle wake-ups and idle memory of the kernel and the seed body.
//!
//! It makes a temporary individual holding this repository's body, runs the
//! release `teneral run` on it with the stand-in model, and measures:
//! - the time from an owner line's file appearing in `.teneral/owner/` to its
//!   `owner.line` event in the journal (the body is at rest each time);
//! - context switches of every thread of the kernel and the body over an idle
//!   period (each is a wake-up);
//! - their resident memory when idle.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use inotify::{Inotify, WatchMask};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let lines: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    let idle_secs: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(60);
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

    let log = std::fs::File::create(home.join("kernel.log"))?;
    let mut kernel = Command::new(&teneral)
        .arg("run")
        .arg("--dir")
        .arg(home)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let result = measure(home, lines, idle_secs, kernel.id());
    let _ = Command::new("kill").arg("-TERM").arg(kernel.id().to_string()).status();
    let _ = kernel.wait();
    if result.is_err() {
        let mut text = String::new();
        let _ = std::fs::File::open(home.join("kernel.log"))
            .and_then(|mut f| f.read_to_string(&mut text));
        eprintln!("kernel log:\n{text}");
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
    std::fs::write(
        home.join(".env"),
        "TENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTES=0\nTENERAL_WARM_GATE=off\n",
    )?;
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

fn measure(home: &Path, lines: usize, idle_secs: u64, kernel_pid: u32) -> Result<()> {
    let journal = home.join("memory/journal.jsonl");
    let mut watch = JournalWatch::new(home)?;
    // The birth turn: wait until the agent is at rest.
    watch.until(Duration::from_secs(600), |text| text.contains(TURN_ENDED))?;
    let body_pid = body_process(body_pid(&journal)?);

    let mut latencies = Vec::with_capacity(lines);
    for i in 0..lines {
        let text = format!("bench line {i}");
        let start = Instant::now();
        let name = teneral::owner::write_line(home, &text)?;
        let needle = format!(r#""file":"{name}""#);
        watch.until(Duration::from_secs(30), |t| t.contains(&needle))?;
        latencies.push(start.elapsed());
        // The next line waits until the agent is at rest again.
        let ended = watch.count(TURN_ENDED) + 1;
        watch.until(Duration::from_secs(30), |t| t.matches(TURN_ENDED).count() >= ended)?;
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!("owner line -> journal over {lines} lines:");
    println!("  p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 <= 20 ms; the reference polls every 250 ms)",
        ms(pct(0.50)), ms(pct(0.99)), ms(pct(1.0)));

    std::thread::sleep(Duration::from_secs(1));
    let k0 = switches(kernel_pid)?;
    let b0 = switches(body_pid)?;
    std::thread::sleep(Duration::from_secs(idle_secs));
    let k1 = switches(kernel_pid)?;
    let b1 = switches(body_pid)?;
    println!("wake-ups over {idle_secs} s idle (context switches, all threads; goal 0):");
    println!("  kernel {}, body {}", woken(&k0, &k1), woken(&b0, &b1));
    println!("resident memory idle (goals: kernel 10 MB, body 20 MB):");
    println!("  kernel {:.1} MB, body {:.1} MB", rss_mb(kernel_pid)?, rss_mb(body_pid)?);
    if let Some(model) = child_running(kernel_pid, "standin") {
        println!("  the stand-in model, a process of its own: {:.1} MB", rss_mb(model)?);
    }
    println!("idle memory split (/proc/<pid>/smaps; PSS shares each page among its users):");
    for (who, pid) in [("kernel", kernel_pid), ("body", body_pid)] {
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
    Ok(())
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// A process's memory from `/proc/<pid>/smaps`, in kB: totals and, for each
/// mapped file or kind of anonymous mapping, its resident and private
/// (copied on write: anonymous) pages.
struct Smaps {
    rss: u64,
    pss: u64,
    anon: u64,
    parts: std::collections::BTreeMap<String, (u64, u64)>,
}

impl Smaps {
    fn read(pid: u32) -> Result<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
        let mut m = Smaps { rss: 0, pss: 0, anon: 0, parts: Default::default() };
        let mut part = String::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if !first.ends_with(':') {
                // A mapping's head: address perms offset dev inode [path].
                let path = words.nth(4).unwrap_or("");
                part = match path.rsplit_once('/') {
                    Some((_, name)) => name.to_owned(),
                    None if path.is_empty() => "[anonymous]".to_owned(),
                    None => path.to_owned(),
                };
                continue;
            }
            let kb: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let entry = m.parts.entry(part.clone()).or_default();
            match first {
                "Rss:" => {
                    m.rss += kb;
                    entry.0 += kb;
                }
                "Pss:" => m.pss += kb,
                "Anonymous:" => {
                    m.anon += kb;
                    entry.1 += kb;
                }
                _ => {}
            }
        }
        Ok(m)
    }

    /// The largest parts, biggest first: `name rss (anon)` in MB.
    fn parts(&self) -> String {
        let mut parts: Vec<_> = self.parts.iter().filter(|(_, (rss, _))| *rss >= 64).collect();
        parts.sort_by_key(|(_, (rss, _))| std::cmp::Reverse(*rss));
        let text: Vec<String> = parts
            .iter()
            .take(8)
            .map(|(name, (rss, anon))| format!("{name} {:.2} ({:.2} anon)", mb(*rss), mb(*anon)))
            .collect();
        text.join(", ")
    }
}

const TURN_ENDED: &str = r#""type":"turn.ended""#;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The body's pid, from the last `generation.started` event.
fn body_pid(journal: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(journal)?;
    for line in text.lines().rev() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        if v["type"] == "generation.started" {
            return v["pid"].as_u64().map(|p| p as u32).context("no pid");
        }
    }
    bail!("no generation.started in the journal")
}

/// The body itself: the journal names the process the kernel started,
/// which may be the cage's helper with the body its descendant.
fn body_process(started: u32) -> u32 {
    let comm = std::fs::read_to_string(format!("/proc/{started}/comm")).unwrap_or_default();
    if comm.trim() == "teneral-body" {
        return started;
    }
    descendant_named(started, "teneral-body").unwrap_or(started)
}

/// A descendant of `pid` whose command name is `name`.
fn descendant_named(pid: u32, name: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).find_map(|c| {
        let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).ok()?;
        if comm.trim() == name {
            Some(c)
        } else {
            descendant_named(c, name)
        }
    })
}

/// Voluntary and involuntary context switches of each thread of `pid`.
fn switches(pid: u32) -> Result<std::collections::HashMap<String, u64>> {
    let mut threads = std::collections::HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let task = task?;
        // A thread may end between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else { continue };
        let total: u64 = status
            .lines()
            .filter(|l| {
                l.starts_with("voluntary_ctxt_switches:")
                    || l.starts_with("nonvoluntary_ctxt_switches:")
            })
            .filter_map(|l| l.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()))
            .sum();
        threads.insert(task.file_name().to_string_lossy().into_owned(), total);
    }
    Ok(threads)
}

/// The switches made between two samples: by the threads alive at the
/// second (a thread born in between counts all of its own), plus one for
/// each thread that ended in between (it woke at least to end; what else it
/// did is gone with it, so the figure is a lower bound then, and says so).
/// Never subtracts, so it cannot wrap.
fn woken(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
) -> String {
    let alive: u64 =
        after.iter().map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0))).sum();
    let ended = before.keys().filter(|tid| !after.contains_key(*tid)).count() as u64;
    if ended == 0 {
        alive.to_string()
    } else {
        format!("{} (at least; {ended} thread(s) ended while idle)", alive + ended)
    }
}

/// A descendant of `pid` running the command `word` (its first argument;
/// the cage's helper, which names it after `--`, is looked through).
fn child_running(pid: u32, word: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).find_map(|c| {
        let cmd = std::fs::read(format!("/proc/{c}/cmdline")).ok()?;
        if cmd.split(|b| *b == 0).nth(1) == Some(word.as_bytes()) {
            Some(c)
        } else {
            child_running(c, word)
        }
    })
}

fn rss_mb(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<f64>().ok())
        .context("no VmRSS")?;
    Ok(kb / 1024.0)
}

/// Follows the journal's text, woken by inotify on `memory/`.
struct JournalWatch {
    inotify: Inotify,
    path: PathBuf,
    text: String,
}

impl JournalWatch {
    fn new(home: &Path) -> Result<Self> {
        let memory = home.join("memory");
        let end = Instant::now() + Duration::from_secs(600);
        while !memory.exists() {
            if Instant::now() > end {
                bail!("the kernel never made memory/");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let inotify = Inotify::init()?;
        inotify.watches().add(&memory, WatchMask::MODIFY | WatchMask::CREATE)?;
        Ok(Self { inotify, path: memory.join("journal.jsonl"), text: String::new() })
    }

    fn refresh(&mut self) {
        self.text = std::fs::read_to_string(&self.path).unwrap_or_default();
    }

    fn count(&self, needle: &str) -> usize {
        self.text.matches(needle).count()
    }

    /// Waits for a change after which `done` holds for the journal's text.
    fn until(&mut self, timeout: Duration, done: impl Fn(&str) -> bool) -> Result<()> {
        let end = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            self.refresh();
            if done(&self.text) {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("timed out waiting on the journal");
            }
            // Blocks until the journal changes.
            self.inotify.read_events_blocking(&mut buf)?;
        }
    }
}
