//! The unpacker as a process of its own, in the cage's `unpack` profile:
//! the archive parser never runs with the kernel's rights.
//!
//! The kernel's half ([`Unpacker::run`]) opens the archive itself
//! (`O_NOFOLLOW`, see [`super::cache::open_archive`]) and gives that open
//! file to the child as its stdin, hashing the same file itself meanwhile
//! (with `pread`, which leaves the child's offset alone); the child is the
//! kernel's own program, `teneral unpack-organ`, started through the runner
//! like every child (the direct, cgroup and systemd backends alike), with a
//! time limit and memory and task limits. The child's half
//! ([`child_main`]) runs [`super::cache::unpack_file_within`] on its stdin
//! into the staging directory, the one place the profile lets it write,
//! and prints one line, [`summary_line`]: what it unpacked and the SHA-256
//! of what it read. The kernel reads that line with a bound
//! ([`parse_summary`]) and trusts none of it: the hash must equal its own
//! and the pin, and the tree is checked afterwards ([`super::staged`]).
//!
//! Invariants: the child gets the archive only as a descriptor, never a
//! path (its profile grants nothing of the cache but its staging
//! directory); a tree is kept only when the kernel's hash of the file, the
//! hash of what the child read and the pin are one.

use std::fs::File;
use std::io::{self, Seek};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::cache::{hex, MAX_ARCHIVE};
use super::unpack::{Limits as UnpackLimits, Summary};
use crate::runner::{Launch, Limits, Profile, RunError, Runner};
use crate::spawn::{Exit, Spec};

/// The hidden subcommand of `teneral` that is the child's half.
pub const SUBCOMMAND: &str = "unpack-organ";
/// The child's status when the archive is refused (stderr says why).
pub const EXIT_REFUSED: u8 = 1;
/// The child's status when it cannot read its stdin.
pub const EXIT_NO_INPUT: u8 = 2;
/// Memory the child may use (`MemoryMax`, or `RLIMIT_AS` run directly):
/// the model of the tree (at most 20,000 names), the buffers and the
/// program itself fit many times over.
pub const MEMORY_MAX: u64 = 512 << 20;
/// Processes and threads of the child's cage (it is single-threaded).
pub const TASKS_MAX: u64 = 8;
/// Beyond the child's own time limit, when the runner stops it: the child
/// names the entry it reached when its own limit passes, so it is given
/// the time to say so.
pub const STOP_AFTER: Duration = Duration::from_secs(5);
/// The longest line of the child's that the kernel reads.
const MAX_LINE: usize = 256;
/// The longest refusal of the child's that the kernel repeats, in characters.
const MAX_SAID: usize = 1200;

/// How the kernel unpacks archives: `program` (its own `teneral`) started
/// through `runner` in the cage's `unpack` profile, within `limit`.
#[derive(Clone, Copy)]
pub struct Unpacker<'a> {
    pub runner: &'a Runner,
    pub program: &'a Path,
    /// How long the unpacking itself may take ([`super::UNPACK_LIMIT`]).
    pub limit: Duration,
    /// Between SIGTERM and SIGKILL when the runner stops the child.
    pub stop_timeout: Duration,
}

impl<'a> Unpacker<'a> {
    /// `program` through `runner`, within [`super::UNPACK_LIMIT`].
    pub fn new(runner: &'a Runner, program: &'a Path) -> Self {
        Self { runner, program, limit: super::UNPACK_LIMIT, stop_timeout: Duration::from_secs(5) }
    }
}

/// How the child ended, as the kernel saw it.
#[derive(Debug)]
pub enum Outcome {
    /// It said it unpacked this, reading bytes with this SHA-256.
    Said { summary: Summary, sha256: String },
    /// It refused the archive, in these words (cut, control characters escaped).
    Refused(String),
    /// It was stopped past its time limit.
    TimedOut,
    /// It ended otherwise: how, and its last words.
    Failed { how: String, said: String },
}

/// Why the child could not be run, or the archive not read.
#[derive(Debug, thiserror::Error)]
pub enum RunFailed {
    #[error("the unpacker cannot be started: {0}")]
    Start(Box<RunError>),
    #[error("the archive cannot be read: {0}")]
    Read(io::Error),
}

impl Unpacker<'_> {
    /// Runs the child as unit `unit` on `archive` (open at its start) into
    /// `staging` (an empty directory of `individual`), for a tree used at a
    /// path `root_len` bytes long. Returns the SHA-256 the kernel computed
    /// of the whole archive, and how the child ended.
    pub async fn run(
        &self,
        unit: &str,
        mut archive: File,
        individual: &Path,
        staging: &Path,
        root_len: usize,
    ) -> Result<(String, Outcome), RunFailed> {
        archive.rewind().map_err(RunFailed::Read)?;
        let stdin = archive.as_fd().try_clone_to_owned().map_err(RunFailed::Read)?;
        let mut spec = Spec::new(self.program, staging)
            .arg(SUBCOMMAND)
            .arg("--root-len")
            .arg(root_len.to_string())
            .arg("--limit-ms")
            .arg(self.limit.as_millis().to_string())
            .arg(staging);
        spec.stdin = Some(stdin);
        let limits = Limits {
            memory_max: Some(MEMORY_MAX),
            tasks_max: Some(TASKS_MAX),
            runtime_max: Some(self.limit.saturating_add(STOP_AFTER)),
            stop_timeout: self.stop_timeout,
            background: false,
        };
        let profile = Profile::Unpack {
            individual: individual.to_owned(),
            program: self.program.to_owned(),
            staging: staging.to_owned(),
        };
        let hashing = tokio::task::spawn_blocking(move || hash_whole(&archive));
        let run = self.runner.run(unit, Launch::new(spec, limits).caged(profile)).await;
        let sha256 = match hashing.await {
            Ok(hashed) => hashed.map_err(RunFailed::Read)?,
            Err(e) => return Err(RunFailed::Read(io::Error::other(e))),
        };
        let (ended, running) = run.map_err(|e| RunFailed::Start(Box::new(e)))?;
        let outcome = if ended.over_time {
            Outcome::TimedOut
        } else if ended.exit == Exit::Code(0) {
            match parse_summary(&running.stdout_tail()) {
                Some((summary, sha256)) => Outcome::Said { summary, sha256 },
                None => Outcome::Failed {
                    how: "exit status 0 without saying what it unpacked".into(),
                    said: last_words(&running.stdout_tail()),
                },
            }
        } else if ended.exit == Exit::Code(i32::from(EXIT_REFUSED)) {
            Outcome::Refused(last_words(&running.stderr_tail()))
        } else {
            let how = match ended.cage_step() {
                Some(step) => format!("{}; {step}", ended.exit),
                None => ended.exit.to_string(),
            };
            Outcome::Failed { how, said: last_words(&running.stderr_tail()) }
        };
        Ok((sha256, outcome))
    }
}

/// The SHA-256 of all of `file`, read with `pread` from its start (the
/// offset it shares with the child is left alone). Fails past
/// [`MAX_ARCHIVE`] bytes (a file that grows).
fn hash_whole(file: &File) -> io::Result<String> {
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 18];
    let mut at = 0u64;
    loop {
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        at += n as u64;
        if at > MAX_ARCHIVE {
            return Err(io::Error::other("the archive grew past 256 MiB while it was read"));
        }
        hash.update(&buf[..n]);
    }
    Ok(hex(&hash.finalize()))
}

/// The line the child prints when it unpacked the archive.
pub fn summary_line(summary: &Summary, sha256: &str) -> String {
    format!("unpacked {} {} {sha256}", summary.entries, summary.bytes)
}

/// Reads [`summary_line`] from the last line of `output`: the entries, the
/// bytes and the SHA-256 (64 lower-case hex digits). `None` for anything
/// else, a line longer than 256 bytes included.
pub fn parse_summary(output: &str) -> Option<(Summary, String)> {
    let line = output.lines().last()?;
    if line.len() > MAX_LINE {
        return None;
    }
    let mut words = line.split(' ');
    let (Some("unpacked"), Some(entries), Some(bytes), Some(sha256), None) =
        (words.next(), words.next(), words.next(), words.next(), words.next())
    else {
        return None;
    };
    let plain = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    if !plain(entries) || !plain(bytes) {
        return None;
    }
    let hex = |w: &str| w.len() == 64 && w.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(sha256) {
        return None;
    }
    let summary = Summary { entries: entries.parse().ok()?, bytes: bytes.parse().ok()? };
    Some((summary, sha256.to_owned()))
}

/// The last non-empty line of `output`, cut at [`MAX_SAID`] characters,
/// control and format characters escaped: what the child said, repeated in
/// the kernel's message without letting it write to a terminal.
pub fn last_words(output: &str) -> String {
    let line = output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out = String::new();
    for (shown, c) in line.chars().enumerate() {
        if shown == MAX_SAID {
            out.push_str("...");
            break;
        }
        let format_char = matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if c.is_control() || format_char {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `teneral unpack-organ`: unpacks the `.tar.gz` on stdin into `staging`
/// (an existing empty directory) within `limit`, for a tree used at a path
/// `root_len` bytes long; prints [`summary_line`] and returns 0, or prints
/// the refusal on stderr and returns [`EXIT_REFUSED`].
pub fn child_main(staging: &Path, root_len: usize, limit: Duration) -> u8 {
    let stdin = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => {
            eprintln!("teneral {SUBCOMMAND}: stdin: {e}; the kernel gives the archive there");
            return EXIT_NO_INPUT;
        }
    };
    let mut limits = UnpackLimits::new(limit, Path::new(""));
    limits.root_len = root_len;
    match super::cache::unpack_file_within(stdin, staging, &limits) {
        Ok((summary, sha256)) => {
            println!("{}", summary_line(&summary, &sha256));
            0
        }
        Err(e) => {
            eprintln!("{e}");
            EXIT_REFUSED
        }
    }
}

/// The unit one unpacking runs as, named after its staging directory
/// (`.unpack-<sha256>-<pid>-<n>`): `teneral-unpack-<12 hex>-<pid>-<n>.service`.
pub fn unit_name(staging: &Path) -> String {
    let name = staging.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let rest = name.strip_prefix(".unpack-").unwrap_or(&name);
    let (sha, tail) = rest.split_once('-').unwrap_or((rest, ""));
    let plain: String = format!("{}-{tail}", &sha[..sha.len().min(12)])
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
        .collect();
    format!("teneral-unpack-{plain}.service")
}

/// Where the individual whose cache `cache_root` is lives.
pub fn individual_of_cache(cache_root: &Path) -> PathBuf {
    cache_root.ancestors().nth(2).map_or_else(|| cache_root.to_owned(), Path::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_summary_line_is_read_back_and_nothing_else_is() {
        let summary = Summary { entries: 20, bytes: 3000 };
        let line = summary_line(&summary, SHA);
        assert_eq!(parse_summary(&line), Some((summary, SHA.to_owned())));
        assert_eq!(parse_summary(&format!("noise\n{line}\n")), Some((summary, SHA.to_owned())));
        let long = format!("{line}{}", " ".repeat(300));
        let upper = SHA.to_uppercase();
        for bad in [
            "",
            "unpacked",
            &format!("unpacked 1 2 {}", &SHA[..63]),
            &format!("unpacked 1 2 {upper}"),
            &format!("unpacked -1 2 {SHA}"),
            &format!("unpacked 1 +2 {SHA}"),
            &format!("unpacked 1 2 {SHA} more"),
            &format!("unpacked  1 2 {SHA}"),
            &format!("unpacked 99999999999 2 {SHA}"),
            &format!("{line}\nlater words"),
            &long,
        ] {
            assert_eq!(parse_summary(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn last_words_are_one_line_cut_and_escaped() {
        assert_eq!(last_words("first\nentry \"x\" is refused\n\n"), "entry \"x\" is refused");
        assert_eq!(last_words("a\u{1b}[2Jb\u{202e}c"), "a\\u{1b}[2Jb\\u{202e}c");
        let long = "x".repeat(5000);
        assert_eq!(last_words(&long).len(), MAX_SAID + 3);
        assert_eq!(last_words(""), "");
    }

    #[test]
    fn a_unit_is_named_after_its_staging_directory() {
        let staging =
            Path::new(&format!("/i/.teneral/organs/trees/.unpack-{SHA}-4242-7")).to_owned();
        assert_eq!(unit_name(&staging), "teneral-unpack-0123456789ab-4242-7.service");
        assert_eq!(individual_of_cache(Path::new("/i/.teneral/organs")), PathBuf::from("/i"));
    }

    #[test]
    fn the_whole_file_is_hashed_wherever_its_offset_stands() -> io::Result<()> {
        use std::io::Read;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes)?;
        let want = hex(&Sha256::digest(&bytes));
        let mut file = File::open(&path)?;
        let mut first = [0u8; 1000];
        file.read_exact(&mut first)?;
        assert_eq!(hash_whole(&file)?, want);
        // The offset the child reads from is where it was.
        assert_eq!(file.stream_position()?, 1000);
        assert_eq!(hash_whole(&File::open(dir.path().join("a"))?)?, want);
        std::fs::write(&path, b"")?;
        assert_eq!(hash_whole(&File::open(&path)?)?, hex(&Sha256::digest(b"")));
        Ok(())
    }
}
