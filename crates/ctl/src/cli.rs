//! The command line of `teneralctl`: what each command takes and says in
//! `--help`. It lives in the library, not beside `main`, so that
//! docs/commands.md and the man pages are generated from these very
//! definitions (the kernel's examples/gen_docs) and a test can tell when
//! they are stale.
use std::path::PathBuf;

use clap::builder::{PathBufValueParser, TypedValueParser};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "teneralctl", version, about = "Talk to and steer a teneral individual")]
pub struct Cli {
    /// Run this teneralctl (the install's) for talk, back and accept, not the
    /// generation's own: for when the generation's client is what is broken.
    ///
    /// A generation that brought its own kernel (a species mutation) has its
    /// teneralctl built beside it, and `talk`, `back` and `accept` hand over
    /// to that one; `teneralctl status` says which runs.
    #[arg(long, global = true)]
    pub install: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// What `teneralctl evals` does besides showing the lineage.
#[derive(Subcommand)]
pub enum EvalsAction {
    /// Run every evaluation on one generation's body now, in the cage as the gate does
    /// (a result kept for the same body is reused), and print the results.
    ///
    /// Any generation: one of the journal or any commit git has, including one older
    /// than the evaluations. Nothing is journaled. The kernel's program does the work
    /// (`teneral evals`; docs/evals.md).
    Run {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// A generation: 7 or more hex digits of its commit, its number as
        /// `generations` lists them (1 is the oldest), or `current`.
        #[arg(long, default_value = "current")]
        generation: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write evaluation files in evals/ from the last N exchanges of the journal.
    ///
    /// Each owner line or inbox envelope becomes `evals/from-journal-SEQ.toml`: the
    /// stimulus, the model's answers of the time as the stand-in's steps, and
    /// checks to edit (each tool the model called was called; the last reply holds
    /// its first words). A file already there is kept as it is.
    FromJournal {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// How many of the last exchanges.
        #[arg(long, default_value_t = 5)]
        last: usize,
    },
}

#[derive(Subcommand)]
pub enum Command {
    /// Attach to the conversation; lines typed or piped go to the agent as its owner's.
    ///
    /// At a terminal the conversation is printed as ordinary output (scrollback,
    /// search and selection work on it, and it stays when you leave), replies laid
    /// out from their markdown, one line per tool call with ✓ or ✗. A reply the
    /// model streams grows in the live region as its words arrive, and is laid out
    /// when it is whole; Esc cuts it short, and what had arrived is kept. Below it a live
    /// region says what the agent does now and holds the input box. Enter sends,
    /// Alt+Enter or Ctrl-J starts a new row, Up and Down walk your history, `/`
    /// lists the commands (Tab completes, `/help` lists them all), `//` sends a line
    /// that begins with a slash, Esc or `/stop` interrupts the turn.
    ///
    /// The commands: `/accept [COMMIT]` consents to a species commit; `/image PATH`
    /// (or a pasted or dropped path, or Ctrl+V through `wl-paste`, `xclip` or
    /// `pngpaste`) attaches a PNG, JPEG, GIF or WebP picture of at most 10 MB, four
    /// a line, kept in `memory/images/` by its hash and shown to the model;
    /// `/history` prints the last exchanges; `/generations` gives each
    /// generation's turns, latency, tool failures, retries, crashes and
    /// mutations (asked, accepted, rejected); `/evals` gives each generation's
    /// results on the owner's evaluations; `/quit` or Ctrl-D leaves, and the
    /// agent goes on.
    ///
    /// A model that cannot be reached or refuses is shown at once, with the
    /// provider's words and when the next try comes; a mutation's gate shows each
    /// step as it starts and ends. Colours are true colour, 256 or 16 as the
    /// terminal says; `NO_COLOR` is honoured, and a locale that is not UTF-8 gets
    /// ASCII marks.
    ///
    /// With `--plain`, or when stdin is not a terminal, each line goes to the agent
    /// as yours. Lines piped in are sent one at a time, each after the reply to the
    /// one before; it exits 0 after the last reply, or 1 after `--wait` seconds
    /// without anything journaled. With stdin from `/dev/null` it prints the last
    /// exchanges and exits.
    Talk {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// Seconds of journal silence after which a piped line gives up (exit 1).
        #[arg(long, default_value_t = 300)]
        wait: u64,
        /// The plain text client even at a terminal: no panel, no input box.
        #[arg(long)]
        plain: bool,
    },
    /// Send the agent back to the generation before the current one, or to COMMIT.
    ///
    /// The generation before is the one promoted before the current one, so after
    /// a rollback it goes one further back. COMMIT may name any generation that
    /// once reported ready. A running agent is stopped and started on it; one that
    /// is down stays down. Exit status 1 when there is nothing to go back to or
    /// the target is refused (it says why).
    Back {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// An earlier generation's commit: 7 or more of its hex digits.
        #[arg(conflicts_with = "list")]
        commit: Option<String>,
        /// List the generations, oldest first: when each became ready, its replies, the current one.
        #[arg(long)]
        list: bool,
        /// Seconds to wait for a running kernel to make the change.
        #[arg(long, default_value_t = crate::back::ANSWER_WAIT.as_secs())]
        wait: u64,
        /// With --list: one JSON array, with each generation's timestamps.
        #[arg(long, requires = "list")]
        json: bool,
    },
    /// What each generation did, oldest first, counted from the kernel's journal: turns and
    /// their latency, tool calls and failures, model requests, crashes, mutations.
    ///
    /// One pass over the journal counts, per generation: when it became ready and
    /// how long its runs lasted, replies, turns and their latency (owner line or
    /// stimulus to reply, median and p90), tool calls by tool with failures, model
    /// requests, retries and provider errors, tokens, interrupts, crashes,
    /// rollbacks, send-backs, and the mutations asked for with the check that
    /// refused each. What a body said of itself in notes is shown apart, as its own
    /// words.
    Generations {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
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
        /// Compare the lineages of these individuals side by side, one row each,
        /// instead of the generations of one.
        #[arg(long, value_name = "DIR", num_args = 1.., value_parser = directory(),
              conflicts_with_all = ["commit", "plot", "svg"])]
        fleet: Vec<PathBuf>,
    },
    /// The owner's evaluations across the lineage, oldest first: each evaluation's result,
    /// the pass count, tokens and time, and where one first passed or regressed.
    ///
    /// Read from the kernel's `eval.result` events, which the gate writes under
    /// `TENERAL_EVALS=report` or `gate` (docs/evals.md). A generation refused for
    /// an evaluation it broke is shown as refused; "regressed" compares with the
    /// nearest earlier generation that was not refused.
    Evals {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// One JSON object for scripts.
        #[arg(long)]
        json: bool,
        /// Also write a chart of the pass rate and the tokens across the lineage to FILE (SVG).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        #[command(subcommand)]
        action: Option<EvalsAction>,
    },
    /// Run the last N owner lines and inbox envelopes through two generations, each on
    /// throwaway individuals in the cage against the stand-in model, and show them side by
    /// side. Changes nothing of the individual; reaches no provider.
    ///
    /// Each generation runs on a throwaway individual in the cage, against the
    /// stand-in model scripted with what the model answered at the time. The table
    /// shows, per stimulus, whether each replied, its tool calls and which failed,
    /// its time to reply, and the first difference. The kernel's program does the
    /// work (`teneral replay`; docs/replay.md).
    Replay {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
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
    ///
    /// Under `TENERAL_SPECIES=ask` a mutation that brings a new kernel waits for
    /// this consent. The kernel takes it in before it next judges a mutation and
    /// journals `species.accepted` (docs/species.md).
    Accept {
        /// The individual's directory (the checkout it lives in).
        #[arg(long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// The species commit: 7 or more of its hex digits.
        commit: Option<String>,
    },
    /// List many individuals, one line each: running or not, generation and for how
    /// long, what it is doing, replies and failures today, the last mutation's verdict.
    ///
    /// From the directories given, or from the pods of a Kubernetes namespace
    /// (`--kube`, the pods labelled `app.kubernetes.io/name=teneral`, each asked
    /// through `kubectl exec ... teneralctl fleet --json .`; docs/kubernetes.md).
    /// A failure is a generation that exited by itself or was rolled back; today
    /// is the UTC day. Exit status 0 when every individual serves, 3 otherwise.
    Fleet {
        /// The individuals' directories.
        dirs: Vec<PathBuf>,
        /// The pods of this Kubernetes namespace, through kubectl.
        #[arg(long, value_name = "NAMESPACE")]
        kube: Option<String>,
        /// One JSON array, an object per individual, with timestamps.
        #[arg(long)]
        json: bool,
    },
    /// Say whether teneral runs, at which generation, what it is doing, and
    /// why it stopped when it stopped by itself. Exit status 0 only while it
    /// serves (a readiness probe), 4 while it runs but is starting or stopping,
    /// 3 when it does not run.
    ///
    /// What it is doing: thinking, running a tool, checking a mutation and which
    /// step, resting; and the unit its body runs in. It works with or without
    /// systemd: the kernel keeps its status in `.teneral/status`.
    Status {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
        /// One JSON object, with timestamps, instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Choose the model provider: its address, key and model, two test
    /// requests, then the provider's settings written into .env (the rest kept).
    ///
    /// The providers: `openai` (a key; the Responses API), `compatible` (an
    /// address, a key and a model; chat completions), `standin` (built in), and
    /// `chatgpt` (a ChatGPT plan: it prints an address to open in your browser,
    /// listens on 127.0.0.1:1455 until the browser comes back, `TENERAL_CALLBACK_PORT`
    /// for another port, and keeps the tokens in `.teneral/auth/chatgpt.json`, mode
    /// 0600; the kernel renews them; docs/chatgpt.md).
    ///
    /// At a terminal it asks on full-screen pages (docs/setup.md): arrows or a
    /// number to choose, the key typed unseen with only its length shown; Esc on
    /// the first page leaves, Ctrl-C anywhere gives up, and the terminal is given
    /// back as it was. It offers the provider's model list where there is one
    /// (`GET /models`) and sends two test requests before anything is written: one
    /// the model must answer in words, one with a tool call.
    ///
    /// Only when both pass are the provider's settings put into `.env` (asking
    /// first when there is one; every other line kept; written atomically, mode
    /// 0600), and it says how the kernel takes them: at its next start, or after a
    /// restart. A failed test, a wrong key or an address that does not answer: it
    /// says why and writes nothing (exit status 1). Without a terminal and without
    /// `--plain` it says what it would need and exits 1.
    Setup {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
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
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; scripts/install puts it in place).
    Man,
}

#[derive(Subcommand)]
pub enum OfferCommand {
    /// Print the individual's public key (made the first time) and how to verify its signatures.
    ///
    /// The key is an ed25519 SSH key in `.teneral/auth/offer-key` (mode 0600), made
    /// the first time it is needed and never replaced; beside it comes the
    /// allowed-signers line that lets `git verify-commit` check its signatures.
    Key {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// Check an `offer/<name>` branch as a stranger would: descent, the scan, signatures,
    /// message.
    ///
    /// It reads the branch since the species' head and prints its commits, the
    /// files it changes with their sizes, the paths outside `body/` and
    /// `BACKLOG.md`, and what the scan found in every path, added line and message
    /// of every commit (private paths, this install's secrets, credential shapes;
    /// shown masked); whether every commit is signed by the individual's key, and
    /// whether the last message is complete. Then the mutation gate's checks run
    /// on the offer's tree as on a fresh seed, in the cage (`teneral offer-gates`).
    /// The report is kept in `.teneral/offers/<commit>.json`. Exit status 1 when
    /// anything fails (docs/offer.md).
    Check {
        /// The branch: `offer/<name>` or `<name>`.
        branch: String,
        /// The species' head to check against (default: TENERAL_UPSTREAM of .env).
        #[arg(long)]
        base: Option<String>,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
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
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// Approve exactly one checked commit for publishing (7 or more of its hex digits).
    Approve {
        /// The offer's commit: 7 or more of its hex digits.
        commit: String,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// Type the forge token (not shown); it is tried once against the species' repository, then stored.
    Token {
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// Push an approved offer to `contrib/<individual id>/<name>` and open its pull request.
    Publish {
        /// The offer's commit: 7 or more of its hex digits.
        commit: String,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
        dir: PathBuf,
    },
    /// Check somebody else's open pull request and post the signed result as a comment.
    ///
    /// It fetches the pull request, waits for your approval of its head under
    /// `TENERAL_PUBLISH=ask`, runs the same check and gates in the cage, then your
    /// `--also` command in the same cage on its tree, and posts pass or fail for
    /// each with the toolchain, the platform and an SSH signature of exactly that
    /// text. The command's output stays here.
    Witness {
        /// The pull request's number on the species' forge.
        number: u64,
        /// The individual's directory (the checkout it lives in).
        #[arg(short = 'd', long, default_value = ".", value_parser = directory())]
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

/// A directory argument, made absolute as it is parsed (the default `.`
/// too), so that nothing a command hands on (`teneral replay`, the cage)
/// sees a relative one.
fn directory() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new().try_map(|p| teneral_core::fsutil::absolute(&p))
}
