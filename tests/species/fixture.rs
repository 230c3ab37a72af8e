//! A species and an individual made with real git: the maintainer's working
//! copy pushes to a bare repository that the git server serves; the
//! individual's repository is a clone of it over HTTP (so `origin` is a
//! remote on loopback); the agent's workspace is a clone of the individual's
//! that merges the species, and its commits reach the individual's object
//! store as the gate's fetch would put them there, without moving a ref.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use teneral::events::SharedJournal;
use teneral::settings::Settings;
use teneral::species::{self, Judgement, Refusal, SpeciesContext};
use teneral_core::journal::writer::Journal;

use crate::common::{run_within, succeed_within};
use teneral_testkit::git_http::GitServer;

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Runs git in `dir` with no system or global configuration; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> Res<String> {
    let out = git_status(dir, args)?;
    if !out.0 {
        return Err(format!("git {args:?} in {}: {}", dir.display(), out.1).into());
    }
    Ok(out.1.trim().to_owned())
}

/// Runs git; whether it succeeded, and what it printed (stdout and stderr).
pub fn git_status(dir: &Path, args: &[&str]) -> Res<(bool, String)> {
    let mut git = Command::new("git");
    git.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "user.name=Maintainer", "-c", "user.email=maint@example.org"])
        .args(["-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"])
        .args(args);
    let out = run_within(&mut git, crate::common::QUICK, "the species' git")?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

pub fn write(dir: &Path, files: &[(&str, &str)]) -> Res<()> {
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

pub struct World {
    pub dir: tempfile::TempDir,
    pub host: GitServer,
    /// The maintainer's working copy.
    pub seed: PathBuf,
    /// The species' bare repository, as a path.
    pub bare: PathBuf,
    /// The individual's directory and main repository.
    pub home: PathBuf,
    /// The agent's workspace.
    pub ws: PathBuf,
    /// The species' first commit, the individual's first generation.
    pub s0: String,
    pub journal: SharedJournal,
}

impl World {
    pub fn new() -> Res<World> {
        let dir = tempfile::tempdir()?;
        let (seed, srv) = (dir.path().join("seed"), dir.path().join("srv"));
        let bare = srv.join("species.git");
        std::fs::create_dir_all(&srv)?;
        git(&srv, &["init", "-q", "--bare", "species.git"])?;
        std::fs::create_dir_all(&seed)?;
        git(&seed, &["init", "-q"])?;
        write(
            &seed,
            &[
                ("src/kernel.rs", "fn main() {}\n"),
                ("README.md", "# teneral\n"),
                ("body/main.rs", "fn body() {}\n"),
                ("BACKLOG.md", "- nothing\n"),
            ],
        )?;
        git(&seed, &["add", "-A"])?;
        git(&seed, &["commit", "-q", "-m", "the species begins"])?;
        let bare_str = bare.to_string_lossy().into_owned();
        git(&seed, &["push", "-q", &bare_str, "main"])?;
        let s0 = git(&seed, &["rev-parse", "HEAD"])?;
        let host = GitServer::start(&srv)?;
        let home = dir.path().join("home");
        git(dir.path(), &["clone", "-q", &host.url("species.git"), "home"])?;
        let ws = dir.path().join("ws");
        git(dir.path(), &["clone", "-q", &home.to_string_lossy(), "ws"])?;
        let journal = Journal::open(&home.join("memory/journal.jsonl"))?;
        let journal = Arc::new(Mutex::new(journal));
        Ok(World { dir, host, seed, bare, home, ws, s0, journal })
    }

    /// A maintainer's commit of the species writing `files`, signed with the
    /// private key at `key` when given, pushed to the bare repository.
    pub fn publish(&self, files: &[(&str, &str)], key: Option<&Path>) -> Res<String> {
        write(&self.seed, files)?;
        git(&self.seed, &["add", "-A"])?;
        let mut args = vec!["-c", "gpg.format=ssh"];
        let key_arg = key.map(|k| format!("user.signingkey={}", k.display()));
        if let Some(k) = &key_arg {
            args.extend(["-c", k.as_str(), "commit", "-q", "-S", "-m", "a species commit"]);
        } else {
            args.extend(["commit", "-q", "-m", "a species commit"]);
        }
        git(&self.seed, &args)?;
        git(&self.seed, &["push", "-q", &self.bare.to_string_lossy(), "main"])?;
        git(&self.seed, &["rev-parse", "HEAD"])
    }

    /// The agent's candidate: from `base`, merging the species' tip when
    /// `merge`, then writing `files`; its objects put in the individual's
    /// repository without a ref moving.
    pub fn candidate(&self, base: &str, merge: bool, files: &[(&str, &str)]) -> Res<String> {
        git(&self.ws, &["fetch", "-q", &self.bare.to_string_lossy(), "+main:refs/tmp/species"])?;
        git(&self.ws, &["checkout", "-q", "-B", "work", base])?;
        if merge {
            git(&self.ws, &["merge", "-q", "--no-edit", "refs/tmp/species"])?;
        }
        write(&self.ws, files)?;
        git(&self.ws, &["add", "-A"])?;
        git(&self.ws, &["commit", "-q", "--allow-empty", "-m", "a mutation"])?;
        git(&self.home, &["fetch", "-q", &self.ws.to_string_lossy(), "work"])?;
        git(&self.ws, &["rev-parse", "HEAD"])
    }

    /// The settings with `TENERAL_SPECIES=mode` and the extra lines.
    pub fn settings(mode: &str, extra: &str) -> Res<Settings> {
        Ok(Settings::parse(&format!("TENERAL_PROVIDER=standin\nTENERAL_SPECIES={mode}\n{extra}"))?)
    }

    /// An install's SIGNERS with these lines (one file for each text).
    pub fn signers(&self, lines: &str) -> Res<PathBuf> {
        let name = format!(
            "SIGNERS-{:x}",
            lines.len() * 31 + lines.bytes().map(usize::from).sum::<usize>()
        );
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("# test signers\n{lines}"))?;
        Ok(path)
    }

    /// A new ed25519 key pair; its private key's path and its allowed-signers line.
    pub fn key(&self, name: &str) -> Res<(PathBuf, String)> {
        let keys = self.dir.path().join("keys");
        std::fs::create_dir_all(&keys)?;
        let path = keys.join(name);
        let mut keygen = Command::new("ssh-keygen");
        keygen.args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"]).arg(&path);
        succeed_within(&mut keygen, crate::common::QUICK, "making a signing key")?;
        let public = std::fs::read_to_string(path.with_extension("pub"))?;
        Ok((path, format!("{name}@example.org {}\n", public.trim())))
    }

    /// Judges `candidate` replacing `running` as the gate will.
    pub fn judge(
        &self,
        settings: &Settings,
        signers: &Path,
        running: &str,
        candidate: &str,
    ) -> Res<Result<Judgement, Refusal>> {
        self.judge_within(species::FETCH_LIMIT, settings, signers, running, candidate)
    }

    /// The same, with the fetch limited to `fetch_limit`.
    pub fn judge_within(
        &self,
        fetch_limit: std::time::Duration,
        settings: &Settings,
        signers: &Path,
        running: &str,
        candidate: &str,
    ) -> Res<Result<Judgement, Refusal>> {
        let repo = git2::Repository::open(&self.home)?;
        let ctx = SpeciesContext {
            home: &self.home,
            repo: &repo,
            settings,
            journal: &self.journal,
            signers,
            fetch_limit,
        };
        let (running, candidate) = (git2::Oid::from_str(running)?, git2::Oid::from_str(candidate)?);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(rt.block_on(species::judge(&ctx, running, candidate)))
    }

    /// The journal's events of `kind`.
    pub fn events(&self, kind: &str) -> Vec<serde_json::Value> {
        let text =
            std::fs::read_to_string(self.home.join("memory/journal.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == kind)
            .collect()
    }
}
