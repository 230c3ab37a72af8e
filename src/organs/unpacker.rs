//! The unpacker as a process of its own, in the cage's `unpack` profile:
//! the archive parser never runs with the kernel's rights.
//!
//! The kernel's half ([`Unpacker::run`]) opens the archive itself
//! (`O_NOFOLLOW`, see [`super::cache::open_archive`]) and feeds it to the
//! child through a pipe that is the child's stdin, hashing every byte as it
//! writes it ([`feed`], on a thread of its own), so the bytes hashed are the
//! bytes the child reads whatever happens to the file meanwhile; the child
//! is the kernel's own program, `teneral unpack-organ`, started through the
//! runner like every child (the direct, cgroup and systemd backends alike),
//! with a time limit and memory and task limits. The child's half
//! ([`child_main`]) runs [`super::cache::unpack_counted_within`] on its
//! stdin (inflating on a second thread) into the staging directory, the one place the profile lets it
//! write, and prints one line, [`summary_line`]: what it unpacked and how
//! many bytes of the archive it read. The kernel reads that line with a
//! bound ([`parse_summary`]) and trusts none of it: the count must be the
//! whole archive, its own hash of what it fed must be the pin, and the tree
//! is checked afterwards ([`super::staged`]).
//!
//! Invariants: the child gets the archive only as a pipe, never a path nor
//! the file (its profile grants nothing of the cache but its staging
//! directory); a tree is kept only when the kernel's hash of the bytes it
//! fed is the pin and the child says it read all of them.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::io::Errno;

use sha2::{Digest, Sha256};

use super::cache::{hex, MAX_ARCHIVE};
use super::steps;
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
/// Processes and threads of the child's cage (it has two threads: one
/// inflates, one parses and writes).
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
    /// It said it unpacked this, reading this many bytes of the archive.
    Said { summary: Summary, read: u64 },
    /// It refused the archive, in these words (cut, control characters escaped).
    Refused(String),
    /// It was stopped past its time limit.
    TimedOut,
    /// It ended otherwise: how, and its last words.
    Failed { how: String, said: String },
}

/// What the kernel fed the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fed {
    /// The SHA-256 of the whole archive, in lower-case hex.
    pub sha256: String,
    /// Its length in bytes.
    pub len: u64,
    /// The bytes written into the pipe before the child closed it: `len`
    /// when it took all of them.
    pub taken: u64,
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
    /// Runs the child as unit `unit` on `archive` into `staging` (an empty
    /// directory of `individual`), for a tree used at a path `root_len`
    /// bytes long. Returns what the kernel fed it, and how it ended.
    pub async fn run(
        &self,
        unit: &str,
        archive: File,
        individual: &Path,
        staging: &Path,
        root_len: usize,
    ) -> Result<(Fed, Outcome), RunFailed> {
        let (stdin, pipe) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| RunFailed::Read(e.into()))?;
        // The kernel's feeder writes far faster than the child reads: a pipe
        // that holds more lets the child read on while the feeder waits for
        // a CPU on a busy machine. Past `/proc/sys/fs/pipe-max-size` only
        // root may go; then the most anyone may have.
        if rustix::pipe::fcntl_setpipe_size(&pipe, PIPE_SIZE).is_err() {
            let _ = rustix::pipe::fcntl_setpipe_size(&pipe, PIPE_SIZE_UNPRIVILEGED);
        }
        let mut spec = Spec::new(self.program, staging)
            .arg(SUBCOMMAND)
            .arg("--root-len")
            .arg(root_len.to_string())
            .arg("--limit-ms")
            .arg(self.limit.as_millis().to_string());
        if steps::recording() {
            spec = spec.arg("--steps");
        }
        let mut spec = spec.arg(staging);
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
        steps::mark("cage starting");
        // Started before the child: the pipe's reading end is still the
        // kernel's until the launch takes it, and a launch that fails drops
        // it, which ends the feeding.
        let ended = Arc::new(AtomicBool::new(false));
        let child_ended = Arc::clone(&ended);
        let feeding = tokio::task::spawn_blocking(move || {
            let fed = feed(&archive, pipe, &child_ended);
            steps::mark("the kernel's hash");
            fed
        });
        let run = self.runner.run(unit, Launch::new(spec, limits).caged(profile)).await;
        steps::mark("unpacker ended");
        // Whatever still holds the pipe's other end (a service manager may
        // keep a unit's stdin a while), nothing reads it now.
        ended.store(true, Ordering::Relaxed);
        let fed = match feeding.await {
            Ok(fed) => fed.map_err(RunFailed::Read)?,
            Err(e) => return Err(RunFailed::Read(io::Error::other(e))),
        };
        let (ended, running) = run.map_err(|e| RunFailed::Start(Box::new(e)))?;
        if steps::recording() {
            if let Some(child) = steps::parse_child_line(&running.stdout_tail()) {
                steps::mark_child(&child);
            }
        }
        let outcome = if ended.over_time {
            Outcome::TimedOut
        } else if ended.exit == Exit::Code(0) {
            match parse_summary(&running.stdout_tail()) {
                Some((summary, read)) => Outcome::Said { summary, read },
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
        Ok((fed, outcome))
    }
}

/// The size the kernel asks for the pipe to the child: about a fifth of a
/// second of the child's reading.
const PIPE_SIZE: usize = 16 << 20;
/// What it asks for when that is refused: Linux's default limit for a
/// process without `CAP_SYS_RESOURCE`.
const PIPE_SIZE_UNPRIVILEGED: usize = 1 << 20;

/// Writes all of `file`, read with `pread` from its start, into `pipe`,
/// hashing it as it goes. When the child closes its end early (it refused
/// the archive), or `ended` is set while the pipe is full (the child ended
/// and something else holds its end), the rest is hashed without being
/// written, so the hash is always the whole file's. Fails past
/// [`MAX_ARCHIVE`] bytes (a file that grows while it is read).
fn feed(file: &File, pipe: OwnedFd, ended: &AtomicBool) -> io::Result<Fed> {
    // Never blocked for good: a full pipe is waited on in short turns.
    rustix::fs::fcntl_setfl(&pipe, rustix::fs::OFlags::NONBLOCK).map_err(io::Error::from)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 18];
    let mut pipe = Some(pipe);
    let (mut len, mut taken) = (0u64, 0u64);
    loop {
        let n = match file.read_at(&mut buf, len) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n as u64;
        if len > MAX_ARCHIVE {
            return Err(io::Error::other("the archive grew past 256 MiB while it was read"));
        }
        hash.update(&buf[..n]);
        if let Some(out) = &pipe {
            let (written, stopped) = write_all(out, &buf[..n], ended);
            taken += written as u64;
            match stopped {
                None => {}
                // The child closed its end: what it took is `taken`.
                Some(Errno::PIPE) => pipe = None,
                Some(e) => return Err(e.into()),
            }
        }
    }
    Ok(Fed { sha256: hex(&hash.finalize()), len, taken })
}

/// Writes `bytes` into `out` (non-blocking), waiting while it is full
/// until `ended` is set: how many were written, and the error that stopped
/// it before the end, if one did (`EPIPE` too once `ended` is set).
fn write_all(out: &OwnedFd, bytes: &[u8], ended: &AtomicBool) -> (usize, Option<Errno>) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let turn = Timespec { tv_sec: 0, tv_nsec: 50_000_000 };
    let mut written = 0;
    while written < bytes.len() {
        match rustix::io::write(out, &bytes[written..]) {
            Ok(n) => written += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) if ended.load(Ordering::Relaxed) => {
                return (written, Some(Errno::PIPE))
            }
            Err(Errno::AGAIN) => {
                let mut fds = [PollFd::new(out, PollFlags::OUT)];
                match rustix::event::poll(&mut fds, Some(&turn)) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return (written, Some(e)),
                }
            }
            Err(e) => return (written, Some(e)),
        }
    }
    (written, None)
}

/// The line the child prints when it unpacked the archive: the entries and
/// bytes unpacked, and the bytes of the archive it read.
pub fn summary_line(summary: &Summary, read: u64) -> String {
    format!("unpacked {} {} {read}", summary.entries, summary.bytes)
}

/// Reads [`summary_line`] from the last line of `output`: the entries, the
/// bytes and the bytes read, plain decimal digits. `None` for anything
/// else, a line longer than 256 bytes included.
pub fn parse_summary(output: &str) -> Option<(Summary, u64)> {
    let line = output.lines().last()?;
    if line.len() > MAX_LINE {
        return None;
    }
    let mut words = line.split(' ');
    let (Some("unpacked"), Some(entries), Some(bytes), Some(read), None) =
        (words.next(), words.next(), words.next(), words.next(), words.next())
    else {
        return None;
    };
    let plain = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    if !plain(entries) || !plain(bytes) || !plain(read) {
        return None;
    }
    let summary = Summary { entries: entries.parse().ok()?, bytes: bytes.parse().ok()? };
    Some((summary, read.parse().ok()?))
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
/// With `steps`, first prints [`steps::child_line`].
pub fn child_main(staging: &Path, root_len: usize, limit: Duration, steps: bool) -> u8 {
    let stdin = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => {
            eprintln!("teneral {SUBCOMMAND}: stdin: {e}; the kernel gives the archive there");
            return EXIT_NO_INPUT;
        }
    };
    let mut limits = UnpackLimits::new(limit, Path::new(""));
    limits.root_len = root_len;
    let first_read = std::sync::Arc::new(std::sync::OnceLock::new());
    let input = FirstRead { inner: stdin, at: std::sync::Arc::clone(&first_read) };
    match super::cache::unpack_counted_within(input, staging, &limits) {
        Ok((summary, read)) => {
            if steps {
                let unpacked = (steps::now_ns(), crate::sys::cpu_us(false));
                let first = first_read.get().copied().unwrap_or(unpacked);
                println!(
                    "{}",
                    steps::child_line(&steps::ChildSteps {
                        first_read_ns: first.0,
                        first_read_cpu: first.1,
                        unpacked_ns: unpacked.0,
                        unpacked_cpu: unpacked.1,
                    })
                );
            }
            println!("{}", summary_line(&summary, read));
            0
        }
        Err(e) => {
            eprintln!("{e}");
            EXIT_REFUSED
        }
    }
}

/// Reads through, noting when the first read returned and the CPU time
/// used by then (for [`steps`]).
struct FirstRead<R> {
    inner: R,
    at: std::sync::Arc<std::sync::OnceLock<(i128, (u64, u64))>>,
}

impl<R: io::Read> io::Read for FirstRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.at.get().is_none() {
            let _ = self.at.set((steps::now_ns(), crate::sys::cpu_us(false)));
        }
        Ok(n)
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
        let line = summary_line(&summary, 1234);
        assert_eq!(parse_summary(&line), Some((summary, 1234)));
        assert_eq!(parse_summary(&format!("noise\n{line}\n")), Some((summary, 1234)));
        let long = format!("{line}{}", " ".repeat(300));
        for bad in [
            "",
            "unpacked",
            "unpacked 1 2",
            &format!("unpacked 1 2 {SHA}"),
            "unpacked 1 2 0x10",
            "unpacked -1 2 3",
            "unpacked 1 +2 3",
            "unpacked 1 2 -3",
            "unpacked 1 2 3 more",
            "unpacked  1 2 3",
            "unpacked 99999999999 2 3",
            "unpacked 1 2 99999999999999999999",
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

    /// Feeds `bytes` from a file into a pipe whose reader keeps at most
    /// `keep` bytes, then closes it; returns what was fed and what was read.
    fn feed_to_reader(bytes: &[u8], keep: usize) -> io::Result<(Fed, Vec<u8>)> {
        use std::io::Read;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a");
        std::fs::write(&path, bytes)?;
        let (read_end, write_end) = rustix::pipe::pipe()?;
        let reader = std::thread::spawn(move || -> io::Result<Vec<u8>> {
            let mut got = Vec::new();
            File::from(read_end).take(keep as u64).read_to_end(&mut got)?;
            Ok(got)
        });
        let fed = feed(&File::open(&path)?, write_end, &AtomicBool::new(false))?;
        let got = reader.join().map_err(|_| io::Error::other("the reader panicked"))??;
        Ok((fed, got))
    }

    #[test]
    fn the_child_reads_the_bytes_the_kernel_hashes_and_the_whole_file_is_hashed() -> io::Result<()>
    {
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let want = hex(&Sha256::digest(&bytes));
        let (fed, got) = feed_to_reader(&bytes, usize::MAX)?;
        assert_eq!(fed, Fed { sha256: want.clone(), len: 3_000_000, taken: 3_000_000 });
        assert!(got == bytes, "the reader got other bytes than the file's");
        // A child that stops reading: the rest is hashed all the same, and
        // what it took is told apart from the file's length.
        let (fed, got) = feed_to_reader(&bytes, 100_000)?;
        assert_eq!((fed.sha256.as_str(), fed.len), (want.as_str(), 3_000_000));
        assert!(fed.taken < fed.len && fed.taken >= 100_000, "{fed:?}");
        assert_eq!(got.len(), 100_000);
        // Something else holds the reading end and reads nothing: once the
        // child has ended, the feeding stops writing and hashes on.
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a");
        std::fs::write(&path, &bytes)?;
        let (held, write_end) = rustix::pipe::pipe()?;
        let ended = AtomicBool::new(true);
        let fed = feed(&File::open(&path)?, write_end, &ended)?;
        assert_eq!((fed.sha256.as_str(), fed.len), (want.as_str(), 3_000_000));
        assert!(fed.taken < fed.len, "{fed:?}");
        drop(held);
        let (fed, got) = feed_to_reader(b"", usize::MAX)?;
        assert_eq!(fed, Fed { sha256: hex(&Sha256::digest(b"")), len: 0, taken: 0 });
        assert!(got.is_empty());
        Ok(())
    }
}
