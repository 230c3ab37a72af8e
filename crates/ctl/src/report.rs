//! `teneralctl status`: whether teneral runs, at which generation, what it
//! does and for how long; as lines for people ("resting, for 4 min") or as
//! one JSON object for scripts (with the timestamps).
//!
//! Invariants: what is said is decided by [`facts`] from what the kernel
//! left (its lock, `.teneral/state.json`, `.teneral/status`) and the time
//! given, so both forms say the same; the exit status ([`exit_status`]) is 0
//! only while a kernel runs and serves (between its READY and its stopping:
//! a readiness probe), 4 while one runs but does not serve yet or any more,
//! and 3 when none runs (as `systemctl status`).

use std::path::Path;

use serde_json::{json, Value};

use crate::commit::short;
use crate::when::{duration, parse_ts};

/// What `status` knows, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub dir: String,
    pub running: bool,
    /// The kernel runs and serves (it said READY and is not stopping).
    pub serving: bool,
    pub kernel_pid: Option<u32>,
    pub generation: Option<String>,
    /// What the kernel last said it does, and since when (RFC 3339).
    pub doing: Option<(String, String)>,
    pub body: Option<(u32, Option<String>)>,
    /// Why it stopped by itself: reason, exit status, when.
    pub stopped: Option<(String, i32, String)>,
    pub state_error: Option<String>,
    /// How to start it: the unit it last ran in, or the program's path.
    pub start: String,
}

/// Reads what the kernel of `home` left.
pub fn facts(home: &Path) -> Facts {
    let running = crate::lock::is_held(home);
    let state = crate::state::State::load(home);
    let last = crate::status::read(home);
    let (body, stopped, generation, state_error) = match &state {
        Ok(s) => (
            s.body.as_ref().filter(|_| running).map(|b| (b.pid, b.unit.clone())),
            s.stopped
                .as_ref()
                .filter(|_| !running)
                .map(|s| (s.reason.clone(), s.status, s.at.clone())),
            s.generation.as_ref().map(ToString::to_string),
            None,
        ),
        Err(e) => (None, None, None, Some(e.to_string())),
    };
    Facts {
        dir: home.display().to_string(),
        running,
        serving: running && last.as_ref().is_some_and(|s| s.serving),
        kernel_pid: last.as_ref().filter(|_| running).map(|s| s.pid),
        generation,
        doing: last.map(|s| (s.status, s.since)),
        body,
        stopped,
        state_error,
        start: crate::status::start_hint(home),
    }
}

/// How long ago `ts` was at `now` (ms since the epoch), in words.
fn ago(ts: &str, now: i64) -> Option<String> {
    parse_ts(ts).map(|t| duration(now - t))
}

/// The exit status: 0 while a kernel runs and serves, 4 while one runs
/// but does not serve, 3 when none runs.
pub fn exit_status(f: &Facts) -> i32 {
    match (f.running, f.serving) {
        (true, true) => 0,
        (true, false) => 4,
        (false, _) => 3,
    }
}

/// The lines for people, and the exit status.
pub fn text(f: &Facts, now: i64) -> (String, i32) {
    let mut out = Vec::new();
    let head = match (f.running, f.kernel_pid) {
        (true, Some(pid)) => format!("running (kernel pid {pid})"),
        (true, None) => "running".to_owned(),
        (false, _) => "not running".to_owned(),
    };
    let head = if f.running && !f.serving {
        format!("{head}, not serving (starting or stopping)")
    } else {
        head
    };
    out.push(format!("teneral in {}: {head}", f.dir));
    if let Some(commit) = &f.generation {
        out.push(format!("generation: {} ({commit})", short(commit)));
    }
    if let Some((doing, since)) = &f.doing {
        let long = ago(since, now).map_or(String::new(), |a| format!(", for {a}"));
        if f.running {
            out.push(format!("doing: {doing}{long}"));
        } else {
            let when = ago(since, now).map_or(since.clone(), |a| format!("{a} ago"));
            out.push(format!("last said: {doing} ({when})"));
        }
    }
    if let Some((pid, unit)) = &f.body {
        match unit {
            Some(unit) => out.push(format!("body: {unit} (pid {pid})")),
            None => out.push(format!("body: pid {pid}")),
        }
    }
    if let Some((reason, status, at)) = &f.stopped {
        let when = ago(at, now).map_or(at.clone(), |a| format!("{a} ago"));
        out.push(format!("it stopped by itself {when}, with status {status}: {reason}"));
    }
    if let Some(e) = &f.state_error {
        out.push(format!("state: {e}"));
    }
    if !f.running {
        out.push(format!("start it with: {}", f.start));
    }
    (out.join("\n"), exit_status(f))
}

/// The same as one JSON object, with timestamps and seconds.
pub fn json(f: &Facts, now: i64) -> (Value, i32) {
    let seconds = |ts: &str| parse_ts(ts).map(|t| (now - t).max(0) / 1000);
    let value = json!({
        "dir": f.dir,
        "running": f.running,
        "serving": f.serving,
        "kernel_pid": f.kernel_pid,
        "generation": f.generation,
        "doing": f.doing.as_ref().map(|(d, _)| d),
        "since": f.doing.as_ref().map(|(_, s)| s),
        "for_seconds": f.doing.as_ref().and_then(|(_, s)| seconds(s)),
        "body": f.body.as_ref().map(|(pid, unit)| json!({"pid": pid, "unit": unit})),
        "stopped": f.stopped.as_ref().map(|(reason, status, at)| {
            json!({"reason": reason, "status": status, "at": at})
        }),
        "state_error": f.state_error,
    });
    (value, exit_status(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(running: bool) -> Facts {
        Facts {
            dir: "/home/ada/ind".into(),
            running,
            serving: running,
            kernel_pid: running.then_some(42),
            generation: Some("0123456789abcdef0123456789abcdef01234567".into()),
            doing: Some(("generation 0123456: resting".into(), "2026-11-30T10:00:00.000Z".into())),
            body: running.then_some((43, None)),
            stopped: (!running)
                .then(|| ("crashed 5 times".into(), 1, "2026-11-30T10:02:00.000Z".into())),
            state_error: None,
            start: "systemctl --user start teneral@home-ada-ind.service".into(),
        }
    }

    #[test]
    fn people_read_how_long() {
        let now = parse_ts("2026-11-30T10:04:30.000Z").expect("a time");
        let (text, code) = text(&facts(true), now);
        assert_eq!(code, 0);
        assert!(text.contains("doing: generation 0123456: resting, for 4 min"), "{text}");
        assert!(
            text.contains("running (kernel pid 42)") && text.contains("body: pid 43"),
            "{text}"
        );
        let (text, code) = super::text(&facts(false), now);
        assert_eq!(code, 3);
        assert!(text.contains("last said: generation 0123456: resting (4 min ago)"), "{text}");
        assert!(text.contains("it stopped by itself 2 min ago, with status 1: crashed"), "{text}");
        assert!(
            text.contains("start it with: systemctl --user start teneral@home-ada-ind.service"),
            "{text}"
        );
    }

    #[test]
    fn scripts_read_timestamps() {
        let now = parse_ts("2026-11-30T10:04:30.000Z").expect("a time");
        let (value, code) = json(&facts(true), now);
        assert_eq!(code, 0);
        assert_eq!(value["since"], "2026-11-30T10:00:00.000Z");
        assert_eq!(value["for_seconds"], 270);
        assert_eq!(value["kernel_pid"], 42);
        assert_eq!(value["body"], json!({"pid": 43, "unit": null}));
        let (value, code) = json(&facts(false), now);
        assert_eq!(code, 3);
        assert_eq!(value["stopped"]["at"], "2026-11-30T10:02:00.000Z");
        assert_eq!(value["running"], false);
    }

    #[test]
    fn the_exit_status_is_0_only_while_it_serves() {
        let now = parse_ts("2026-11-30T10:04:30.000Z").expect("a time");
        // (runs, serves, exit status, words of the head line)
        let table = [
            (true, true, 0, "running (kernel pid 42)\n"),
            (true, false, 4, "running (kernel pid 42), not serving (starting or stopping)"),
            (false, false, 3, "not running"),
            (false, true, 3, "not running"),
        ];
        for (running, serving, want, words) in table {
            let f = Facts { serving, ..facts(running) };
            assert_eq!(exit_status(&f), want, "{running} {serving}");
            let (said, code) = text(&f, now);
            assert_eq!(code, want);
            assert!(said.contains(words), "{said}");
            let (value, code) = json(&f, now);
            assert_eq!((code, value["serving"].as_bool()), (want, Some(serving)));
        }
    }
}
