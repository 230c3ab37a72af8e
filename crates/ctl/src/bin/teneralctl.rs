//! `teneralctl`: the owner's commands for a running individual.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "teneralctl", version, about = "Talk to and steer a teneral individual")]
struct Cli {
    /// Run this teneralctl (the install's) for talk, back and accept, not the
    /// generation's own: for when the generation's client is what is broken.
    #[arg(long, global = true)]
    install: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Attach to the conversation; lines typed or piped go to the agent as its owner's.
    Talk {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// Seconds of journal silence after which a piped line gives up (exit 1).
        #[arg(long, default_value_t = 300)]
        wait: u64,
        /// The plain text client even at a terminal: no panel, no input box.
        #[arg(long)]
        plain: bool,
    },
    /// Send the agent back to the generation before the current one, or to COMMIT.
    Back {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// An earlier generation's commit: 7 or more of its hex digits.
        #[arg(conflicts_with = "list")]
        commit: Option<String>,
        /// List the generations, oldest first: when each became ready, its replies, the current one.
        #[arg(long)]
        list: bool,
        /// Seconds to wait for a running kernel to make the change.
        #[arg(long, default_value_t = teneralctl::back::ANSWER_WAIT.as_secs())]
        wait: u64,
        /// With --list: one JSON array, with each generation's timestamps.
        #[arg(long, requires = "list")]
        json: bool,
    },
    /// What each generation did, oldest first, counted from the kernel's journal: turns and
    /// their latency, tool calls and failures, model requests, crashes, mutations.
    Generations {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// One JSON object for scripts, with every figure and timestamp.
        #[arg(long, conflicts_with = "plot")]
        json: bool,
        /// Count only events since this time (UTC): 2026-11-30 or 2026-11-30T10:00:00Z.
        #[arg(long)]
        since: Option<String>,
        /// Only the generation(s) whose commit starts with these hex digits.
        #[arg(long)]
        commit: Option<String>,
        /// Draw median latency and tool failure rate per generation as a small chart.
        #[arg(long)]
        plot: bool,
        /// Write the same chart as an SVG to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Run the last N owner lines and inbox envelopes through two generations, each on
    /// throwaway individuals in the cage against the stand-in model, and show them side by
    /// side. Changes nothing of the individual; reaches no provider.
    Replay {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// A generation: 7 or more hex digits of its commit, its number as
        /// `generations` lists them (1 is the oldest), or `current`.
        #[arg(long)]
        from: String,
        /// The other generation, named the same way.
        #[arg(long)]
        to: String,
        /// How many of the last stimuli to replay.
        #[arg(long, default_value_t = 5)]
        last: usize,
        /// One JSON object for scripts, with every figure.
        #[arg(long)]
        json: bool,
    },
    /// Accept the species commit the agent asked about, or COMMIT, and every
    /// species commit before it: its kernel may then be taken in.
    Accept {
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The species commit: 7 or more of its hex digits.
        commit: Option<String>,
    },
    /// Say whether teneral runs, at which generation, what it is doing, and
    /// why it stopped when it stopped by itself. Exit status 3 when it does not run.
    Status {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// One JSON object, with timestamps, instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Choose the model provider: its address, key and model, two test
    /// requests, then the provider's settings written into .env (the rest kept).
    Setup {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// Ask the questions as lines, also when stdin is not a terminal (one answer a line).
        #[arg(long)]
        plain: bool,
    },
    /// What the individual offers to the species: its key, the check, approval and publishing.
    Offer {
        #[command(subcommand)]
        command: OfferCommand,
    },
    /// Print the shell completions for SHELL (scripts/install puts them in place).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; scripts/install puts it in place).
    Man,
}

#[derive(Subcommand)]
enum OfferCommand {
    /// Print the individual's public key (made the first time) and how to verify its signatures.
    Key {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
    },
    /// Check an offer/<name> branch as a stranger would: descent, the scan, signatures, message.
    /// The report is printed and kept in .teneral/offers/<commit>.json; exit 1 when anything fails.
    Check {
        /// The branch: offer/<name> or <name>.
        branch: String,
        /// The species' head to check against (default: TENERAL_UPSTREAM of .env).
        #[arg(long)]
        base: Option<String>,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// Print the report as JSON instead of lines.
        #[arg(long)]
        json: bool,
        /// Also print how long reading, scanning and the gates took (scripts/bench-offer).
        #[arg(long, hide = true)]
        timings: bool,
        /// Leave out the mutation gate's checks (organs, type check, tests, smoke), which
        /// the kernel program runs in the cage; the report says they were not run.
        #[arg(long)]
        no_gates: bool,
    },
    /// The offer branches, read from git: each one's check, approval and pull request.
    List {
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
    },
    /// Approve exactly one checked commit for publishing (7 or more of its hex digits).
    Approve {
        commit: String,
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
    },
    /// Type the forge token (not shown); it is tried once against the species' repository, then stored.
    Token {
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
    },
    /// Push an approved offer to contrib/<individual id>/<name> and open its pull request.
    Publish {
        commit: String,
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
    },
    /// Check somebody else's open pull request and post the signed result as a comment.
    Witness {
        /// The pull request's number on the species' forge.
        number: u64,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".")]
        dir: PathBuf,
        /// A shell command run after the checks, in the same cage on the pull request's
        /// tree: its pass or fail and exit status are posted, its output kept here.
        #[arg(long)]
        also: Option<String>,
        /// Leave out the mutation gate's checks (and --also).
        #[arg(long)]
        no_gates: bool,
    },
}

fn offer(command: OfferCommand) -> anyhow::Result<i32> {
    use teneralctl::offer;
    match command {
        OfferCommand::Key { dir } => {
            let key = offer::key::ensure(&dir)?;
            print!("{}", offer::key::explain(&dir, key.public_key()));
            Ok(0)
        }
        OfferCommand::Check { branch, base, dir, json, timings, no_gates } => {
            let mut report = offer::check(&dir, &branch, base.as_deref())?;
            if !no_gates && report.passed_before_gates() {
                let started = std::time::Instant::now();
                let mut gates = offer::gates::run(&dir, &report.head, None)?.0;
                gates.seconds = started.elapsed().as_secs_f64();
                report.gates = Some(gates);
            }
            let kept = offer::keep(&dir, &report)?;
            if json {
                println!("{:#}", offer::to_json(&report));
            } else {
                print!("{}", offer::to_text(&report));
                println!("kept in {}", kept.display());
            }
            if timings {
                eprintln!("{}", offer::timings(&report));
            }
            Ok(if report.passed() { 0 } else { 1 })
        }
        OfferCommand::List { dir } => {
            print!("{}", offer::manage::list_text(&dir)?);
            Ok(0)
        }
        OfferCommand::Approve { commit, dir } => {
            let commit = offer::manage::approve(&dir, &commit)?;
            println!("{}", offer::manage::approved_text(&dir, &commit));
            Ok(0)
        }
        OfferCommand::Token { dir } => {
            println!("{}", offer::manage::token(&dir)?);
            Ok(0)
        }
        OfferCommand::Publish { commit, dir } => {
            println!("{}", offer::manage::publish(&dir, &commit)?);
            Ok(0)
        }
        OfferCommand::Witness { number, dir, also, no_gates } => {
            println!("{}", offer::manage::witness(&dir, number, also.as_deref(), no_gates)?);
            Ok(0)
        }
    }
}

/// Hands `talk`, `back` and `accept` over to the generation's own client,
/// when it has one (see `teneralctl::individual::client`).
fn hand_over(command: &Command, forced: bool) {
    use teneralctl::individual::{client, exec, Client};
    let dir = match command {
        Command::Talk { dir, .. } | Command::Back { dir, .. } | Command::Accept { dir, .. } => dir,
        _ => return,
    };
    if let Client::Generation(path) = client(dir, forced) {
        let e = exec(&path);
        eprintln!(
            "teneralctl: cannot run the generation's teneralctl ({}): {e}; running the install's",
            path.display()
        );
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    hand_over(&cli.command, cli.install);
    let result = match cli.command {
        Command::Talk { dir, wait, plain } => teneralctl::talk::run(
            teneralctl::talk::TalkOptions {
                home: dir,
                wait: Duration::from_secs(wait),
                history: 6,
            },
            plain,
        ),
        Command::Back { dir, commit, list, wait, json } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            let options = teneralctl::back::BackOptions {
                home: dir,
                target: commit,
                list,
                json,
                wait: Duration::from_secs(wait),
            };
            teneralctl::back::run(&options, &mut std::io::stdout().lock())
                .map_err(anyhow::Error::from)
        }
        Command::Generations { dir, json, since, commit, plot, svg } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            let options = teneralctl::generations_card::GenerationsOptions {
                home: dir,
                json,
                since,
                commit,
                plot,
                svg,
            };
            teneralctl::generations_card::run(&options, &mut std::io::stdout().lock())
                .map_err(anyhow::Error::from)
        }
        Command::Replay { dir, from, to, last, json } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            let options = teneralctl::replay::ReplayOptions { home: dir, from, to, last, json };
            Err(anyhow::Error::from(teneralctl::replay::run(&options)))
        }
        Command::Accept { dir, commit } => {
            let via = teneralctl::accept::Via::Ctl;
            teneralctl::accept::accept(&dir, commit.as_deref(), via)
                .map(|accepted| {
                    println!("{}", teneralctl::accept::said(&accepted));
                    0
                })
                .map_err(anyhow::Error::from)
        }
        Command::Status { dir, json } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(3);
            }
            let dir = dir.canonicalize().unwrap_or(dir);
            let facts = teneralctl::report::facts(&dir);
            let now = teneralctl::when::now_ms();
            let client = teneralctl::individual::client(&dir, false);
            let (text, status) = if json {
                let (mut value, status) = teneralctl::report::json(&facts, now);
                if let Some(object) = value.as_object_mut() {
                    let path = match &client {
                        teneralctl::individual::Client::Generation(p) => p.display().to_string(),
                        teneralctl::individual::Client::Here => "install".into(),
                    };
                    object.insert("client".into(), path.into());
                }
                (value.to_string(), status)
            } else {
                let (text, status) = teneralctl::report::text(&facts, now);
                (format!("{text}\n{}", teneralctl::individual::said(&client)), status)
            };
            println!("{text}");
            Ok(status)
        }
        Command::Setup { dir, plain } => {
            let options = teneralctl::setup::SetupOptions { home: dir, plain };
            teneralctl::setup::run(&options).map_err(anyhow::Error::from)
        }
        Command::Offer { command } => offer(command),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "teneralctl", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man => {
            use clap::CommandFactory;
            let page = clap_mangen::Man::new(Cli::command());
            page.render(&mut std::io::stdout()).map(|()| 0).map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(status) => ExitCode::from(u8::try_from(status).unwrap_or(1)),
        Err(e) => {
            eprintln!("teneralctl: {e:#}");
            ExitCode::from(1)
        }
    }
}
