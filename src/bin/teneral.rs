//! `teneral`: the kernel. `teneral run` supervises an individual.
use std::process::ExitCode;

use clap::Parser;
use teneral::cli::{Cli, Command};

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
        Command::UnpackOrgan { staging, root_len, limit_ms, steps } => {
            let limit = std::time::Duration::from_millis(*limit_ms);
            return ExitCode::from(teneral::organs::unpacker::child_main(
                staging, *root_len, limit, *steps,
            ));
        }
        Command::CrashPoints => {
            for (name, what) in teneral_core::crash::POINTS {
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
                teneral_core::log::own_stdout();
                let in_process: teneral::launcher::InProcess<'_> = Box::new(|home| {
                    let home = home.to_owned();
                    Box::pin(async move {
                        teneral::supervisor::run(&home).await.map_err(|e| e.to_string())
                    })
                });
                Ok(teneral::launcher::run(&dir, in_process).await?)
            }
            Command::Kernel { dir } => {
                teneral_core::log::own_stdout();
                kernel(&dir).await
            }
            Command::Organs { dir, check_seconds, cage } => organs(&dir, check_seconds, cage).await,
            Command::Standin {
                listen,
                key,
                script,
                scripted,
                log,
                token_lifetime,
                end_with_stdout,
            } => {
                let key = key.or_else(|| {
                    std::env::var(teneral::standin::child::KEY_VARIABLE)
                        .ok()
                        .filter(|k| !k.is_empty())
                });
                let config =
                    teneral::standin::Config { key, script, scripted, log, token_lifetime };
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
            Command::Evals { dir, generation, json, smoke, from_journal } => {
                let options =
                    teneral::evals::now::Options { generation, json, smoke, from_journal };
                Ok(teneral::evals::now::main(&dir, &options).await?)
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
