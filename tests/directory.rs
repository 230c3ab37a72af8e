//! Every command that takes the individual's directory means the same from
//! inside it, however the directory is spelled: no `--dir` (the current
//! one), `--dir .`, `--dir ../<name>`, or its absolute path. The command
//! line makes the directory absolute as it is parsed, so nothing deeper (a
//! caged run of `teneral replay`, a path walked upwards) sees a relative one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clap::CommandFactory;
use serde_json::Value;

use crate::common::{run_within, teneral, teneralctl, Individual, TestResult};

/// The four ways an owner names the individual from inside it.
fn spellings(home: &Path) -> Vec<Vec<OsString>> {
    let name = home.file_name().expect("the individual's directory has a name");
    vec![
        vec![],
        vec!["--dir".into(), ".".into()],
        vec!["--dir".into(), Path::new("..").join(name).into_os_string()],
        vec!["--dir".into(), home.as_os_str().to_owned()],
    ]
}

/// The subcommands (space-separated paths, e.g. `offer key`) of `command`
/// that take an argument called `arg`.
fn taking(command: &clap::Command, arg: &str, above: &str) -> Vec<String> {
    let mut found = Vec::new();
    for sub in command.get_subcommands() {
        let path = format!("{above}{}", sub.get_name());
        if sub.get_arguments().any(|a| a.get_id() == arg) {
            found.push(path.clone());
        }
        found.extend(taking(sub, arg, &format!("{path} ")));
    }
    found
}

/// Parses `words` (after the program's name) with `command`, and returns
/// the value of `arg` of the innermost subcommand.
fn parsed(command: clap::Command, words: &[OsString], arg: &str) -> PathBuf {
    let matches = command
        .try_get_matches_from(std::iter::once(OsString::from("x")).chain(words.iter().cloned()))
        .unwrap_or_else(|e| panic!("{words:?} does not parse: {e}"));
    let mut m = &matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    m.get_one::<PathBuf>(arg).cloned().unwrap_or_else(|| panic!("{words:?} has no {arg}"))
}

/// The words that make subcommand `path` of `command` parse: a value for
/// each required argument but `skip` (a commit's full hex digits for a
/// commit, else `1`).
fn required(command: &clap::Command, path: &str, skip: &str) -> Vec<OsString> {
    let mut words: Vec<OsString> = Vec::new();
    let mut at = command;
    for name in path.split(' ') {
        at = at.find_subcommand(name).expect("the subcommand exists");
        words.push(name.into());
    }
    for a in at.get_arguments().filter(|a| a.is_required_set() && a.get_id() != skip) {
        if let Some(long) = a.get_long() {
            words.push(format!("--{long}").into());
        }
        let value =
            if a.get_id() == "commit" { "0123456789abcdef0123456789abcdef01234567" } else { "1" };
        words.push(value.into());
    }
    words
}

/// As the command line is parsed, each directory of each command of both
/// programs becomes the same absolute path, the default `.` too.
#[test]
fn every_directory_is_absolute_once_parsed() -> TestResult {
    // Relative to this process's current directory, which no test changes.
    let home = std::env::current_dir()?.canonicalize()?;
    let name = home.file_name().expect("the current directory has a name").to_owned();
    let spelled: Vec<(Option<&str>, PathBuf)> = vec![
        (None, PathBuf::from(".")),
        (Some("--dir"), PathBuf::from(".")),
        (Some("--dir"), PathBuf::from("./")),
        (Some("--dir"), Path::new("..").join(&name)),
        (Some("--dir"), home.clone()),
    ];
    for (program, command) in
        [("teneralctl", teneralctl::cli::Cli::command()), ("teneral", teneral::cli::Cli::command())]
    {
        for (arg, flag) in [("dir", "--dir"), ("home", "--home")] {
            for path in taking(&command, arg, "") {
                let words = required(&command, &path, arg);
                for (given, value) in &spelled {
                    let mut these = words.clone();
                    match given {
                        Some(_) => these.extend([flag.into(), value.clone().into_os_string()]),
                        None if arg == "dir" => {}
                        None => continue,
                    }
                    let got = parsed(command.clone(), &these, arg);
                    assert_eq!(got, home, "{program} {path} with {given:?} {value:?}");
                }
            }
        }
    }
    Ok(())
}

/// What a run of a command means, for comparing its spellings: its status
/// and the part of its output that carries its meaning.
type Meaning = fn(&Output) -> String;

fn status_and_stdout(out: &Output) -> String {
    format!("{:?}\n{}", out.status.code(), String::from_utf8_lossy(&out.stdout))
}

fn status_and_stderr(out: &Output) -> String {
    format!("{:?}\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr))
}

fn status_and_both(out: &Output) -> String {
    format!("{}{}", status_and_stdout(out), String::from_utf8_lossy(&out.stderr))
}

/// A replay's report without its timings: per stimulus what each side did
/// (its stderr, which names the ports its stand-ins took, only on failure).
fn replayed(out: &Output) -> String {
    let mut report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    for row in report["rows"].as_array_mut().into_iter().flatten() {
        for side in ["a", "b"] {
            row[side]["reply_seconds"].take();
            row[side]["run_seconds"].take();
        }
    }
    report["figures"].take();
    match out.status.code() {
        Some(0) => format!("Some(0)\n{report}"),
        code => format!("{code:?}\n{}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// `teneralctl status --json` without `for_seconds`, which grows with the
/// clock between runs.
/// Whether an evaluation was drafted from the journal: written the first
/// time, left as it was after.
fn drafted(out: &Output) -> String {
    let said = String::from_utf8_lossy(&out.stdout);
    let drafted =
        said.lines().any(|l| l.starts_with("wrote ") && l.contains("/evals/from-journal-"))
            || said.contains("existing draft(s) as they were");
    format!("{:?} drafted {drafted}", out.status.code())
}

fn status_now(out: &Output) -> String {
    let mut status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    status["for_seconds"].take();
    format!("{:?}\n{status}", out.status.code())
}

/// `teneralctl status --json` of a running kernel: whether it runs, and at
/// which generation.
fn running(out: &Output) -> String {
    let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    format!("{:?} {} {}", out.status.code(), status["running"], status["generation"])
}

/// Runs `program words...` with each spelling of the directory, from inside
/// `home`, and asserts the same meaning for each; returns it.
fn same_each_way(
    home: &Path,
    program: &Path,
    words: &[&str],
    meaning: Meaning,
    limit: Duration,
) -> Result<String, String> {
    let mut first: Option<(Vec<OsString>, String)> = None;
    for spelling in spellings(home) {
        let mut command = Command::new(program);
        command.args(words).args(&spelling).current_dir(home);
        let what = format!("{} from inside the individual", words.join(" "));
        let out = run_within(&mut command, limit, &what)?;
        let meant = meaning(&out);
        match &first {
            None => first = Some((spelling, meant)),
            Some((was, first)) => assert_eq!(
                &meant,
                first,
                "{} {words:?}: {spelling:?} means otherwise than {was:?}",
                program.display()
            ),
        }
    }
    Ok(first.map(|(_, m)| m).unwrap_or_default())
}

/// The commands that take a directory, each run every way from inside a
/// real individual, against its running kernel and then stopped; every
/// such command of both programs is here (the list is checked against the
/// command line's definitions).
#[test]
fn every_command_means_the_same_from_inside_the_individual() -> TestResult {
    let script = "{\"reply\": \"Hello, owner.\"}\n{\"reply\": \"Fine.\"}\n";
    let ind = Individual::new(script, &[])?;
    let home = ind.path().canonicalize()?;
    let wait = Duration::from_secs(600);
    let mut kernel = ind.start()?;
    ind.wait_for("the birth turn", wait, |e| e["type"] == "turn.ended")?;
    teneral_core::owner::write_line(&home, "how are you")?;
    ind.wait_for("the reply", wait, |e| e["type"] == "reply" && e["text"] == "Fine.")?;
    let quick = Duration::from_secs(60);
    let (ctl, kernel_program) = (teneralctl(), teneral());
    let mut covered: Vec<(&str, String)> = Vec::new();

    // While the kernel runs: the status says so each way, and a second
    // kernel is refused each way, the individual's lock found.
    let said = same_each_way(&home, &ctl, &["status", "--json"], running, quick)?;
    assert!(said.starts_with("Some(0) true"), "{said}");
    covered.push(("teneralctl", "status".into()));
    for command in ["run", "kernel"] {
        let said = same_each_way(&home, &kernel_program, &[command], status_and_stderr, quick)?;
        assert!(said.contains("already running the individual"), "{command}: {said}");
        covered.push(("teneral", command.into()));
    }
    kernel.signal(libc::SIGTERM);
    kernel.wait(Duration::from_secs(60))?;

    // Stopped.
    let replay = ["replay", "--from", "current", "--to", "current", "--last", "1", "--json"];
    let ctl_commands: &[(&[&str], Meaning)] = &[
        (&["status", "--json"], status_now),
        (&["back", "--list", "--json"], status_and_stdout),
        (&["generations", "--json"], status_and_stdout),
        (&replay, replayed),
        (&["talk", "--plain"], status_and_both),
        (&["accept"], status_and_both),
        (&["setup", "--plain"], status_and_both),
        (&["offer", "key"], status_and_both),
        (&["offer", "list"], status_and_both),
        (&["offer", "check", "offer/none", "--no-gates"], status_and_both),
        (&["offer", "approve", "1234567"], status_and_both),
        (&["offer", "token"], status_and_both),
        (&["offer", "publish", "1234567"], status_and_both),
        (&["offer", "witness", "1"], status_and_both),
        (&["evals", "--json"], status_and_stdout),
        (&["evals", "run", "--json"], status_and_both),
        // Last: it writes an evaluation file into evals/.
        (&["evals", "from-journal", "--last", "1"], drafted),
    ];
    let kernel_commands: &[(&[&str], Meaning)] = &[
        (&["organs"], status_and_both),
        (&replay, replayed),
        (&["offer-gates", "1234567"], status_and_both),
        (&["evals", "--json"], status_and_both),
    ];
    let dotenv = std::fs::read(home.join(".env"))?;
    let mut said = Vec::new();
    // The kernel's first: `teneral evals` runs before any evaluation exists.
    for (program, name, commands) in
        [(&kernel_program, "teneral", kernel_commands), (&ctl, "teneralctl", ctl_commands)]
    {
        for (words, meaning) in commands {
            let limit = if words[0] == "replay" { wait } else { quick };
            said.push(same_each_way(&home, program, words, *meaning, limit)?);
            let path = words.iter().take_while(|w| {
                !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            });
            covered.push((name, path.copied().collect::<Vec<_>>().join(" ")));
        }
    }
    assert_eq!(std::fs::read(home.join(".env"))?, dotenv, "setup wrote .env");
    // The replays ran and replied, and the status says the kernel is down.
    for replay in said.iter().filter(|s| s.contains("\"rows\"")) {
        assert!(replay.starts_with("Some(0)") && replay.contains("\"replied\":true"), "{replay}");
    }
    let status = &said[kernel_commands.len()];
    assert!(status.starts_with("Some(3)"), "{status}");
    let drafts = std::fs::read_dir(home.join("evals"))?.count();
    assert_eq!(drafts, 1, "one draft, written in the individual's evals/ whichever way");

    for (name, command) in
        [("teneralctl", teneralctl::cli::Cli::command()), ("teneral", teneral::cli::Cli::command())]
    {
        for path in taking(&command, "dir", "") {
            assert!(
                covered.iter().any(|(n, p)| *n == name && *p == path),
                "{name} {path} takes a directory and is not run here"
            );
        }
    }
    Ok(())
}
