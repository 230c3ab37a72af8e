//! Benchmark behind `scripts/bench-systemd`: what starting a child costs
//! through each of the kernel's runners, and what the cage adds to a gate
//! check under each, measured in one run with the cases interleaved.
//!
//! Each start goes through the kernel's own [`Runner`] with the limits a body
//! gets (MemoryMax, TasksMax), as `generation::start` does:
//! - "start": from asking until the program has been executed (the direct
//!   spawn returns after exec; the unit's start job is done after exec,
//!   `Type=exec`);
//! - "start to end": until its end has been seen (a SIGCHLD for the child,
//!   the unit's signals for the unit) of `sleep 0.02`: a program that
//!   outlives its unit's start job, as every check does (a `/bin/true` can
//!   end before the manager has seen its exec, and its unit then ends by
//!   another, shorter path than a caged one's).
//!
//! The cases: the program plainly and in the cage's gate profile, as the
//! kernel's child (the cage's helper executed for each launch, and forked
//! by the cage's zygote, as the direct and cgroup runners do) and as a
//! transient unit (the helper executed inside the unit: the manager starts
//! the process). The cage's cost is a caged case's "start to end" less the
//! plain one of the same runner (the goal: at most 2 ms for a gate
//! check). Each timed unit follows an untimed one (a manager idle for tens
//! of milliseconds is 12 to 15 ms slower to start the next unit, whatever
//! it runs), and each zygote case by an untimed pause ([`SETTLE`]).
//!
//! It must run where a user manager is on the session bus (the script runs
//! it under `scripts/with-systemd` when none is).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use teneral::runner::{Cage, Launch, Limits, Profile, Runner};
use teneral::settings::RunnerChoice;
use teneral::spawn::Spec;

/// One kind of start: its name, whether it is a transient unit (else the
/// kernel's child), caged, and forked by the zygote.
struct Case {
    name: &'static str,
    systemd: bool,
    caged: bool,
    zygote: bool,
}

/// The pause, outside the timing, after each case that uses the zygote.
/// Without it the direct cases measured 0.3 to 0.4 ms more (zygote +2.26
/// against +1.98 ms, executed helper +4.09 against +3.78): likely the work
/// Linux defers when a cage ends (a network namespace is freed by a
/// worker) and the zygote's next spare landing on the cases after it. So
/// the figures are of starts on a machine that has caught up.
const SETTLE: Duration = Duration::from_millis(30);

/// The untimed unit started before each timed one.
const WARM: Case = Case { name: "warm-up", systemd: true, caged: false, zygote: false };

const DIRECT: &str = "direct spawn";
const UNIT: &str = "transient unit (D-Bus)";

const CASES: [Case; 5] = [
    Case { name: DIRECT, systemd: false, caged: false, zygote: false },
    Case { name: "direct, gate, helper executed", systemd: false, caged: true, zygote: false },
    Case { name: "direct, gate, zygote", systemd: false, caged: true, zygote: true },
    Case { name: "transient unit, gate", systemd: true, caged: true, zygote: false },
    Case { name: UNIT, systemd: true, caged: false, zygote: false },
];

fn main() -> Result<()> {
    let n: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(bench(n))
}

async fn bench(n: usize) -> Result<()> {
    teneral::spawn::start_reaper_of_own_children()?;
    // The kernel of the same profile as this example (target/<profile>/),
    // with the lean helper beside it.
    let exe = std::env::current_exe()?;
    let teneral = exe.ancestors().nth(2).context("no target directory")?.join("teneral");
    if !teneral.exists() {
        bail!("build the kernel first: cargo build --release --bins");
    }
    let cage = Cage::On { exe: teneral, pretend_missing: vec![] };
    let systemd = Runner::choose(RunnerChoice::Systemd, cage.clone()).await?;
    let direct = Runner::direct(cage.clone());
    if !cage.start_zygote()? {
        bail!("no zygote: teneral-confine is not beside teneral (cargo build --release --bins)");
    }
    let mut zygote = teneral::spawn::stop_using_zygote();
    let dir = tempfile::Builder::new().prefix("tnl-bench").tempdir()?;
    let checkout = dir.path().join("checkout");
    std::fs::create_dir_all(&checkout)?;
    let limits = Limits {
        memory_max: Some(4 << 30),
        tasks_max: Some(2048),
        runtime_max: None,
        stop_timeout: Duration::from_secs(5),
        background: false,
    };
    let mut times: Vec<(Vec<Duration>, Vec<Duration>)> = vec![Default::default(); CASES.len()];
    for i in 0..n + 5 {
        for (k, case) in CASES.iter().enumerate() {
            // The zygote takes the helper's launches only while it is in use.
            if case.zygote {
                teneral::spawn::use_zygote(zygote.take().context("the zygote is gone")?);
            }
            let forked = teneral::spawn::zygote_launches();
            let runner = if case.systemd { &systemd } else { &direct };
            // A manager that has been idle for tens of milliseconds takes
            // 12 to 15 ms longer for the next unit, caged or not: each unit
            // case is preceded by an untimed one, so both start alike.
            if case.systemd {
                start(runner, &WARM, i, &checkout, limits).await?;
            }
            let (started, total) = start(runner, case, i, &checkout, limits).await?;
            if case.zygote {
                zygote = teneral::spawn::stop_using_zygote();
                tokio::time::sleep(SETTLE).await;
            }
            if (teneral::spawn::zygote_launches() > forked) != case.zygote {
                bail!("{}: the zygote took it or left it against the case", case.name);
            }
            // The first few warm every path up.
            if i >= 5 {
                times[k].0.push(started);
                times[k].1.push(total);
            }
        }
    }
    report(n, &mut times);
    Ok(())
}

/// One start of `case`: the time to its start and to its end seen.
async fn start(
    runner: &Runner,
    case: &Case,
    i: usize,
    checkout: &Path,
    limits: Limits,
) -> Result<(Duration, Duration)> {
    let kind = if case.caged { "gate" } else { "gen" };
    let warm = if case.name == WARM.name { "warm" } else { "" };
    let unit = format!("teneral-{kind}-bench{warm}{i}.service");
    let spec = Spec::new("/bin/sleep", checkout).arg("0.02").env("PATH", "/usr/bin:/bin");
    let mut launch = Launch::new(spec, limits);
    if case.caged {
        launch =
            launch.caged(Profile::Gate { checkout: checkout.to_owned(), writable: Vec::new() });
    }
    let began = Instant::now();
    let mut running = runner.start(&unit, launch).await?;
    let started = began.elapsed();
    let ended = running.wait().await;
    let total = began.elapsed();
    if !ended.exit.success() {
        bail!("{unit} ({}) ended with {}: {}", case.name, ended.exit, running.output_tail());
    }
    Ok((started, total))
}

fn report(n: usize, times: &mut [(Vec<Duration>, Vec<Duration>)]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |v: &mut Vec<Duration>, p: usize| {
        v.sort_unstable();
        v[(v.len() - 1) * p / 100]
    };
    println!("starts of `sleep 0.02` through the kernel's runner, {n} each, interleaved:");
    println!("{:<48} {:>9} {:>9} {:>9}", "", "p50 ms", "p90 ms", "mean ms");
    let mut medians = vec![[0.0; 2]; CASES.len()];
    for (k, case) in CASES.iter().enumerate() {
        for (j, what) in ["start", "start to end"].iter().enumerate() {
            let v = if j == 0 { &mut times[k].0 } else { &mut times[k].1 };
            let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
            let (p50, p90) = (pct(v, 50), pct(v, 90));
            medians[k][j] = ms(p50);
            println!(
                "{:<48} {:>9.2} {:>9.2} {:>9.2}",
                format!("{}, {what}", case.name),
                ms(p50),
                ms(p90),
                mean
            );
        }
    }
    let at = |name: &str| CASES.iter().position(|c| c.name == name).unwrap_or(0);
    let (direct, unit) = (at(DIRECT), at(UNIT));
    println!(
        "ratio unit/direct (p50): start {:.1}x, start to end {:.1}x",
        medians[unit][0] / medians[direct][0],
        medians[unit][1] / medians[direct][1]
    );
    println!("the cage's cost for a gate check, start to end, p50 (goal: at most 2 ms):");
    for (caged, plain) in CASES
        .iter()
        .enumerate()
        .filter(|(_, c)| c.caged)
        .map(|(k, c)| (k, if c.systemd { unit } else { direct }))
    {
        let extra = medians[caged][1] - medians[plain][1];
        let verdict = if extra <= 2.0 { "within" } else { "OVER" };
        println!("  {:<46} {extra:+.2} ms ({verdict} the goal)", CASES[caged].name);
    }
}
