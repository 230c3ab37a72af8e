//! External commands a test runs (git, podman, systemctl, curl, strace),
//! each under a time limit: [`run_within`] starts the command in a process
//! group of its own and, when the limit passes, kills the whole group and
//! fails naming the command and what it was for, so a hang stops the test
//! with a reason instead of holding the run until an outer limit.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The limit for the quick commands tests run (git on a small repository,
/// systemctl, chmod): generous, for liveness only.
pub const QUICK: Duration = Duration::from_secs(60);

/// The limit for the slow commands tests run (a kernel, a gate check, a
/// replay, the test binary again): generous as well, for liveness only.
pub const SLOW: Duration = Duration::from_secs(900);

/// The command line of `cmd`, as a shell would show it.
fn shown(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Runs `cmd` to its end, at most `limit`, with its output captured (stdin
/// empty); `what` says what it does for the test. At the limit every
/// process of its group is killed, and the error names the command, `what`
/// and the limit. An error to start it names them too.
pub fn run_within(cmd: &mut Command, limit: Duration, what: &str) -> Result<Output, String> {
    run_fed_within(cmd, None, limit, what)
}

/// [`run_within`] with `input` written to the command's stdin, then closed.
pub fn run_fed_within(
    cmd: &mut Command,
    input: Option<&[u8]>,
    limit: Duration,
    what: &str,
) -> Result<Output, String> {
    let line = shown(cmd);
    let stdin = if input.is_some() { Stdio::piped() } else { Stdio::null() };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run `{line}` ({what}): {e}"))?;
    // Read both pipes aside, so a command that writes much never blocks.
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    // Fed aside as well: a command may write before it reads all its input.
    let fed = input.map(<[u8]>::to_vec).zip(child.stdin.take()).map(|(bytes, mut pipe)| {
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(&bytes);
        })
    });
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let group = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                let _ = child.wait();
                // The readers are left: a process outside the group may
                // still hold a pipe open.
                return Err(format!(
                    "`{line}` ({what}) did not end within {limit:?}; its process group was killed"
                ));
            }
            Err(e) => return Err(format!("cannot wait for `{line}` ({what}): {e}")),
        }
    };
    if let Some(fed) = fed {
        let _ = fed.join();
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Output { status, stdout, stderr })
}

/// `Command::output` and `Command::status` under a time limit, as
/// `io::Result`s like theirs: the command's own line says what it was for,
/// and a command past its limit is an error of kind `TimedOut`.
pub trait Within {
    /// [`run_within`]: the command to its end within `limit`, its output
    /// captured, or an error naming it.
    fn output_within(&mut self, limit: Duration) -> std::io::Result<Output>;
    /// [`Within::output_within`], only the exit status.
    fn status_within(&mut self, limit: Duration) -> std::io::Result<std::process::ExitStatus> {
        self.output_within(limit).map(|out| out.status)
    }
}

impl Within for Command {
    fn output_within(&mut self, limit: Duration) -> std::io::Result<Output> {
        run_within(self, limit, "a test's command")
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::TimedOut, e))
    }
}

/// [`run_within`], and the command must succeed: its stdout, or an error
/// naming the command, `what`, its status and its stderr.
pub fn succeed_within(cmd: &mut Command, limit: Duration, what: &str) -> Result<String, String> {
    let line = shown(cmd);
    let out = run_within(cmd, limit, what)?;
    if !out.status.success() {
        return Err(format!(
            "`{line}` ({what}) failed, {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::{run_within, succeed_within, QUICK};

    #[test]
    fn a_command_that_hangs_is_stopped_at_its_limit_and_named() {
        // The shell waits on a child of its own: both must go at the limit.
        let dir = tempfile::tempdir().expect("a temp dir");
        let pid_file = dir.path().join("sleep.pid");
        let script = format!("sleep 30.5 & echo $! > {}; wait", pid_file.display());
        let started = Instant::now();
        let result = run_within(
            Command::new("sh").args(["-c", &script]),
            Duration::from_millis(500),
            "waiting on a sleeping child",
        );
        let took = started.elapsed();
        let err = result.expect_err("the command hangs");
        assert!(err.contains("sh -c sleep"), "names the command: {err}");
        assert!(err.contains("waiting on a sleeping child"), "says what it did: {err}");
        assert!(err.contains("did not end within 500ms"), "{err}");
        assert!(took < Duration::from_secs(5), "stopped at its limit, not later: {took:?}");
        let pid = std::fs::read_to_string(&pid_file).expect("the shell wrote its child's pid");
        // Gone, or a zombie until whoever inherited it reaps it.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|stat| {
                !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')
            })
        };
        let end = Instant::now() + Duration::from_secs(5);
        while alive() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "the group's sleep is killed");
    }

    #[test]
    fn a_command_is_fed_its_input_and_a_reader_that_never_ends_is_stopped() {
        let out = super::run_fed_within(&mut Command::new("cat"), Some(b"typed\n"), QUICK, "cat");
        assert_eq!(out.map(|o| o.stdout), Ok(b"typed\n".to_vec()));
        // A reader of stdin that ignores its end still ends at the limit.
        let hung = super::run_fed_within(
            Command::new("sh").args(["-c", "cat >/dev/null; sleep 30.5"]),
            Some(b"x"),
            Duration::from_millis(500),
            "reading, then sleeping",
        );
        assert!(hung.is_err_and(|e| e.contains("did not end within 500ms")));
    }

    #[test]
    fn a_command_within_its_limit_gives_its_output_and_a_failure_names_it() {
        let out = succeed_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2"]),
            QUICK,
            "echoing",
        );
        assert_eq!(out.as_deref(), Ok("out\n"));
        let failed = succeed_within(
            Command::new("sh").args(["-c", "echo no >&2; exit 3"]),
            QUICK,
            "failing",
        );
        let err = failed.expect_err("exit 3 is a failure");
        assert!(err.contains("`sh -c echo no >&2; exit 3` (failing) failed"), "{err}");
        assert!(err.contains("exit status: 3") && err.ends_with(": no"), "{err}");
    }
}
