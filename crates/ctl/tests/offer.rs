//! `teneralctl offer key|check` against real git repositories, with the
//! individual's key made at test time and commits signed by git itself
//! (`gpg.format=ssh`), the way an agent's checkout signs them.
#![allow(clippy::expect_used)]

#[path = "offer/publish.rs"]
mod publish;
#[path = "offer/witness.rs"]
mod witness;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use teneral_testkit::{Within, SLOW};

struct Home {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .args(["-c", "user.name=Agent", "-c", "user.email=agent@localhost"])
        .args(["-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output_within(SLOW)
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn ctl(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_teneralctl"))
        .args(args)
        .arg("-d")
        .arg(&home.dir)
        .output_within(SLOW)
        .expect("teneralctl runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn write(home: &Home, rel: &str, text: &str) {
    let path = home.dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

const MESSAGE: &str =
    "Faster lookups\n\nWhat it changes: the body's index\nWhy: lookups were slow\n\
                       Evidence: 3 times faster in its bench\nNot verified: on ARM\n";

/// A species of one commit on `main`, the key made, and `offer/fast` at main.
fn species() -> Home {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let home = Home { dir: tmp.path().to_owned(), _tmp: tmp };
    git(&home.dir, &["init", "-q"]);
    write(&home, "body/index.ts", "export const x = 1;\n");
    write(&home, "BACKLOG.md", "# Backlog\n");
    write(&home, ".gitignore", ".teneral/\n.env\n");
    git(&home.dir, &["add", "-A"]);
    git(&home.dir, &["commit", "-qm", "The species"]);
    let (code, out, err) = ctl(&home, &["offer", "key"]);
    assert_eq!(code, 0, "{out}{err}");
    git(&home.dir, &["switch", "-qc", "offer/fast"]);
    home
}

fn key_path(home: &Home) -> String {
    home.dir.join(".teneral/auth/offer-key").display().to_string()
}

/// Commits everything under body/ with `message`, signed when `signed`.
fn commit(home: &Home, message: &str, signed: bool) {
    git(&home.dir, &["add", "body"]);
    let key = format!("user.signingkey={}", key_path(home));
    let mut args = vec!["-c", "gpg.format=ssh", "-c", &key, "commit", "-q", "-m", message];
    if signed {
        args.push("-S");
    }
    git(&home.dir, &args);
}

fn head(home: &Home) -> String {
    let out = git(&home.dir, &["rev-parse", "HEAD"]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn check(home: &Home) -> (i32, String, String) {
    ctl(home, &["offer", "check", "offer/fast", "--base", "main", "--no-gates"])
}

#[test]
fn a_clean_offer_passes_and_git_verifies_its_signature_with_the_printed_line() {
    let home = species();
    write(&home, "body/index.ts", "export const x = 2;\nexport const y = 3;\n");
    commit(&home, MESSAGE, true);
    let (code, out, err) = check(&home);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("body/index.ts (40 bytes)") && out.contains("passed"), "{out}");
    let kept = home.dir.join(format!(".teneral/offers/{}.json", head(&home)));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&kept).expect("the report is kept")).expect("json");
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["files"][0]["size"], 40, "{report}");

    let (_, printed, _) = ctl(&home, &["offer", "key"]);
    let line = printed.lines().find(|l| l.contains("namespaces=")).expect("a signers line");
    let signers = home.dir.join(".teneral/allowed");
    std::fs::write(&signers, format!("{}\n", line.trim())).expect("write signers");
    let allowed = format!("gpg.ssh.allowedSignersFile={}", signers.display());
    git(&home.dir, &["-c", &allowed, "verify-commit", "HEAD"]);
}

#[test]
fn an_unsigned_commit_fails_the_check() {
    let home = species();
    write(&home, "body/a.ts", "export const a = 1;\n");
    commit(&home, "First half", true);
    write(&home, "body/b.ts", "export const b = 1;\n");
    commit(&home, MESSAGE, false);
    let (code, out, err) = check(&home);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL signed by the individual's key"), "{out}");
    assert!(out.contains(&format!("{}: not signed", &head(&home)[..7])), "{out}");
}

#[test]
fn a_commit_signed_by_another_key_fails_the_check() {
    let home = species();
    let other = home.dir.join(".teneral/other");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .output_within(SLOW)
        .expect("ssh-keygen runs");
    assert!(made.status.success(), "{made:?}");
    write(&home, "body/a.ts", "export const a = 1;\n");
    git(&home.dir, &["add", "body"]);
    let key = format!("user.signingkey={}", other.display());
    git(&home.dir, &["-c", "gpg.format=ssh", "-c", &key, "commit", "-q", "-S", "-m", MESSAGE]);
    let (code, out, _) = check(&home);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("signed by another key"), "{out}");
}

#[test]
fn a_secret_added_then_removed_is_found_in_the_commit_that_added_it() {
    let home = species();
    let token = format!("ghp_{}", "Zz09YyXx8W".repeat(4));
    write(&home, "body/a.ts", &format!("const t = \"{token}\";\n"));
    commit(&home, "Try the API", true);
    let added = head(&home);
    write(&home, "body/a.ts", "const t = process.env.T;\n");
    commit(&home, MESSAGE, true);
    let (code, out, err) = check(&home);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("{} body/a.ts:1: GitHub token: ghp_…", &added[..7])), "{out}");
    assert!(!out.contains(&token), "the token is masked: {out}");
    let kept =
        std::fs::read_to_string(home.dir.join(format!(".teneral/offers/{}.json", head(&home))))
            .expect("the report is kept");
    assert!(!kept.contains(&token) && kept.contains("\"rule\": \"GitHub token\""), "{kept}");
}

#[test]
fn the_value_of_a_dotenv_key_is_found_literally() {
    let home = species();
    let value = "owner-only-provider-credential-1234";
    write(&home, ".env", &format!("TENERAL_MODEL=gpt\nOPENAI_API_KEY={value}\n"));
    write(&home, "body/a.ts", &format!("// debug: {value}\n"));
    commit(&home, MESSAGE, true);
    let (code, out, _) = check(&home);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("this install's secret: the value of .env OPENAI_API_KEY"), "{out}");
    assert!(!out.contains(value), "{out}");
}

#[test]
fn private_paths_and_new_top_level_names_are_found_and_outside_paths_listed() {
    let home = species();
    write(&home, "soul/name.md", "name: Ada\n");
    write(&home, "tools/x.sh", "echo\n");
    git(&home.dir, &["add", "soul", "tools"]);
    commit(&home, MESSAGE, true);
    let (code, out, _) = check(&home);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("soul/name.md (its name): private path"), "{out}");
    assert!(out.contains("tools/x.sh (its name): new top-level name"), "{out}");
    assert!(out.contains("outside body/ and BACKLOG.md: soul/name.md, tools/x.sh"), "{out}");
}

#[test]
fn an_incomplete_message_fails_and_says_what_it_lacks() {
    let home = species();
    write(&home, "body/a.ts", "export const a = 1;\n");
    commit(&home, "Faster\n\nWhat it changes: x\nWhy: y\nNot verified: z\n", true);
    let (code, out, _) = check(&home);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL last message complete"), "{out}");
    assert!(out.contains("it lacks a line starting \"Evidence:\""), "{out}");
}

#[test]
fn an_offer_that_does_not_descend_from_the_species_head_says_rebase() {
    let home = species();
    write(&home, "body/a.ts", "export const a = 1;\n");
    commit(&home, MESSAGE, true);
    git(&home.dir, &["switch", "-q", "main"]);
    write(&home, "BACKLOG.md", "# Backlog\n- more\n");
    git(&home.dir, &["commit", "-qam", "The species moves on"]);
    let (code, out, _) = check(&home);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL descends from the species' head") && out.contains("rebase"),
        "{out}"
    );
}

#[test]
fn the_key_is_made_once_kept_private_and_never_taken_through_a_link() {
    let home = species();
    let (_, first, _) = ctl(&home, &["offer", "key"]);
    let (_, second, _) = ctl(&home, &["offer", "key"]);
    assert!(first.starts_with("ssh-ed25519 "), "{first}");
    assert_eq!(first, second, "never replaced");
    let path = PathBuf::from(key_path(&home));
    let mode = std::fs::metadata(&path).expect("the key is there").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let pubkey = std::fs::read_to_string(path.with_extension("pub")).expect("the public half");
    assert_eq!(pubkey.lines().next(), first.lines().next());

    let moved = home.dir.join(".teneral/moved-key");
    std::fs::rename(&path, &moved).expect("move the key");
    std::os::unix::fs::symlink(&moved, &path).expect("link");
    let (code, out, err) = ctl(&home, &["offer", "key"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("(os error 40)") && err.contains("never taken through a link"), "{err}");

    std::fs::remove_file(&path).expect("unlink");
    std::fs::hard_link(&moved, &path).expect("hard link");
    let (code, _, err) = ctl(&home, &["offer", "key"]);
    assert_eq!(code, 1);
    assert!(err.contains("2 names"), "{err}");

    std::fs::remove_file(&path).expect("unlink");
    std::fs::rename(&moved, &path).expect("put the key back");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, _, err) = ctl(&home, &["offer", "key"]);
    assert_eq!(code, 1);
    assert!(err.contains("may be read by others (mode 644); run chmod 600"), "{err}");

    let auth = home.dir.join(".teneral/auth");
    let elsewhere = home.dir.join(".teneral/elsewhere");
    std::fs::rename(&auth, &elsewhere).expect("move the directory");
    std::os::unix::fs::symlink(&elsewhere, &auth).expect("link the directory");
    let (code, _, err) = ctl(&home, &["offer", "key"]);
    assert_eq!(code, 1);
    assert!(err.contains("never taken through a link"), "{err}");
}
