//! The rig the body's tests drive: a temporary individual, the kernel's real
//! event channel (`teneral serve-events`), the stand-in model (`teneral
//! standin`), and the real built body binary started as the kernel starts it.
//!
//! The kernel's binary is `$TENERAL_BIN`, else the `teneral` beside the
//! body's test build (the two crates share a `CARGO_TARGET_DIR`), else
//! `../target/debug/teneral` from `body/`. Without it every test fails and says to run `cargo build`
//! at the repository's root. Every wait is bounded: a body that hangs fails
//! its test instead of hanging it.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

mod journal;
mod proc;
use journal::read_lines;
pub use journal::{body_of, count, has, of, types};
pub use proc::Thread;

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
pub const KEY: &str = "test-key-123";
/// The longest any test waits for one thing.
pub const WAIT: Duration = Duration::from_secs(20);

/// The kernel's binary, or a failure that says how to make it.
pub fn kernel_bin() -> PathBuf {
    let beside = Path::new(env!("CARGO_BIN_EXE_teneral-body")).with_file_name("teneral");
    let path = match std::env::var_os("TENERAL_BIN") {
        Some(path) => PathBuf::from(path),
        None if beside.is_file() => beside,
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/teneral"),
    };
    assert!(
        path.is_file(),
        "the kernel's binary is not at {}: run `cargo build` at the repository's root \
         (or set TENERAL_BIN to a built `teneral`)",
        path.display()
    );
    path
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        // Short: the event socket's path must fit in 107 bytes.
        let path = std::env::temp_dir().join(format!(
            "tb-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("the temporary directory can be made");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Calls `check` until it gives `Some`, for at most `limit`; then fails with
/// `what` and the rig's state.
pub fn wait_until<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(start.elapsed() < limit, "gave up after {limit:?} waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for a child to end, at most `limit`.
pub fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("our own child can be waited for") {
            return Some(status);
        }
        if start.elapsed() > limit {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// True while a process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
            !matches!(state, Some('Z') | Some('X'))
        }
    }
}

pub fn kill(pid: u32, signal: i32) {
    // SAFETY: kill has no memory effects.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// Which protocol a rig speaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wire {
    Chat,
    Responses,
}

pub struct Rig {
    pub dir: TempDir,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub model_url: String,
    pub wire: Wire,
    pub env: Vec<(String, String)>,
    standin: Option<Child>,
    events: Child,
    pub body: Option<Child>,
}

impl Rig {
    /// An individual with the stand-in model following `script` (JSON
    /// Lines), and the kernel's event channel running.
    pub fn new(wire: Wire, script: &[&str]) -> Rig {
        let bin = kernel_bin();
        let dir = TempDir::new();
        let home = dir.0.join("home");
        let made = "the test home can be written";
        fs::create_dir_all(home.join(".teneral/owner")).expect(made);
        fs::create_dir_all(home.join("memory")).expect(made);
        fs::write(dir.0.join("script.jsonl"), script.join("\n") + "\n").expect(made);

        let mut standin = Command::new(&bin)
            .args(["standin", "--listen", "127.0.0.1:0", "--key", KEY, "--script"])
            .arg(dir.0.join("script.jsonl"))
            .arg("--log")
            .arg(dir.0.join("requests.jsonl"))
            .stdout(Stdio::piped())
            .stderr(fs::File::create(dir.0.join("standin.err")).expect(made))
            .spawn()
            .expect("the kernel's binary starts the stand-in");
        let stdout = standin.stdout.take().expect("the stand-in's stdout is piped");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(WAIT).expect("the stand-in did not say where it listens");
        let model_url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line of the stand-in: {line:?}"))
            .to_owned();

        let socket = dir.0.join("ev.sock");
        let events = Command::new(&bin)
            .args(["serve-events", "--socket"])
            .arg(&socket)
            .arg("--home")
            .arg(&home)
            .args(["--commit", COMMIT])
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.0.join("events.err")).expect(made))
            .spawn()
            .expect("the kernel's binary starts the event channel");
        wait_until(WAIT, "the event socket", || socket.exists().then_some(()));
        let mut rig = Rig {
            dir,
            home,
            socket,
            model_url,
            wire,
            env: Vec::new(),
            standin: Some(standin),
            events,
            body: None,
        };
        rig.env = rig.contract_env();
        rig
    }

    /// The environment of the contract, section 2, with a quiet clock.
    fn contract_env(&self) -> Vec<(String, String)> {
        let protocol = match self.wire {
            Wire::Chat => "chat",
            Wire::Responses => "responses",
        };
        let utf8 = "the temporary directory's path is UTF-8";
        [
            ("TENERAL_CONTRACT", "1"),
            ("TENERAL_HOME", self.home.to_str().expect(utf8)),
            ("TENERAL_COMMIT", COMMIT),
            ("TENERAL_EVENTS", self.socket.to_str().expect(utf8)),
            ("TENERAL_PROVIDER", "standin"),
            ("TENERAL_PROTOCOL", protocol),
            ("TENERAL_MODEL_URL", &self.model_url),
            ("TENERAL_MODEL", "standin-model"),
            ("TENERAL_API_KEY", KEY),
            ("TENERAL_HEARTBEAT_MINUTES", "0"),
            ("TENERAL_CONTEXT_CHARS", "250000"),
            ("TENERAL_CLOCK", "on"),
            ("PATH", &std::env::var("PATH").unwrap_or_default()),
            ("HOME", &std::env::var("HOME").unwrap_or_default()),
            ("LANG", "C.UTF-8"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Sets (or adds) one variable of the body's environment.
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// Writes a journal as if a body had lived before (so no birth).
    pub fn seed_journal(&self, events: &[Value]) {
        let mut text = String::new();
        for (n, event) in events.iter().enumerate() {
            let mut event = event.clone();
            event["ts"] = "2026-01-01T00:00:00.000Z".into();
            event["seq"] = (n as u64 + 1).into();
            event["commit"] = COMMIT.into();
            text.push_str(&event.to_string());
            text.push('\n');
        }
        fs::write(self.home.join("memory/journal.jsonl"), text).expect("the journal can be seeded");
    }

    /// Starts the body as the kernel does: bare environment, the home as
    /// working directory, empty stdin, its own process group.
    pub fn start(&mut self) {
        let body = Command::new(env!("CARGO_BIN_EXE_teneral-body"))
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.home)
            .stdin(Stdio::null())
            .stdout(fs::File::create(self.dir.0.join("body.out")).expect("body.out can be made"))
            .stderr(fs::File::create(self.dir.0.join("body.err")).expect("body.err can be made"))
            .process_group(0)
            .spawn()
            .expect("the body's binary starts");
        self.body = Some(body);
    }

    /// Starts the body and waits for `generation.ready`.
    pub fn start_ready(&mut self) {
        self.start();
        self.wait_for("generation.ready", |j| has(j, "generation.ready"));
    }

    pub fn body_pid(&self) -> u32 {
        self.body.as_ref().expect("the body was started").id()
    }

    /// The journal's events, parsed.
    pub fn journal(&self) -> Vec<Value> {
        read_lines(&self.home.join("memory/journal.jsonl"))
    }

    /// The requests the stand-in received, as it logged them.
    pub fn requests(&self) -> Vec<Value> {
        read_lines(&self.dir.0.join("requests.jsonl"))
    }

    /// The kernel's log (body `log` events show up here).
    pub fn kernel_log(&self) -> String {
        fs::read_to_string(self.dir.0.join("events.err")).unwrap_or_default()
    }

    pub fn body_stderr(&self) -> String {
        fs::read_to_string(self.dir.0.join("body.err")).unwrap_or_default()
    }

    /// What the rig knows, for a failing test's message.
    pub fn report(&self) -> String {
        let journal: Vec<String> = self.journal().iter().map(Value::to_string).collect();
        format!(
            "journal:\n{}\nbody stderr:\n{}\nkernel log:\n{}\nstand-in stderr:\n{}",
            journal.join("\n"),
            self.body_stderr(),
            self.kernel_log(),
            fs::read_to_string(self.dir.0.join("standin.err")).unwrap_or_default()
        )
    }

    /// Waits until `check` holds for the journal; returns the journal.
    pub fn wait_for(&self, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let journal = self.journal();
            if check(&journal) {
                return journal;
            }
            assert!(start.elapsed() < WAIT, "gave up waiting for {what}\n{}", self.report());
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the body has ended `n` turns (ended or interrupted).
    pub fn wait_turns(&self, n: usize) -> Vec<Value> {
        self.wait_for(&format!("{n} turns to end"), |j| {
            count(j, "turn.ended") + count(j, "turn.interrupted") >= n
        })
    }

    /// Puts a file into the owner's directory the way clients do: a hidden
    /// name first, then a rename.
    pub fn owner_file(&self, name: &str, text: &str) {
        let dir = self.home.join(".teneral/owner");
        let temp = dir.join(format!(".{name}.tmp"));
        fs::write(&temp, text).expect("the owner's directory takes a file");
        fs::rename(temp, dir.join(name)).expect("the owner's file can be renamed into place");
    }

    /// An owner line, named so that it sorts after earlier ones.
    pub fn say(&self, n: u32, text: &str) {
        self.owner_file(&format!("{n:04}.txt"), text);
    }

    /// An interrupt, as `/stop` makes one.
    pub fn interrupt(&self, n: u32) {
        self.owner_file(&format!("{n:04}.interrupt"), "");
    }

    /// Writes an envelope into the inbox (hidden name, then rename).
    pub fn envelope(&self, name: &str, content: &str) {
        let dir = self.home.join("inbox");
        fs::create_dir_all(&dir).expect("the inbox can be made");
        let temp = dir.join(format!(".{name}.tmp"));
        fs::write(&temp, content).expect("the inbox takes a file");
        fs::rename(temp, dir.join(name)).expect("the envelope can be renamed into place");
    }

    /// Sends SIGTERM and waits; returns the status and how long it took.
    pub fn terminate(&mut self) -> (ExitStatus, Duration) {
        let body = self.body.as_mut().expect("no body running");
        let start = Instant::now();
        kill(body.id(), libc::SIGTERM);
        let status = wait_child(body, WAIT).expect("the body did not stop on SIGTERM");
        (status, start.elapsed())
    }

    /// Stops the stand-in model (to make it unreachable).
    pub fn stop_model(&mut self) {
        if let Some(mut standin) = self.standin.take() {
            let _ = standin.kill();
            let _ = standin.wait();
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(body) = self.body.as_mut() {
            kill(body.id(), libc::SIGKILL);
            // SAFETY: kill has no memory effects; the group is the body's own.
            unsafe {
                libc::kill(-(body.id() as i32), libc::SIGKILL);
            }
            let _ = body.wait();
        }
        self.stop_model();
        let _ = self.events.kill();
        let _ = self.events.wait();
    }
}
