//! Benchmark behind `scripts/bench-systemd`: what starting a generation as a
//! transient unit of the user manager costs against starting it as the
//! kernel's own child, measured in one run, alternating the two.
//!
//! Each start goes through the kernel's own [`Runner`] with the limits a body
//! gets (MemoryMax, TasksMax), as `generation::start` does:
//! - "start": from asking until the program has been executed (the direct
//!   spawn returns after exec; the unit's start job is done after exec,
//!   `Type=exec`);
//! - "start to end": until its end has been seen (a SIGCHLD for the child,
//!   the unit's signals for the unit) of a program that exits at once.
//!
//! It must run where a user manager is on the session bus (the script runs
//! it under `scripts/with-systemd` when none is).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use teneral::runner::{Limits, Runner};
use teneral::settings::RunnerChoice;
use teneral::spawn::Spec;

fn main() -> Result<()> {
    let n: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(bench(n))
}

async fn bench(n: usize) -> Result<()> {
    teneral::spawn::start_reaper_of_own_children()?;
    let systemd = Runner::choose(RunnerChoice::Systemd, teneral::runner::Cage::Off).await?;
    let direct = Runner::direct(teneral::runner::Cage::Off);
    let limits = Limits {
        memory_max: Some(4 << 30),
        tasks_max: Some(2048),
        runtime_max: None,
        stop_timeout: Duration::from_secs(5),
        background: false,
    };
    let mut times: [(Vec<Duration>, Vec<Duration>); 2] = Default::default();
    for i in 0..n + 5 {
        for (k, runner) in [&direct, &systemd].into_iter().enumerate() {
            let unit = format!("teneral-gen-bench{i}.service");
            let spec = Spec::new("/bin/true", "/").env("PATH", "/usr/bin:/bin");
            let began = Instant::now();
            let mut running =
                runner.start(&unit, teneral::runner::Launch::new(spec, limits)).await?;
            let started = began.elapsed();
            let ended = running.wait().await;
            let total = began.elapsed();
            if !ended.exit.success() {
                bail!("{unit} ended with {}", ended.exit);
            }
            // The first few warm both paths up.
            if i >= 5 {
                times[k].0.push(started);
                times[k].1.push(total);
            }
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |v: &mut Vec<Duration>, p: usize| {
        v.sort_unstable();
        v[(v.len() - 1) * p / 100]
    };
    println!("starts of /bin/true through the kernel's runner, {n} each, alternating:");
    println!("{:<36} {:>10} {:>10} {:>10}", "", "p50 ms", "p90 ms", "mean ms");
    let mut medians = [[0.0; 2]; 2];
    for (k, name) in ["direct spawn", "transient unit (D-Bus)"].iter().enumerate() {
        for (j, what) in ["start", "start to end"].iter().enumerate() {
            let v = if j == 0 { &mut times[k].0 } else { &mut times[k].1 };
            let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
            let (p50, p90) = (pct(v, 50), pct(v, 90));
            medians[k][j] = ms(p50);
            println!(
                "{:<36} {:>10.2} {:>10.2} {:>10.2}",
                format!("{name}, {what}"),
                ms(p50),
                ms(p90),
                mean
            );
        }
    }
    println!(
        "ratio unit/direct (p50): start {:.1}x, start to end {:.1}x",
        medians[1][0] / medians[0][0],
        medians[1][1] / medians[0][1]
    );
    Ok(())
}
