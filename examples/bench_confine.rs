//! Benchmark behind `scripts/bench-confine`: what the cage adds to starting
//! a process. Runs `/bin/true` N times plainly (fork and exec) and N times
//! through `teneral confine` for the generation profile (mount namespace,
//! Landlock, capabilities, no_new_privs, seccomp) and the gate profile (the
//! same with a network namespace instead of the mount namespace),
//! interleaved so that the machine's load falls on all alike, and prints
//! the medians and the differences.
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
    let zygotes = Zygotes { ours: zygote.as_ref(), before: zygote_before.as_ref() };
    // `PAUSE=<ms>`: a pause after each start, as between checks that do
    // not follow each other closely (an idle core is slower to wake).
    let pause = std::env::var("PAUSE").ok().map(|p| p.parse::<u64>()).transpose()?;
    let pause = pause.map(Duration::from_millis);
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    for _ in 0..runs {
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
    }
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort();
            t[t.len() / 2].as_secs_f64() * 1000.0
        })
        .collect();
    println!("load average before: {}", load());
    match pause {
        Some(pause) => {
            println!("median of {runs} runs each of /bin/true, {} ms apart:", pause.as_millis())
        }
        None => println!("median of {runs} runs each of /bin/true, back to back:"),
    }
    for ((name, _, _), median) in cases.iter().zip(&medians) {
        let extra = median - medians[0];
        if extra == 0.0 {
            println!("  {name:<26} {median:7.3} ms");
        } else {
            let verdict = if extra <= 2.0 { "within" } else { "OVER" };
            println!("  {name:<26} {median:7.3} ms   +{extra:.3} ms ({verdict} the 2 ms goal)");
        }
    }
    let median = |name: &str| cases.iter().position(|c| c.0 == name).map(|i| medians[i]);
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
    let confined: Vec<_> = cases.iter().filter(|(name, _, _)| name.contains(", ")).collect();
    steps(&zygotes, &confined, &checkout, runs)
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
    let pid = zygote.launch(&request).with_context(|| format!("{name}: cannot start"))?;
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
