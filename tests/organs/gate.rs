//! The gate's organ steps through `teneral organs` (a process of its own, so
//! its reaper never takes another test's children), `prepare` at a
//! generation's start, rollback to an older pin, and the supervisor's stop
//! when an archive is gone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use teneral::organs::{self, cache::Cache, OrganError, Unpacker};

use super::tarball::{gz, Tar};
use crate::common::{alive, teneral, Individual, TestResult, Within, QUICK, SLOW};

const URL: &str = "https://example.org/releases/tool-1.0.tar.gz";

/// An individual's directory with a workspace checkout in it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Result<Self, std::io::Error> {
        let dir = tempfile::Builder::new().prefix("tnl-organs").tempdir()?;
        std::fs::create_dir_all(dir.path().join(".teneral/candidate/body"))?;
        Ok(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn workspace(&self) -> PathBuf {
        self.path().join(".teneral/candidate")
    }

    fn cache(&self) -> Cache {
        Cache::new(self.path())
    }

    /// Puts `archive` in the cache; returns its hash.
    fn put(&self, archive: &[u8]) -> Result<String, std::io::Error> {
        let sha = organs::cache::hash(archive)?;
        let path = self.cache().archive(&sha);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, archive)?;
        Ok(sha)
    }

    /// `organs::prepare` as a generation's start runs it (the unpacker in
    /// the cage where this Linux can build it).
    fn prepare(&self) -> Result<Option<PathBuf>, OrganError> {
        let runner = teneral::runner::Runner::direct(super::caged::cage());
        let program = teneral();
        let unpacker = Unpacker::new(&runner, &program);
        super::caged::block_on(organs::prepare(self.path(), &self.workspace(), &unpacker))
    }

    /// Writes the workspace's pin file.
    fn pin(&self, text: &str) -> Result<(), std::io::Error> {
        std::fs::write(self.workspace().join("body/organs.json"), text)
    }

    /// `teneral organs --dir <workspace>`: (status, stdout, stderr).
    fn organs(&self, extra: &[&str]) -> Result<(Option<i32>, String, String), std::io::Error> {
        let out = Command::new(teneral())
            .arg("organs")
            .arg("--dir")
            .arg(self.workspace())
            .args(extra)
            .output_within(SLOW)?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Ok((out.status.code(), text(&out.stdout), text(&out.stderr)))
    }
}

fn pin_json(sha: &str, dir: Option<&str>, check: &[&str]) -> String {
    let mut pin = serde_json::json!({"url": URL, "sha256": sha});
    if let Some(dir) = dir {
        pin["dir"] = dir.into();
    }
    if !check.is_empty() {
        pin["check"] = check.into();
    }
    serde_json::json!({ "tool": pin }).to_string()
}

/// An organ whose `bin/check` runs `script`, wrapped in `tool-1.0/`.
fn organ(script: &str) -> Vec<u8> {
    gz(&Tar::new()
        .dir("tool-1.0/", 0o755)
        .file_mode("tool-1.0/bin/check", format!("#!/bin/sh\n{script}\n").as_bytes(), 0o755)
        .symlink("tool-1.0/bin/check-link", "check")
        .finish())
}

#[test]
fn teneral_organs_prepares_checks_and_prints_the_set() -> TestResult {
    let home = Home::new()?;
    let sha = home.put(&organ("test -f bin/check || exit 7\necho fine"))?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/check-link", "--help"]))?;
    let (status, out, err) = home.organs(&[])?;
    assert_eq!(status, Some(0), "{err}");
    let set = PathBuf::from(out.trim());
    assert!(set.starts_with(home.path().join(".teneral/organs/sets")), "{out}");
    let link = std::fs::read_link(set.join("tool"))?;
    assert_eq!(link, PathBuf::from(format!("../../trees/{sha}/tool-1.0")));
    assert!(set.join("tool/bin/check").is_file());
    // Twice gives the same set, and nothing is unpacked again.
    let (status, again, err) = home.organs(&[])?;
    assert_eq!((status, again.trim()), (Some(0), out.trim()), "{err}");
    // No pins: nothing to do, and it says so.
    home.pin("{}")?;
    let (status, out, err) = home.organs(&[])?;
    assert_eq!((status, out.as_str()), (Some(0), ""));
    assert!(err.contains("pins no organs"), "{err}");
    Ok(())
}

#[test]
fn the_gate_refuses_with_what_to_do() -> TestResult {
    let home = Home::new()?;
    let good = organ("exit 0");
    let sha = organs::cache::hash(&good[..])?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &[]))?;
    let archive = home.cache().archive(&sha);
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    let want = format!(
        "organ tool: it is not unpacked, and archive {sha} is not in the cache at {}; download {URL} there first",
        archive.display()
    );
    assert!(err.contains(&want), "{err}");

    std::fs::create_dir_all(home.cache().root.join("archives"))?;
    std::fs::write(&archive, b"not the archive")?;
    let (status, _, err) = home.organs(&[])?;
    let got = organs::cache::hash(&b"not the archive"[..])?;
    assert_eq!(status, Some(1));
    assert!(
        err.contains(&format!("hashes to {got}, not to the pinned {sha}; download {URL} again")),
        "{err}"
    );

    // A fifo in the archive's place is refused, not waited on.
    std::fs::remove_file(&archive)?;
    let made = Command::new("mkfifo").arg(&archive).status_within(QUICK)?;
    assert!(made.success());
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(err.contains("it is not a regular file; download"), "{err}");
    std::fs::remove_file(&archive)?;

    home.put(&good)?;
    home.pin(&pin_json(&sha, Some("tool-2.0"), &[]))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(
        err.contains("organ tool: dir \"tool-2.0\" is not a directory in its archive; set dir"),
        "{err}"
    );

    std::fs::remove_file(home.workspace().join("body/organs.json"))?;
    std::os::unix::fs::symlink("/etc/hostname", home.workspace().join("body/organs.json"))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(err.contains("organs.json: is not a regular file; body/organs.json must be"), "{err}");
    std::fs::remove_file(home.workspace().join("body/organs.json"))?;

    home.pin(r#"{"tool": {"url": "https://x.org/a.tar.gz", "sha256": "00", "version": 2}}"#)?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(
        err.contains("body/organs.json: organ tool: field \"version\" is not defined"),
        "{err}"
    );
    assert!(err.contains("mend the pin file"), "{err}");
    Ok(())
}

#[test]
fn a_check_sees_only_the_bare_environment_in_the_organ_root() -> TestResult {
    let home = Home::new()?;
    let script = "[ -z \"$TENERAL_TEST_SECRET\" ] || { echo saw the secret; exit 9; }\n\
                  [ -n \"$PATH\" ] || exit 8\n[ -f bin/check ] || exit 7";
    let sha = home.put(&organ(script))?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/check"]))?;
    let out = Command::new(teneral())
        .arg("organs")
        .arg("--dir")
        .arg(home.workspace())
        .env("TENERAL_TEST_SECRET", "sk-not-for-checks")
        .output_within(SLOW)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    Ok(())
}

#[test]
fn an_orphaned_staging_directory_is_cleared_and_no_tree_is() -> TestResult {
    let home = Home::new()?;
    let sha = home.put(&organ("exit 0"))?;
    let trees = home.cache().root.join("trees");
    // A kernel that died while it unpacked (no such pid) left this behind.
    let orphan = trees.join(format!(".unpack-{sha}-4000000-0"));
    std::fs::create_dir_all(orphan.join("half"))?;
    let other = trees.join("0".repeat(64));
    std::fs::create_dir_all(&other)?;
    home.pin(&pin_json(&sha, None, &[]))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(0), "{err}");
    assert!(!orphan.exists(), "the orphan is gone");
    assert!(other.is_dir(), "another tree stays");
    Ok(())
}

#[test]
fn a_hostile_archive_is_refused_and_leaves_no_tree() -> TestResult {
    let home = Home::new()?;
    let sha = home.put(&gz(&Tar::new().file("ok", b"x").symlink("up", "../../..").finish()))?;
    home.pin(&pin_json(&sha, None, &[]))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    let want = format!(
        "organ tool: archive {sha} cannot be unpacked: entry \"up\" is refused: it is a symlink to \"../../..\", which leads out of the tree"
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("pin another release"), "{err}");
    let trees: Vec<_> = std::fs::read_dir(home.cache().root.join("trees"))?.collect();
    assert!(trees.is_empty(), "no tree and no staging directory is left: {trees:?}");
    Ok(())
}

#[test]
fn a_failing_check_is_refused_with_its_output() -> TestResult {
    let home = Home::new()?;
    let sha = home.put(&organ("echo out-of-check\necho err-of-check >&2\nexit 3"))?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/check"]))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(
        err.contains(
            "organ tool: its check [\"bin/check\"] did not pass: it ended with exit status 3"
        ),
        "{err}"
    );
    assert!(err.contains("out-of-check") && err.contains("err-of-check"), "{err}");

    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/none"]))?;
    let (status, _, err) = home.organs(&[])?;
    assert_eq!(status, Some(1));
    assert!(err.contains("its first word \"bin/none\" is not a file of the organ"), "{err}");
    Ok(())
}

#[test]
fn a_check_past_its_limit_is_killed_with_its_group() -> TestResult {
    let home = Home::new()?;
    let sha = home.put(&organ("sleep 300 &\necho grandchild $!\nwait"))?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/check"]))?;
    let started = std::time::Instant::now();
    let (status, _, err) = home.organs(&["--check-seconds", "1"])?;
    assert_eq!(status, Some(1));
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert!(err.contains("did not pass: it ran past 1 s and was killed"), "{err}");
    // The last mention: the refusal's own words, after the log's lines.
    let pid: u32 = err
        .rsplit("grandchild ")
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .ok_or("no grandchild pid in the output")?;
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the check's grandchild {pid} still runs");
    Ok(())
}

#[test]
fn a_start_unpacks_a_missing_tree_and_stops_only_without_the_archive() -> TestResult {
    let home = Home::new()?;
    let archive = organ("exit 0");
    let sha = home.put(&archive)?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &[]))?;
    let set = home.prepare()?.ok_or("no set")?;
    assert!(set.join("tool/bin/check").is_file());
    // The tree goes: the next start unpacks it again.
    std::fs::remove_dir_all(home.cache().tree(&sha))?;
    assert_eq!(home.prepare()?, Some(set.clone()));
    assert!(set.join("tool/bin/check").is_file());
    // The archive goes: the tree is enough.
    std::fs::remove_file(home.cache().archive(&sha))?;
    assert_eq!(home.prepare()?, Some(set.clone()));
    // Both go: the start stops, naming the archive's place and its address.
    std::fs::remove_dir_all(home.cache().tree(&sha))?;
    let err = home.prepare().err().ok_or("prepared anyway")?;
    assert!(err.archive_missing(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&home.cache().archive(&sha).display().to_string()) && text.contains(URL),
        "{text}"
    );
    Ok(())
}

#[test]
fn a_caged_check_cannot_change_the_shared_tree() -> TestResult {
    if std::env::var_os("TENERAL_TEST_NO_CAGE").is_some() {
        crate::common::skip(
            "cages do not nest, and TENERAL_TEST_NO_CAGE says this runs in one (or without one)",
        );
        return Ok(());
    }
    let home = Home::new()?;
    let sha = home.put(&organ("touch ./planted || exit 3"))?;
    home.pin(&pin_json(&sha, Some("tool-1.0"), &["bin/check"]))?;
    let tree = home.cache().tree(&sha).join("tool-1.0");
    // Caged, as the mutation gate runs it: the tree is read and executed only.
    let (status, out, err) = home.organs(&["--cage"])?;
    assert_eq!(status, Some(1), "{out}\n{err}");
    // The tree is a read-only mount in the cage's new root.
    assert!(err.contains("touch: cannot touch './planted': Read-only file system"), "{err}");
    assert!(!tree.join("planted").exists(), "nothing was planted in the tree");
    // Uncaged (the agent's own run, inside its generation's cage, which
    // cannot nest another), the same check writes there: the test bites.
    let (status, out, err) = home.organs(&[])?;
    assert_eq!(status, Some(0), "{out}\n{err}");
    assert!(tree.join("planted").exists());
    Ok(())
}

#[test]
fn a_rolled_back_generation_finds_its_tree() -> TestResult {
    let home = Home::new()?;
    let old = home.put(&organ("echo old"))?;
    let new = home.put(&organ("echo new"))?;
    home.pin(&pin_json(&old, Some("tool-1.0"), &[]))?;
    let old_set = home.prepare()?.ok_or("no set")?;
    home.pin(&pin_json(&new, Some("tool-1.0"), &[]))?;
    let new_set = home.prepare()?.ok_or("no set")?;
    assert_ne!(old_set, new_set);
    // Back to the old pin: its tree is still there, nothing is unpacked,
    // even with the old archive gone.
    std::fs::remove_file(home.cache().archive(&old))?;
    home.pin(&pin_json(&old, Some("tool-1.0"), &[]))?;
    assert_eq!(home.prepare()?, Some(old_set.clone()));
    let script = std::fs::read_to_string(old_set.join("tool/bin/check"))?;
    assert!(script.contains("echo old"), "{script}");
    assert!(home.cache().tree(&new).is_dir(), "no tree is ever removed");
    Ok(())
}

#[test]
fn a_missing_archive_stops_the_supervisor() -> TestResult {
    let sha = "ea20fd48a223ffb3ed3e37a5edcb8a7caf5c5199d4cc8ba4e072d0c21e4a57b7";
    let pins = pin_json(sha, None, &[]);
    let ind = Individual::with_body(&[("body/organs.json", &pins)], "", &[])?;
    let mut kernel = ind.start()?;
    let status = kernel.wait(Duration::from_secs(60))?;
    assert_eq!(status, Some(3), "{}", ind.kernel_log());
    let path = ind.path().canonicalize()?.join(format!(".teneral/organs/archives/{sha}.tar.gz"));
    let want = format!(
        "archive {sha} is not in the cache at {}; download {URL} there first",
        path.display()
    );
    let notice =
        ind.wait_for("the notice", Duration::from_secs(5), |e| e["type"] == "kernel.notice")?;
    assert!(notice["text"].as_str().is_some_and(|t| t.contains(&want)), "{notice}");
    let stopped =
        ind.wait_for("the stop", Duration::from_secs(5), |e| e["type"] == "kernel.stopped")?;
    assert!(stopped["reason"].as_str().is_some_and(|t| t.contains(&want)), "{stopped}");
    assert_eq!(stopped["status"], 3);
    assert!(ind.events("generation.started").is_empty(), "no generation was started");
    Ok(())
}
