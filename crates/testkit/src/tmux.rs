//! A real terminal for a test: tmux runs one command line in a server of
//! the test's own (`tmux -L`, its socket in a directory of its own rather
//! than /tmp's), `send-keys` types and `capture-pane` reads the screen. The
//! server is killed when the [`Tmux`] is dropped. Tests that use it are
//! system tests: they need tmux (`scripts/deps` installs it).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::limit::{run_within, QUICK};

/// How long [`Tmux::wait_for`] waits for the screen.
pub const SCREEN_WAIT: Duration = Duration::from_secs(30);

/// One tmux server running one command line.
pub struct Tmux {
    pub socket: String,
    /// tmux's own directory for its socket (TMUX_TMPDIR).
    pub dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `line` (run by the shell) in a `width`×`height` terminal, in
    /// a server named after `name`, this process and a count.
    pub fn start(name: &str, width: u16, height: u16, line: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("{name}-{}-{n}", std::process::id());
        let dir = tempfile::tempdir().expect("a temp dir for tmux");
        let tmux = Tmux { socket, dir };
        let (width, height) = (width.to_string(), height.to_string());
        let out = tmux.run(&["new-session", "-d", "-x", &width, "-y", &height, line]);
        assert!(out.status.success(), "tmux starts (scripts/deps installs it): {out:?}");
        tmux
    }

    /// Runs `tmux args` against this server, under a time limit.
    pub fn run(&self, args: &[&str]) -> Output {
        self.try_run(args).expect("tmux runs (scripts/deps installs it)")
    }

    fn try_run(&self, args: &[&str]) -> Result<Output, String> {
        let mut tmux = Command::new("tmux");
        tmux.env("TMUX_TMPDIR", self.dir.path()).arg("-L").arg(&self.socket).args(args);
        run_within(&mut tmux, QUICK, "driving the terminal")
    }

    /// Presses keys as tmux names them (`Enter`, `C-d`, `Escape`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// Types `text` as it is.
    pub fn type_text(&self, text: &str) {
        assert!(self.run(&["send-keys", "-t", "0", "-l", text]).status.success());
    }

    /// Types `text`, then Enter.
    pub fn enter(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// Pastes `text` as a terminal does (bracketed, when the client asked).
    pub fn paste(&self, text: &str) {
        assert!(self.run(&["set-buffer", "--", text]).status.success());
        assert!(self.run(&["paste-buffer", "-p", "-t", "0"]).status.success());
    }

    /// The screen as text (`escapes`: with its colours as SGR sequences).
    pub fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "0", "-S", "-200"];
        if escapes {
            args.push("-e");
        }
        String::from_utf8_lossy(&self.run(&args).stdout).into_owned()
    }

    /// Waits until the screen contains every one of `texts` (lines are
    /// printed one after the other, and the live region drawn apart);
    /// returns the screen.
    pub fn wait_for_all(&self, texts: &[&str]) -> String {
        let deadline = Instant::now() + SCREEN_WAIT;
        loop {
            let screen = self.screen(false);
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{texts:?} never all showed; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the screen contains `text`; returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_for_within(text, SCREEN_WAIT)
    }

    /// The same, at most `within`.
    pub fn wait_for_within(&self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen(false);
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{text:?} never showed; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.try_run(&["kill-server"]);
    }
}
