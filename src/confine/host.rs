//! What the plans need to know about this machine and the individual: which
//! system and toolchain paths exist, which top-level names the install
//! tracks, and the directories a generation is given (made before it starts,
//! since a Landlock rule needs something to hold on to).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::plan::Host;

/// The machine's paths every confined process reads or executes. `PATH`
/// directories count as toolchains, except `/`, the home directory itself,
/// any directory holding the cargo or rustup home, and anything under
/// `exclude` (an individual's root, a checkout); and no path that holds one
/// of `exclude` is kept (an individual under `/opt` must not become
/// readable through the rule for `/opt`).
pub fn host(exclude: &[&Path]) -> Host {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let homes = Homes {
        cargo: env_or("CARGO_HOME", under_home(".cargo")),
        rustup: env_or("RUSTUP_HOME", under_home(".rustup")),
        path: std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default(),
        home,
    };
    host_of(&homes, exclude)
}

/// Where the toolchains and the user's files are (the environment's
/// `HOME`, `CARGO_HOME`, `RUSTUP_HOME` and `PATH`).
#[derive(Debug, Clone, Default)]
pub struct Homes {
    pub home: Option<PathBuf>,
    pub cargo: Option<PathBuf>,
    pub rustup: Option<PathBuf>,
    pub path: Vec<PathBuf>,
}

/// [`host`] for the homes given.
pub fn host_of(homes: &Homes, exclude: &[&Path]) -> Host {
    let under_home = |rel: &str| homes.home.as_ref().map(|h| h.join(rel));
    let mut exec: Vec<PathBuf> =
        ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"]
            .iter()
            .map(PathBuf::from)
            .collect();
    let mut read: Vec<PathBuf> =
        ["/etc", "/proc", "/sys", "/dev/urandom", "/dev/random", "/run/systemd/resolve"]
            .iter()
            .map(PathBuf::from)
            .collect();
    let (tool_exec, tool_read) = toolchain(homes.cargo.as_deref(), homes.rustup.as_deref());
    exec.extend(tool_exec);
    read.extend(tool_read.into_iter().filter(|p| !is_config(p) || secret_free_file(p)));
    let homes_dirs: Vec<&Path> =
        [&homes.cargo, &homes.rustup].into_iter().flatten().map(PathBuf::as_path).collect();
    for dir in &homes.path {
        let too_wide = dir == Path::new("/")
            || Some(dir) == homes.home.as_ref()
            || homes_dirs.iter().any(|h| h.starts_with(dir));
        let excluded = exclude.iter().any(|e| dir.starts_with(e) || e.starts_with(dir));
        if dir.is_absolute() && !too_wide && !excluded && !exec.contains(dir) {
            exec.push(dir.clone());
        }
    }
    read.extend(GIT_FILES.iter().filter_map(|rel| under_home(rel)).filter(|p| is_plain_file(p)));
    let devices = ["/dev/null", "/dev/zero", "/dev/full"].iter().map(PathBuf::from).collect();
    let mut host = Host { exec, read, devices };
    for list in [&mut host.exec, &mut host.read, &mut host.devices] {
        // What a path names is what Landlock holds: `/bin` is often `/usr/bin`.
        // Resolved as the kernel's identity, so a path it cannot reach
        // through its parents (no search right on one) is left out: the
        // cage's new root, whose directories anyone may search, never makes
        // reachable what the kernel itself could not reach.
        *list = list.iter().filter_map(|p| p.canonicalize().ok()).collect();
    }
    let exclude: Vec<PathBuf> =
        exclude.iter().map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf())).collect();
    keep_clear(&mut host, &exclude.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    prune(&mut host);
    host
}

/// The files of git's configuration in the home directory that a body and
/// a build read, each granted alone when it is a regular file (a link is
/// not followed): never the directory `~/.config/git`, where git keeps its
/// plaintext `credentials` store, nor `~/.git-credentials`.
pub const GIT_FILES: &[&str] =
    &[".gitconfig", ".config/git/config", ".config/git/ignore", ".config/git/attributes"];

/// Whether `path` is a regular file itself, not a link to one.
fn is_plain_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// What a build needs of the cargo and rustup homes, as (execute, read):
/// the programs (`bin`, the toolchains), the downloaded crates and git
/// checkouts, cargo's lock files and configuration, rustup's settings
/// and its update hashes.
/// Never the homes whole: `credentials.toml`, `credentials` and anything
/// else in them is not there.
pub fn toolchain(cargo: Option<&Path>, rustup: Option<&Path>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    const CARGO_EXEC: &[&str] = &["bin"];
    const CARGO_READ: &[&str] = &[
        "registry",
        "git",
        "config.toml",
        "config",
        ".package-cache",
        ".package-cache-mutate",
        ".global-cache",
    ];
    const RUSTUP_EXEC: &[&str] = &["toolchains"];
    // rustup's proxies make `update-hashes` when it is missing, and fail
    // on a read-only tree; there, it exists.
    const RUSTUP_READ: &[&str] = &["settings.toml", "update-hashes"];
    let mut exec = Vec::new();
    let mut read = Vec::new();
    for (home, x, r) in [(cargo, CARGO_EXEC, CARGO_READ), (rustup, RUSTUP_EXEC, RUSTUP_READ)] {
        if let Some(home) = home {
            exec.extend(x.iter().map(|n| home.join(n)));
            read.extend(r.iter().map(|n| home.join(n)));
        }
    }
    (exec, read)
}

/// Whether `path` is a cargo configuration file (`config`, `config.toml`).
fn is_config(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "config" || n == "config.toml")
}

/// Whether the configuration at `path` may be granted: it names no token
/// or credential (an old cargo kept `[registry] token` there). Unreadable,
/// it is left out.
fn secret_free_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| secret_free(&text))
}

/// Whether a cargo configuration's text names no secret.
pub fn secret_free(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    !["token", "credential", "secret", "password"].iter().any(|w| lower.contains(w))
}

/// Drops the rules another rule already covers (`/usr/bin` under `/usr`, a
/// read rule under an execute rule), so the helper makes fewer.
pub fn prune(host: &mut Host) {
    host.exec.sort();
    host.exec.dedup();
    let exec = host.exec.clone();
    host.exec.retain(|p| !exec.iter().any(|q| q != p && p.starts_with(q)));
    let exec = host.exec.clone();
    host.read.sort();
    host.read.dedup();
    let read = host.read.clone();
    host.read.retain(|p| {
        !exec.iter().any(|q| p.starts_with(q)) && !read.iter().any(|q| q != p && p.starts_with(q))
    });
}

/// Drops every path of `host` that holds one of `protected` or lies in one.
pub fn keep_clear(host: &mut Host, protected: &[&Path]) {
    for list in [&mut host.exec, &mut host.read, &mut host.devices] {
        list.retain(|p| !protected.iter().any(|q| q.starts_with(p) || p.starts_with(q)));
    }
}

fn env_or(name: &str, default: Option<PathBuf>) -> Option<PathBuf> {
    std::env::var_os(name).map(PathBuf::from).or(default)
}

/// The top-level names of the files the individual's repository tracks.
pub fn tracked_names(home: &Path) -> io::Result<Vec<String>> {
    let repo = git2::Repository::open(home).map_err(io::Error::other)?;
    let index = repo.index().map_err(io::Error::other)?;
    let mut names: Vec<String> = Vec::new();
    for entry in index.iter() {
        let path = String::from_utf8_lossy(&entry.path).into_owned();
        let first = path.split('/').next().unwrap_or_default().to_owned();
        if !first.is_empty() && !names.contains(&first) {
            names.push(first);
        }
    }
    Ok(names)
}

/// Makes what a generation's rules hold on to: its own directories, an empty
/// temporary directory, and the journal (so it can be made read-only).
pub fn prepare_generation(home: &Path) -> io::Result<()> {
    for dir in ["soul", "inbox", "memory", ".teneral/candidate", ".teneral/owner", ".teneral/bin"] {
        std::fs::create_dir_all(home.join(dir))?;
    }
    let tmp = home.join(TMP_DIR);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(&tmp)?;
    let held = [
        teneral_core::journal::JOURNAL_PATH,
        teneral_core::scorecard::SCORECARD_PATH,
        teneral_core::evals::RESULTS_PATH,
    ];
    for held in held {
        std::fs::OpenOptions::new().create(true).append(true).open(home.join(held))?;
    }
    Ok(())
}

/// The generation's own temporary directory (its `TMPDIR`), emptied at
/// every start.
pub const TMP_DIR: &str = ".teneral/tmp";

/// The path of the running `teneral`, which is also the helper.
pub fn exe() -> io::Result<PathBuf> {
    std::env::current_exe()
}

/// The program that is the helper for the kernel `exe`: `teneral-confine`
/// beside it (the cage's code alone, which starts without loading the
/// kernel's TLS and git libraries) when it is there, else `exe` itself, as
/// `teneral confine`. Both take the same arguments; `cargo build` builds
/// both from the same sources (a `cargo build --bin teneral` alone would
/// leave an older helper in place).
pub fn helper_program(exe: &Path) -> PathBuf {
    let lean = exe.with_file_name("teneral-confine");
    if lean != exe && lean.is_file() {
        lean
    } else {
        exe.to_owned()
    }
}

/// `[exe, "confine", args..., "--", argv...]`; for `teneral-confine`,
/// `[exe, "confine", "--source", SOURCE_ID, args..., "--", argv...]` (the
/// sources of the cage this kernel links, `teneral_cage::SOURCE_ID`).
pub fn helper_argv(exe: &Path, args: Vec<OsString>, argv: Vec<OsString>) -> Vec<OsString> {
    let mut all = Vec::with_capacity(args.len() + argv.len() + 5);
    all.push(exe.as_os_str().to_owned());
    all.push("confine".into());
    if exe.file_name().is_some_and(|n| n == "teneral-confine") {
        all.push("--source".into());
        all.push(teneral_cage::SOURCE_ID.into());
    }
    all.extend(args);
    all.push("--".into());
    all.extend(argv);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_system_rule_reaches_an_individual_or_a_checkout() {
        let mut host = Host {
            exec: vec!["/usr".into(), "/opt".into(), "/opt/tools".into(), "/root/.cargo".into()],
            read: vec!["/etc".into(), "/opt/ind/soul".into()],
            devices: vec!["/dev/null".into()],
        };
        keep_clear(&mut host, &[Path::new("/opt/ind"), Path::new("/srv/checkout")]);
        assert_eq!(
            host.exec,
            vec![PathBuf::from("/usr"), "/opt/tools".into(), "/root/.cargo".into()]
        );
        assert_eq!(host.read, vec![PathBuf::from("/etc")]);
        assert_eq!(host.devices, vec![PathBuf::from("/dev/null")]);
    }

    #[test]
    fn the_toolchain_homes_are_granted_in_parts_never_whole() {
        let (exec, read) = toolchain(Some(Path::new("/c")), Some(Path::new("/r")));
        let table: [(&str, Option<&Vec<PathBuf>>); 10] = [
            ("/c/bin", Some(&exec)),
            ("/r/toolchains", Some(&exec)),
            ("/c/registry", Some(&read)),
            ("/c/git", Some(&read)),
            ("/c/config.toml", Some(&read)),
            ("/r/settings.toml", Some(&read)),
            ("/c", None),
            ("/r", None),
            ("/c/credentials.toml", None),
            ("/c/credentials", None),
        ];
        for (path, list) in table {
            let path = PathBuf::from(path);
            let granted = [&exec, &read].iter().any(|l| l.contains(&path));
            match list {
                Some(list) => assert!(list.contains(&path), "{}", path.display()),
                None => assert!(!granted, "{} is never granted", path.display()),
            }
        }
    }

    /// Of git's files in the home only `.gitconfig` and `config`,
    /// `ignore`, `attributes` of `~/.config/git` are granted, each when it
    /// is a regular file; never the directory, its `credentials`, nor a
    /// link.
    #[test]
    fn of_gits_configuration_only_its_plain_files_are_granted() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let home = dir.path().join("home");
        let git = home.join(".config/git");
        std::fs::create_dir_all(&git).expect("~/.config/git");
        for name in ["config", "attributes", "credentials"] {
            std::fs::write(git.join(name), "x\n").expect("a file of git's");
        }
        std::fs::write(home.join(".git-credentials"), "x\n").expect("~/.git-credentials");
        std::os::unix::fs::symlink(git.join("credentials"), git.join("ignore")).expect("a link");
        let homes = Homes { home: Some(home.clone()), ..Homes::default() };
        let host = host_of(&homes, &[]);
        let granted: Vec<&PathBuf> =
            host.read.iter().chain(&host.exec).filter(|p| p.starts_with(dir.path())).collect();
        let real = |p: PathBuf| p.canonicalize().expect("the file is there");
        let want = [real(git.join("config")), real(git.join("attributes"))];
        assert_eq!(granted.len(), want.len(), "{granted:?}");
        for path in &want {
            assert!(granted.contains(&path), "{} is granted: {granted:?}", path.display());
        }
    }

    #[test]
    fn a_configuration_naming_a_secret_is_not_granted() {
        let table = [
            ("[net]\ngit-fetch-with-cli = true\n", true),
            ("[source.crates-io]\nreplace-with = \"vendored\"\n", true),
            ("[registry]\ntoken = \"abc\"\n", false),
            ("[registries.x]\nTOKEN = \"abc\"\n", false),
            ("[registry]\ncredential-provider = \"cargo:token\"\n", false),
        ];
        for (text, free) in table {
            assert_eq!(secret_free(text), free, "{text}");
        }
    }

    #[test]
    fn covered_rules_are_dropped() {
        let mut host = Host {
            exec: vec![
                "/usr/bin".into(),
                "/usr".into(),
                "/root/.cargo/bin".into(),
                "/root/.cargo".into(),
                "/usr".into(),
            ],
            read: vec!["/etc".into(), "/usr/share".into(), "/etc/ssl".into()],
            devices: vec![],
        };
        prune(&mut host);
        assert_eq!(host.exec, vec![PathBuf::from("/root/.cargo"), "/usr".into()]);
        assert_eq!(host.read, vec![PathBuf::from("/etc")]);
    }

    #[test]
    fn the_lean_helper_is_used_when_it_lies_beside_the_kernel() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let exe = dir.path().join("teneral");
        std::fs::write(&exe, "").expect("the kernel's stand-in is written");
        assert_eq!(helper_program(&exe), exe, "alone, the kernel is its own helper");
        let lean = dir.path().join("teneral-confine");
        std::fs::create_dir(&lean).expect("a directory by the helper's name");
        assert_eq!(helper_program(&exe), exe, "a directory is not a program");
        std::fs::remove_dir(&lean).expect("it is removed");
        std::fs::write(&lean, "").expect("the helper's stand-in is written");
        assert_eq!(helper_program(&exe), lean);
        assert_eq!(helper_program(&lean), lean, "the helper named itself stays itself");
    }
}
