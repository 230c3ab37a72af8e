//! `teneral`: the kernel. `teneral run` supervises an individual.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "teneral",
    version,
    about = "The supervisor of an agent that rewrites its own code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Supervise the individual in DIR (default: the current directory) in
    /// the foreground: the launcher, which starts the current generation's kernel.
    Run {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// The kernel itself, as the launcher starts it (docs/contract.md, The launcher).
    #[command(hide = true)]
    Kernel {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// For the pins of the checkout in DIR (default: here; the workspace is
    /// .teneral/candidate), do what the gate will do: check each archive's
    /// hash, unpack it, run its check. Prints the directory to use as
    /// TENERAL_ORGANS. The cache is the individual's: the nearest directory at
    /// or above DIR that holds .teneral/.
    Organs {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Seconds each check may run (the gate gives 60).
        #[arg(long, default_value_t = 60, hide = true)]
        check_seconds: u64,
        /// Run the checks in the cage's organ profile, as the mutation gate
        /// does (not from inside a generation: cages do not nest).
        #[arg(long, hide = true)]
        cage: bool,
    },
    /// Serve the stand-in model on loopback (both wire protocols).
    Standin {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// The bearer key requests must carry; when not given, the one in
        /// TENERAL_STANDIN_KEY, else any non-empty key.
        #[arg(long)]
        key: Option<String>,
        /// A script of replies, tool calls, errors and delays (JSON Lines).
        #[arg(long)]
        script: Option<PathBuf>,
        /// Append every request to this file as a JSON line.
        #[arg(long)]
        log: Option<PathBuf>,
        /// How long the sign-in stand-in's access tokens live, in seconds.
        #[arg(long)]
        token_lifetime: Option<u64>,
        /// End once nothing reads its stdout any longer (the kernel that
        /// started it is gone).
        #[arg(long, hide = true)]
        end_with_stdout: bool,
    },
    /// Run a program confined (the cage's helper; the kernel writes its arguments).
    #[command(hide = true)]
    Confine {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Unpack the organ archive on stdin into STAGING (an empty directory),
    /// as the kernel runs it in the cage's unpack profile; print what was
    /// unpacked and the SHA-256 of what was read.
    #[command(hide = true)]
    UnpackOrgan {
        staging: PathBuf,
        /// The length of the path the tree will be used at (names must fit
        /// in PATH_MAX behind it).
        #[arg(long)]
        root_len: usize,
        /// Milliseconds the unpacking may take.
        #[arg(long)]
        limit_ms: u64,
    },
    /// Print the kernel's named durability points, one a line (for
    /// TENERAL_TEST_CRASH_AT=<name>[@<n>], which kills the kernel there).
    CrashPoints,
    /// Kill what is left of the process groups FILE lists once stdin ends
    /// (the kernel starts this keeper; its stdin ends with the kernel), if
    /// FILE is still the list of the kernel KERNEL (`<pid>:<start time>`).
    #[command(hide = true)]
    KeepChildren { file: PathBuf, kernel: String },
    /// Run the last N owner lines and inbox envelopes of the individual in
    /// DIR through generations FROM and TO, each on throwaway individuals in
    /// the cage against the stand-in model, and print them side by side.
    /// Changes nothing of the individual (teneralctl replay runs this).
    Replay {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// A generation: 7 or more hex digits of its commit, its number in
        /// `teneralctl generations` (1 is the oldest), or `current`.
        #[arg(long)]
        from: String,
        /// The other generation, named the same way.
        #[arg(long)]
        to: String,
        /// How many of the last stimuli to replay.
        #[arg(long, default_value_t = 5)]
        last: usize,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Also time one smoke run of FROM's body (scripts/bench-generations;
        /// it uses the gate's smoke place, so not while the kernel runs).
        #[arg(long, hide = true)]
        smoke: bool,
    },
    /// Run the mutation gate's checks on COMMIT of the individual in DIR as
    /// on a fresh seed (organs, type check, tests, build, smoke; in the
    /// cage; no path rule), then the owner's --also
    /// command in the same cage on the same tree; print one JSON object
    /// (teneralctl offer check and witness run this). Exit 1 when anything failed.
    OfferGates {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The commit (or a ref naming it).
        commit: String,
        /// A shell command run with `sh -c` in the checkout, in the cage.
        #[arg(long)]
        also: Option<String>,
    },
    /// Run the kernel's event channel alone, for testing a body against it.
    #[command(hide = true)]
    ServeEvents {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        home: PathBuf,
        #[arg(long, value_parser = teneral::commit::Commit::parse)]
        commit: teneral::commit::Commit,
    },
}

fn main() -> ExitCode {
    // The cage's helper runs before anything else exists (no runtime, no
    // thread), and on success becomes the confined program.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "confine") {
        let status = teneral_cage::helper::main(&args[2..]);
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    // Before any thread: one malloc arena for all (an arena per thread keeps
    // its own pages resident in an idle kernel).
    teneral::sys::one_malloc_arena();
    teneral::sys::sync_git_writes();
    let cli = Cli::parse();
    match &cli.command {
        Command::KeepChildren { file, kernel } => {
            return ExitCode::from(
                u8::try_from(teneral::spawn::keeper_main(file, kernel)).unwrap_or(1),
            )
        }
        Command::UnpackOrgan { staging, root_len, limit_ms } => {
            let limit = std::time::Duration::from_millis(*limit_ms);
            return ExitCode::from(teneral::organs::unpacker::child_main(
                staging, *root_len, limit,
            ));
        }
        Command::CrashPoints => {
            for (name, what) in teneral::crash::POINTS {
                println!("{name}\t{what}");
            }
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    // A blocking-pool thread left idle ends after its keep-alive, and that
    // end is a wake-up of a kernel at rest (tokio's default is 10 s, inside
    // any idle minute); one hour keeps the few the kernel uses asleep.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_keep_alive(std::time::Duration::from_secs(3600))
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("teneral: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let result: anyhow::Result<i32> = runtime.block_on(async {
        match cli.command {
            Command::Run { dir } => {
                let in_process: teneral::launcher::InProcess<'_> = Box::new(|home| {
                    let home = home.to_owned();
                    Box::pin(async move {
                        teneral::supervisor::run(&home).await.map_err(|e| e.to_string())
                    })
                });
                Ok(teneral::launcher::run(&dir, in_process).await?)
            }
            Command::Kernel { dir } => kernel(&dir).await,
            Command::Organs { dir, check_seconds, cage } => organs(&dir, check_seconds, cage).await,
            Command::Standin { listen, key, script, log, token_lifetime, end_with_stdout } => {
                let key = key.or_else(|| {
                    std::env::var(teneral::standin::child::KEY_VARIABLE)
                        .ok()
                        .filter(|k| !k.is_empty())
                });
                let config = teneral::standin::Config { key, script, log, token_lifetime };
                teneral::standin::run_cli(listen, config, end_with_stdout).await?;
                Ok(0)
            }
            // Dispatched before parsing, in main; never reached.
            Command::Confine { .. } => Ok(teneral_cage::EXIT_USAGE),
            Command::KeepChildren { .. } | Command::CrashPoints | Command::UnpackOrgan { .. } => {
                Ok(0)
            }
            Command::Replay { dir, from, to, last, json, smoke } => {
                let options = teneral::replay::Options { from, to, last, smoke };
                Ok(teneral::replay::main(&dir, &options, json).await?)
            }
            Command::OfferGates { dir, commit, also } => {
                Ok(teneral::offer::cli::main(&dir, &commit, also.as_deref()).await?)
            }
            Command::ServeEvents { socket, home, commit } => {
                teneral::events::serve_alone(&socket, &home, &commit).await?;
                Ok(0)
            }
        }
    });
    match result {
        Ok(status) => ExitCode::from(u8::try_from(status).unwrap_or(1)),
        Err(e) => {
            eprintln!("teneral: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// `teneral kernel`: the supervisor, once it knows its launcher can start it.
async fn kernel(dir: &std::path::Path) -> anyhow::Result<i32> {
    use teneral::launcher::contract;
    let needed = contract::own_needs()?;
    let have = contract::launcher_here();
    if needed > have {
        eprintln!("teneral: {}", contract::update_the_install("this kernel", needed, have));
        return Ok(contract::EXIT_UPDATE_INSTALL);
    }
    Ok(teneral::supervisor::run(dir).await?)
}

/// `teneral organs`: the gate's organ step for a workspace.
async fn organs(dir: &std::path::Path, check_seconds: u64, cage: bool) -> anyhow::Result<i32> {
    let checkout = dir.canonicalize().map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let Some(home) = teneral::organs::individual_of(&checkout) else {
        anyhow::bail!(
            "{} is not inside an individual (no directory at or above it holds .teneral/); \
             run this in the workspace, .teneral/candidate",
            checkout.display()
        );
    };
    teneral::spawn::start_reaper()?;
    let env = teneral::generation::toolchain_env();
    let grace = std::time::Duration::from_secs(5);
    let limits = teneral::runner::Limits::none(grace)
        .with_runtime_max(Some(std::time::Duration::from_secs(check_seconds)));
    let cage = match cage {
        true => {
            teneral::runner::Cage::On { exe: std::env::current_exe()?, pretend_missing: vec![] }
        }
        false => teneral::runner::Cage::Off,
    };
    let runner = teneral::runner::Runner::direct(cage);
    let program = std::env::current_exe()?;
    let mut unpacker = teneral::organs::Unpacker::new(&runner, &program);
    unpacker.stop_timeout = grace;
    match teneral::organs::gate(&home, &checkout, &env, &unpacker, limits, "workspace").await? {
        Some(set) => println!("{}", set.display()),
        None => eprintln!(
            "teneral: {} pins no organs (no body/organs.json, or {{}}): leave TENERAL_ORGANS unset",
            checkout.display()
        ),
    }
    Ok(0)
}
