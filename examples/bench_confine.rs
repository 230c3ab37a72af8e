//! Benchmark behind `scripts/bench-confine`: what the cage adds to starting
//! a process. Runs `/bin/true` N times plainly (fork and exec) and N times
//! through `teneral confine` for the generation profile (mount namespace,
//! Landlock, capabilities, no_new_privs, seccomp) and the gate profile (the
//! same with a network namespace instead of the mount namespace),
//! interleaved so that the machine's load falls on all alike, and prints
//! the medians and the differences.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use teneral::confine::{self, Profile};

fn main() -> Result<()> {
    let runs: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(200);
    // Cargo runs this as <target>/release/examples/<name>, wherever
    // CARGO_TARGET_DIR puts <target>.
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
    let checkout = dir.path().join("checkout");
    std::fs::create_dir_all(&checkout)?;
    let truth = || vec![OsString::from("/bin/true")];
    let options = confine::Options { exe: Some(teneral.clone()), ..confine::Options::default() };
    let generation = confine::wrap_with(
        &Profile::Generation { home: home.clone(), forward: vec![] },
        &options,
        truth(),
    )?;
    let gate = confine::wrap_with(
        &Profile::Gate { checkout: checkout.clone(), writable: vec![] },
        &options,
        truth(),
    )?;
    let cases: [(&str, Vec<OsString>); 3] = [
        ("plain fork+exec", truth()),
        ("confined, generation", generation),
        ("confined, gate", gate),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    for _ in 0..runs {
        for (i, (name, argv)) in cases.iter().enumerate() {
            let start = Instant::now();
            let status = Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(&checkout)
                .stdin(Stdio::null())
                .status()
                .with_context(|| format!("{name}: cannot start"))?;
            times[i].push(start.elapsed());
            if !status.success() {
                bail!("{name}: {status}");
            }
        }
    }
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort();
            t[t.len() / 2].as_secs_f64() * 1000.0
        })
        .collect();
    println!("median of {runs} runs each of /bin/true:");
    for ((name, _), median) in cases.iter().zip(&medians) {
        let extra = median - medians[0];
        if extra == 0.0 {
            println!("  {name:<22} {median:7.3} ms");
        } else {
            let verdict = if extra <= 2.0 { "within" } else { "OVER" };
            println!("  {name:<22} {median:7.3} ms   +{extra:.3} ms ({verdict} the 2 ms goal)");
        }
    }
    Ok(())
}
