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
    // Where the time goes: the helper's own start (it stops at reading its
    // arguments, before any namespace), and util-linux making the same
    // namespaces with no grant, Landlock or seccomp.
    let helper_start = vec![teneral.clone().into_os_string(), OsString::from("confine")];
    let lean_start =
        vec![target.join("release/teneral-confine").into_os_string(), OsString::from("confine")];
    // Not root (a kernel run as its owner, as in a container): the same
    // namespaces need a user namespace first, as the cage makes one.
    let root = rustix::process::geteuid().is_root();
    let flags: &[&str] =
        if root { &["-m", "-p", "-n", "-f"] } else { &["-U", "-r", "-m", "-p", "-n", "-f"] };
    let unshare: Vec<OsString> = std::iter::once("unshare")
        .chain(flags.iter().copied())
        .chain(std::iter::once("/bin/true"))
        .map(OsString::from)
        .collect();
    let unshare_name = if root { "unshare -m -p -n -f" } else { "unshare -U -r -m -p -n -f" };
    let mut cases: Vec<(&str, Vec<OsString>, i32)> = vec![
        ("plain fork+exec", truth(), 0),
        ("helper start only", helper_start, confine::EXIT_USAGE),
        ("lean helper start only", lean_start, confine::EXIT_USAGE),
        (unshare_name, unshare, 0),
        ("confined, generation", generation, 0),
        ("confined, gate", gate, 0),
    ];
    // Another build of the helper (`BEFORE=path/to/teneral`), measured in
    // the same run: before and after a change, under the same load.
    if let Some(before) = std::env::var_os("BEFORE") {
        let options = confine::Options { exe: Some(before.into()), ..confine::Options::default() };
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
        cases.push(("BEFORE, generation", generation, 0));
        cases.push(("BEFORE, gate", gate, 0));
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    for _ in 0..runs {
        for (i, (name, argv, expected)) in cases.iter().enumerate() {
            let start = Instant::now();
            let status = Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(&checkout)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .with_context(|| format!("{name}: cannot start"))?;
            times[i].push(start.elapsed());
            if status.code() != Some(*expected) {
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
    for ((name, _, _), median) in cases.iter().zip(&medians) {
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
