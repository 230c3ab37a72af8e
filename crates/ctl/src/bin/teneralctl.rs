//! `teneralctl`: the owner's commands for a running individual.
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use teneralctl::cli::{Cli, Command, EvalsAction, OfferCommand};

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
        Command::Generations { fleet, json, since, .. } if !fleet.is_empty() => {
            teneralctl::generations_fleet::run(
                &fleet,
                since.as_deref(),
                json,
                &mut std::io::stdout().lock(),
            )
            .map_err(anyhow::Error::from)
        }
        Command::Generations { dir, json, since, commit, plot, svg, fleet: _ } => {
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
        Command::Evals { action: Some(EvalsAction::Run { dir, generation, json }), .. } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            Err(anyhow::Error::from(teneralctl::evals::run_now(&dir, &generation, json)))
        }
        Command::Evals { action: Some(EvalsAction::FromJournal { dir, last }), .. } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            Err(anyhow::Error::from(teneralctl::evals::from_journal(&dir, last)))
        }
        Command::Evals { dir, json, svg, action: None } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(1);
            }
            let options = teneralctl::evals::EvalsOptions { home: dir, json, svg };
            teneralctl::evals::run(&options, &mut std::io::stdout().lock())
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
        Command::Fleet { dirs, kube, json } => {
            let options = teneralctl::fleet::FleetOptions { dirs, kube, json };
            teneralctl::fleet::run(&options, &mut std::io::stdout().lock())
                .map_err(anyhow::Error::from)
        }
        Command::Status { dir, json } => {
            if let Err(e) = teneralctl::individual::check(&dir) {
                eprintln!("teneralctl: {e}");
                return ExitCode::from(3);
            }
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
            print!("{}", teneralctl::reference::man_page(Cli::command()));
            Ok(0)
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
