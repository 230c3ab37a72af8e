//! Benchmark behind `scripts/bench-confine`: what the cage adds to starting
//! a process. Runs `/bin/true` N times plainly (fork and exec) and N times
//! through `teneral confine` for the generation profile (mount namespace,
//! Landlock, capabilities, no_new_privs, seccomp) and the gate profile (the
//! same with a network namespace instead of the mount namespace),
//! interleaved so that the machine's load falls on all alike, and prints
//! the medians and the differences.
//!
//! Beside them, bubblewrap starting `/bin/true` with the nearest policy,
//! and the gate check as the kernel starts it (`Runner::run`) under each
//! runner this machine has, each with its extra over a plain start and
//! that extra's ratio to bubblewrap's (goal: at most 0.5).
//!
//! Then it runs each confined case again with `TENERAL_BENCH_CONFINE_FD`
//! (`teneral_cage::steps`), and prints where the time goes: the median time of
//! each step of the cage (from the end of the step before it), with the
//! machine's load average beside the figures.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;

use teneral::confine::{self, Profile};
use teneral_cage::zygote::{Request, Zygote};

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
        ("helper start only", helper_start, teneral_cage::EXIT_USAGE),
        ("lean helper start only", lean_start, teneral_cage::EXIT_USAGE),
        (unshare_name, unshare, 0),
        ("confined, generation", generation, 0),
        ("confined, gate", gate, 0),
    ];
    // Another build of the helper (`BEFORE=path/to/teneral`), measured in
    // the same run: before and after a change, under the same load; its
    // zygote too, when asked and it lies beside that build.
    let before = std::env::var_os("BEFORE").map(PathBuf::from);
    let with_zygote = std::env::var_os("ZYGOTE").is_none_or(|z| z != "0");
    let mut zygote_before = None;
    if let Some(before) = &before {
        let options = confine::Options { exe: Some(before.clone()), ..confine::Options::default() };
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
        // That helper was built from other sources: it is not told ours.
        let unnamed = |argv: Vec<OsString>| -> Vec<OsString> {
            let at = argv.iter().position(|a| a == "--source");
            let mut argv = argv;
            if let Some(at) = at {
                argv.drain(at..(at + 2).min(argv.len()));
            }
            argv
        };
        cases.push(("BEFORE, generation", unnamed(generation), 0));
        cases.push(("BEFORE, gate", unnamed(gate), 0));
        let lean = before.with_file_name("teneral-confine");
        // Only when asked (`BEFORE_ZYGOTE=1`): the two zygotes must speak
        // the same protocol to the kernel's side, which this build's is.
        if lean.exists()
            && with_zygote
            && std::env::var_os("BEFORE_ZYGOTE").is_some_and(|z| z == "1")
        {
            zygote_before = Some(teneral::spawn::start_zygote(&lean, &source_of(&lean)?)?);
            let options = confine::Options { exe: Some(lean), ..confine::Options::default() };
            for (name, profile) in [
                (
                    BEFORE_ZYGOTE_GENERATION,
                    Profile::Generation { home: home.clone(), forward: vec![] },
                ),
                (
                    BEFORE_ZYGOTE_GATE,
                    Profile::Gate { checkout: checkout.clone(), writable: vec![] },
                ),
            ] {
                cases.push((name, unnamed(confine::wrap_with(&profile, &options, truth())?), 0));
            }
        }
    }
    // The zygote (`teneral-confine zygote`): the same plans, forked by it
    // from a spare that made its namespaces ahead (`ZYGOTE=0` leaves it out).
    let lean = target.join("release/teneral-confine");
    let zygote = if with_zygote {
        Some(teneral::spawn::start_zygote(&lean, teneral_cage::SOURCE_ID)?)
    } else {
        None
    };
    if zygote.is_some() {
        let options = confine::Options { exe: Some(lean.clone()), ..confine::Options::default() };
        for (name, profile) in [
            (ZYGOTE_GENERATION, Profile::Generation { home: home.clone(), forward: vec![] }),
            (ZYGOTE_GATE, Profile::Gate { checkout: checkout.clone(), writable: vec![] }),
        ] {
            cases.push((name, confine::wrap_with(&profile, &options, truth())?, 0));
        }
    }
    // Bubblewrap, what an owner would otherwise use: /bin/true with the
    // policy nearest the gate profile's (user, mount, PID, network and IPC
    // namespaces, the plan's grants bound, a fresh /proc, /dev and /tmp).
    let gate_argv = cases.iter().find(|c| c.0 == "confined, gate").map(|c| c.1.clone());
    let bwrap = gate_argv.as_deref().and_then(|gate| bwrap_argv(gate, &checkout));
    match &bwrap {
        Some(argv) => cases.push((BWRAP, argv.clone(), 0)),
        None => println!("bubblewrap: not measured (no bwrap on PATH; scripts/deps installs it)"),
    }
    let zygotes = Zygotes { ours: zygote.as_ref(), before: zygote_before.as_ref() };
    // The same check started as the kernel starts it (`Runner::run`), under
    // each runner this machine has, through a zygote of its own.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async { teneral::spawn::start_reaper_of_own_children() })?;
    if with_zygote {
        teneral::spawn::use_zygote(teneral::spawn::start_zygote(&lean, teneral_cage::SOURCE_ID)?);
    }
    let runners = InRuntime { cases: rt.block_on(runners(&teneral, &checkout)), rt: &rt };
    // `PAUSE=<ms>`: a pause after each start, as between checks that do
    // not follow each other closely (an idle core is slower to wake).
    let pause = std::env::var("PAUSE").ok().map(|p| p.parse::<u64>()).transpose()?;
    let pause = pause.map(Duration::from_millis);
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    let mut runner_times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); runners.len()];
    for round in 0..runs {
        for (i, (name, argv, expected)) in cases.iter().enumerate() {
            let start = Instant::now();
            let code = run(zygotes.of(name), name, argv, &checkout, None)?;
            times[i].push(start.elapsed());
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            if code != *expected {
                bail!("{name}: exit status {code}");
            }
        }
        for (i, case) in runners.iter().enumerate() {
            let took = rt.block_on(case.start_once(round, &checkout))?;
            runner_times[i].push(took);
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
        }
    }
    let median_ms = |t: &mut Vec<Duration>| {
        t.sort();
        t[t.len() / 2].as_secs_f64() * 1000.0
    };
    let medians: Vec<f64> = times.iter_mut().map(median_ms).collect();
    let runner_medians: Vec<f64> = runner_times.iter_mut().map(median_ms).collect();
    println!("load average before: {}", load());
    match pause {
        Some(pause) => {
            println!("median of {runs} runs each of /bin/true, {} ms apart:", pause.as_millis())
        }
        None => println!("median of {runs} runs each of /bin/true, back to back:"),
    }
    let median = |name: &str| cases.iter().position(|c| c.0 == name).map(|i| medians[i]);
    // The peer's extra time over a plain start: the goal is half of it.
    let peer = median(BWRAP).map(|m| m - medians[0]);
    let against_peer = |extra: f64| match peer {
        Some(peer) if peer > 0.0 => format!("{:.2}x bubblewrap's extra", extra / peer),
        _ => String::new(),
    };
    for ((name, _, _), median) in cases.iter().zip(&medians) {
        let extra = median - medians[0];
        if extra == 0.0 {
            println!("  {name:<26} {median:7.3} ms");
        } else {
            println!("  {name:<26} {median:7.3} ms   +{extra:.3} ms   {}", against_peer(extra));
        }
    }
    println!(
        "\nthe gate check's start as the kernel makes it (Runner::run of /bin/true to its end), \
         the extra over the plain fork+exec above; goal: at most 0.5x bubblewrap's extra{}:",
        peer.map(|p| format!(" (+{p:.3} ms, so +{:.3} ms)", p / 2.0)).unwrap_or_default()
    );
    for (case, median) in runners.iter().zip(&runner_medians) {
        let extra = median - medians[0];
        let verdict = match (case.caged, peer) {
            (true, Some(peer)) if extra <= peer / 2.0 => "  within the goal",
            (true, Some(_)) => "  OVER the goal",
            _ => "",
        };
        println!(
            "  {:<40} {median:7.3} ms   +{extra:.3} ms   {}{verdict}",
            case.name,
            against_peer(extra)
        );
    }
    for (name, why) in rt.block_on(async { missing_runners() }) {
        println!("  {name:<40} not measured: {why}");
    }
    if !runners.is_empty() {
        println!("  launches the zygote took: {}", teneral::spawn::zygote_launches());
    }
    for (new, old) in [
        (ZYGOTE_GATE, "confined, gate"),
        (ZYGOTE_GENERATION, "confined, generation"),
        (ZYGOTE_GATE, BEFORE_ZYGOTE_GATE),
        (ZYGOTE_GENERATION, BEFORE_ZYGOTE_GENERATION),
    ] {
        if let (Some(a), Some(b)) = (median(new), median(old)) {
            println!("  {new} / {old}: {:.2}", a / b);
        }
    }
    println!("load average after: {}", load());
    drop(runners);
    let confined: Vec<_> = cases.iter().filter(|(name, _, _)| name.contains(", ")).collect();
    steps(&zygotes, &confined, &checkout, runs)
}

const BWRAP: &str = "bubblewrap (bwrap)";

/// `bwrap` starting the program of the gate profile's helper arguments
/// `gate` with the nearest policy bubblewrap has: new user, mount, PID,
/// network and IPC namespaces, each grant of the plan bound (read-only
/// unless writable), a fresh /proc, /dev and /tmp, the checkout as the
/// working directory, and death with its parent. `None` without `bwrap`.
fn bwrap_argv(gate: &[OsString], checkout: &std::path::Path) -> Option<Vec<OsString>> {
    let bwrap = std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("bwrap"))
        .find(|p| p.is_file())?;
    let mut argv: Vec<OsString> = vec![bwrap.into_os_string()];
    for flag in [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ] {
        argv.push(flag.into());
    }
    // A fresh /proc, /dev (with null, zero, full, random and urandom, the
    // devices the plan grants) and /tmp first: the plan's checkout may lie
    // below /tmp. A merged /usr's links, as the cage's new root has them.
    for (flag, place) in [("--proc", "/proc"), ("--dev", "/dev"), ("--tmpfs", "/tmp")] {
        argv.push(flag.into());
        argv.push(place.into());
    }
    for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let at = std::path::Path::new("/").join(top);
        if let Ok(target) = std::fs::read_link(&at) {
            argv.push("--symlink".into());
            argv.push(target.into_os_string());
            argv.push(at.into_os_string());
        }
    }
    let split = gate.iter().position(|a| a == "--")?;
    let mut plan = gate[..split].iter();
    while let Some(arg) = plan.next() {
        let bind = match arg.to_str() {
            Some("--read" | "--exec" | "--consume") => "--ro-bind-try",
            Some("--write" | "--read-write") => "--bind-try",
            Some("--list") => "--dir",
            _ => continue,
        };
        let path = plan.next()?;
        let fresh = |top: &str| std::path::Path::new(path).starts_with(top);
        if fresh("/proc") || fresh("/dev") {
            continue;
        }
        argv.push(bind.into());
        argv.push(path.clone());
        if bind != "--dir" {
            argv.push(path.clone());
        }
    }
    argv.push("--chdir".into());
    argv.push(checkout.as_os_str().to_owned());
    argv.extend(gate[split + 1..].iter().cloned());
    Some(argv)
}

/// The runners' cases, dropped inside the runtime however the measurement
/// ends (an error returned as much as its end): a bus connection's proxies
/// remove their subscriptions in a task of it, and outside one zbus panics.
struct InRuntime<'a> {
    cases: Vec<RunnerCase>,
    rt: &'a tokio::runtime::Runtime,
}

impl std::ops::Deref for InRuntime<'_> {
    type Target = Vec<RunnerCase>;
    fn deref(&self) -> &Vec<RunnerCase> {
        &self.cases
    }
}

impl Drop for InRuntime<'_> {
    fn drop(&mut self) {
        let cases = std::mem::take(&mut self.cases);
        self.rt.block_on(async move { drop(cases) });
    }
}

/// One runner's start of /bin/true, plainly or as a gate check.
struct RunnerCase {
    name: String,
    runner: teneral::runner::Runner,
    caged: bool,
}

impl RunnerCase {
    /// Starts it once and waits for its end; how long that took.
    async fn start_once(&self, round: usize, checkout: &std::path::Path) -> Result<Duration> {
        use teneral::runner::{Launch, Limits, Profile};
        let spec = teneral::spawn::Spec::new("/bin/true", checkout).env("PATH", "/usr/bin:/bin");
        let limits = Limits {
            memory_max: Some(1 << 30),
            tasks_max: Some(512),
            runtime_max: Some(Duration::from_secs(60)),
            stop_timeout: Duration::from_secs(5),
            background: false,
        };
        let mut launch = Launch::new(spec, limits);
        if self.caged {
            let gate = Profile::Gate { checkout: checkout.to_owned(), writable: vec![] };
            launch = launch.caged(gate);
        }
        // A name of its own each time: the manager unloads the last one
        // after its end, and a start never waits for that.
        let unit = format!("teneral-gate-bench-{}-{round}.service", std::process::id());
        let start = Instant::now();
        let (ended, running) = self.runner.run(&unit, launch).await?;
        let took = start.elapsed();
        if ended.exit != teneral::spawn::Exit::Code(0) {
            bail!("{}: {} ({})\n{}", self.name, ended.exit, ended.result, running.output_tail());
        }
        Ok(took)
    }
}

/// The runners this machine has, each with a plain and a caged case.
async fn runners(teneral: &std::path::Path, checkout: &std::path::Path) -> Vec<RunnerCase> {
    use teneral::runner::{cgroup::Delegated, Cage, Runner};
    let _ = checkout;
    let cage = Cage::On { exe: teneral.to_owned(), pretend_missing: vec![] };
    let mut found = vec![("direct runner", Runner::direct(cage.clone()), "zygote")];
    if let Ok(delegated) = Delegated::find() {
        found.push(("cgroup runner", Runner::cgroup(delegated, cage.clone()), "zygote"));
    }
    let systemd = Runner::choose(teneral::settings::RunnerChoice::Systemd, cage).await;
    if let Ok(runner) = systemd {
        found.push(("systemd runner", runner, "zygote, scope"));
    }
    let mut cases = Vec::new();
    for (name, runner, how) in found {
        let plain = format!("{name}, plain");
        cases.push(RunnerCase { name: plain, runner: runner.clone(), caged: false });
        let caged = format!("{name}, gate check ({how})");
        cases.push(RunnerCase { name: caged, runner, caged: true });
    }
    cases
}

/// The runners not measured here, and why.
fn missing_runners() -> Vec<(&'static str, String)> {
    let mut missing = Vec::new();
    if let Err(e) = teneral::runner::cgroup::Delegated::find() {
        missing.push(("cgroup runner", e.to_string()));
    }
    if std::env::var_os("TENERAL_TEST_SYSTEMD").is_none() {
        missing.push((
            "systemd runner",
            "no user manager for this run (scripts/with-systemd scripts/bench-confine gives it one)"
                .to_owned(),
        ));
    }
    missing
}

const ZYGOTE_GATE: &str = "zygote, gate";
const ZYGOTE_GENERATION: &str = "zygote, generation";
const BEFORE_ZYGOTE_GATE: &str = "BEFORE zygote, gate";
const BEFORE_ZYGOTE_GENERATION: &str = "BEFORE zygote, generation";

/// The zygote of this build and that of `BEFORE`'s, when there are.
struct Zygotes<'a> {
    ours: Option<&'a Zygote>,
    before: Option<&'a Zygote>,
}

impl Zygotes<'_> {
    /// The zygote that starts case `name`; none for a case it does not.
    fn of(&self, name: &str) -> Option<&Zygote> {
        if name.starts_with("BEFORE zygote") {
            self.before
        } else if name.starts_with("zygote") {
            self.ours
        } else {
            None
        }
    }
}

/// The sources another build of `teneral-confine` names as its own, read
/// from its refusal of a zygote started for other sources.
fn source_of(lean: &std::path::Path) -> Result<String> {
    let out = Command::new(lean).args(["zygote", "--source", "?"]).stdin(Stdio::null()).output()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let id = text.split_once('(').and_then(|(_, rest)| rest.split_once(')')).map(|(id, _)| id);
    match id {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => bail!("{} did not name its sources: {text}", lean.display()),
    }
}

/// Runs one case to its end: its exit status (128 + a signal). A case
/// with a `zygote` is sent to it; `steps` is the descriptor for the cage's
/// steps.
fn run(
    zygote: Option<&Zygote>,
    name: &str,
    argv: &[OsString],
    dir: &std::path::Path,
    steps: Option<i32>,
) -> Result<i32> {
    let Some(zygote) = zygote else {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(dir).stdin(Stdio::null()).stderr(Stdio::null());
        if let Some(fd) = steps {
            cmd.env(teneral_cage::steps::ENV, fd.to_string());
        }
        let status = cmd.status().with_context(|| format!("{name}: cannot start"))?;
        return Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
    };
    use std::os::fd::OwnedFd;
    let null = || -> Result<OwnedFd> { Ok(std::fs::File::open("/dev/null")?.into()) };
    let mut fds =
        vec![(0, null()?), (1, std::io::stdout().as_fd().try_clone_to_owned()?), (2, null()?)];
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    if let Some(fd) = steps {
        env.push((teneral_cage::steps::ENV.into(), fd.to_string().into()));
        let file = std::fs::OpenOptions::new().append(true).open(format!("/proc/self/fd/{fd}"))?;
        fds.push((fd, file.into()));
    }
    let request = Request { args: argv[1..].to_vec(), cwd: dir.to_owned(), env, fds };
    if let Some(fd) = steps {
        let line = format!("request made {}\n", monotonic_ns());
        // SAFETY: a write of a live buffer to a descriptor this program holds.
        unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
    }
    let pid = zygote.launch(&request).with_context(|| format!("{name}: cannot start"))?.pid;
    let pid = rustix::process::Pid::from_raw(pid as i32).context("no pid")?;
    let (_, status) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())?
        .context("no status")?;
    Ok(status.exit_status().or(status.terminating_signal().map(|s| 128 + s)).unwrap_or(-1))
}

/// The 1, 5 and 15 minute load averages.
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn monotonic_ns() -> i128 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

/// Runs each case `runs` times (interleaved) with the cage writing when
/// each step ended, and prints the median time of each step.
fn steps(
    zygotes: &Zygotes,
    cases: &[&(&str, Vec<OsString>, i32)],
    dir: &std::path::Path,
    runs: usize,
) -> Result<()> {
    use std::io::{Read, Seek};
    use std::os::fd::AsRawFd;
    let mut log = tempfile::tempfile()?;
    // A copy without close-on-exec: the helper inherits it.
    // SAFETY: dup of a descriptor this program holds open.
    let fd = unsafe { libc::dup(log.as_raw_fd()) };
    if fd < 0 {
        bail!("dup: {}", std::io::Error::last_os_error());
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")?.lines().count();
    println!(
        "\nwhere the time goes ({runs} runs each; load average {}; {mounts} mounts on the host, \
         which a new mount namespace copies):",
        load()
    );
    let mut all: Vec<Vec<(String, Vec<f64>)>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        for (i, (name, argv, expected)) in cases.iter().enumerate() {
            log.set_len(0)?;
            log.rewind()?;
            let start = monotonic_ns();
            let code = run(zygotes.of(name), name, argv, dir, Some(fd))?;
            let end = monotonic_ns();
            if code != *expected {
                bail!("{name}: exit status {code}");
            }
            let mut text = String::new();
            log.rewind()?;
            log.read_to_string(&mut text)?;
            let mut marks = teneral_cage::steps::parse(&text);
            marks.sort_by_key(|(_, ns)| *ns);
            marks.push(("the helper's end seen".into(), end));
            let mut last = start;
            // Steps that recur (grants before and after /proc) add up.
            let mut run: Vec<(String, f64)> = Vec::new();
            for (step, ns) in marks {
                let ms = (ns - last) as f64 / 1e6;
                last = ns;
                match run.iter_mut().find(|(s, _)| *s == step) {
                    Some((_, sum)) => *sum += ms,
                    None => run.push((step, ms)),
                }
            }
            for (step, ms) in run {
                match all[i].iter_mut().find(|(s, _)| *s == step) {
                    Some((_, times)) => times.push(ms),
                    None => all[i].push((step, vec![ms])),
                }
            }
        }
    }
    for ((name, argv, _), steps) in cases.iter().zip(all.iter_mut()) {
        let grants =
            argv.iter().filter(|a| a.to_str().is_some_and(|a| a.starts_with("--"))).count();
        println!("  {name} ({grants} plan arguments):");
        let mut total = 0.0;
        for (step, times) in steps.iter_mut() {
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            total += median;
            println!("    {step:<30} {median:7.3} ms");
        }
        println!("    {:<30} {total:7.3} ms", "(sum of the medians)");
    }
    println!("load average after: {}", load());
    Ok(())
}
