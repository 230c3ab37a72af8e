//! The command line of `teneral`, the kernel's program: what each command
//! takes and says in `--help`. It lives in the library, not beside `main`, so
//! that docs/commands.md and the man pages are generated from these very
//! definitions (examples/gen_docs) and a test can tell when they are stale.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::{PathBufValueParser, TypedValueParser};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "teneral",
    version,
    about = "The supervisor of an agent that rewrites its own code"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Supervise the individual in DIR (default: the current directory) in
    /// the foreground: the launcher, which starts the current generation's kernel.
    ///
    /// This is what the systemd units run. After a species mutation the launcher
    /// runs the generation's own kernel. Exit status 0 when asked to stop, 1 when
    /// it cannot start (it says why), 3 when it gave up by its rules (it says why,
    /// and the next start shows that again), 78 when the generation needs a newer
    /// launcher (update the install).
    Run {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// The kernel itself, as the launcher starts it (docs/contract.md, The launcher).
    #[command(hide = true)]
    Kernel {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// For the pins of the checkout in DIR (default: here; the workspace is
    /// .teneral/candidate), do what the gate will do: check each archive's
    /// hash, unpack it, run its check. Prints the directory to use as
    /// `TENERAL_ORGANS`. The cache is the individual's: the nearest directory at
    /// or above DIR that holds `.teneral/`.
    Organs {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
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
    ///
    /// For trying a body by hand. It lists its model at `GET /v1/models`, as
    /// providers do, and also stands in for the ChatGPT sign-in and plan
    /// (docs/chatgpt.md).
    Standin {
        /// The address to listen on; port 0 takes a free one.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// The bearer key requests must carry; when not given, the one in
        /// TENERAL_STANDIN_KEY, else any non-empty key.
        #[arg(long)]
        key: Option<String>,
        /// A script of replies, tool calls, errors and delays (JSON Lines).
        #[arg(long)]
        script: Option<PathBuf>,
        /// Answer from the script alone: when it is empty or used up, the
        /// default reply, never the stand-in's own acts on the owner's
        /// lines (as a replay of a turn the model never answered needs).
        #[arg(long)]
        scripted: bool,
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
        /// Also print when the first byte was read and the unpacking
        /// ended, with the CPU time used at each (for `scripts/bench-organs`).
        #[arg(long)]
        steps: bool,
    },
    /// Print the kernel's named durability points, one a line (for
    /// `TENERAL_TEST_CRASH_AT=<name>[@<n>]`, which kills the kernel there).
    CrashPoints,
    /// Kill what is left of the process groups FILE lists once stdin ends
    /// (the kernel starts this keeper; its stdin ends with the kernel), if
    /// FILE is still the list of the kernel KERNEL (`<pid>:<start time>`).
    #[command(hide = true)]
    KeepChildren { file: PathBuf, kernel: String },
    /// Run every evaluation in DIR's evals/ on one generation's body now, as
    /// the gate does (a result kept for the same body tree is reused), and
    /// print the results; journals nothing (teneralctl evals run runs this).
    Evals {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// A generation: 7 or more hex digits of its commit, its number in
        /// `teneralctl generations` (1 is the oldest), or `current`.
        #[arg(long, default_value = "current")]
        generation: String,
        /// One JSON object instead of the lines.
        #[arg(long)]
        json: bool,
        /// Also time one smoke run of the same body (scripts/bench-evals; it
        /// uses the gate's smoke place, so not while the kernel runs).
        #[arg(long, hide = true)]
        smoke: bool,
        /// Run nothing: write evaluation files in evals/ from the last N owner
        /// lines and inbox envelopes of the journal, each with the model's
        /// answers of the time and checks to edit; existing files are kept.
        #[arg(long, value_name = "N")]
        from_journal: Option<usize>,
    },
    /// Run the last N owner lines and inbox envelopes of the individual in
    /// DIR through generations FROM and TO, each on throwaway individuals in
    /// the cage against the stand-in model, and print them side by side.
    /// Changes nothing of the individual (teneralctl replay runs this).
    Replay {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
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
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
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
        #[arg(long, value_parser = directory())]
        home: PathBuf,
        #[arg(long, value_parser = teneral_core::commit::Commit::parse)]
        commit: teneral_core::commit::Commit,
    },
}

/// A directory argument, made absolute as it is parsed (the default `.`
/// too), so that no part of the kernel sees a relative one.
fn directory() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new().try_map(|p| teneral_core::fsutil::absolute(&p))
}
