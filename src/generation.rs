//! One generation as the kernel handles it: its body built once per commit,
//! and started with exactly the contract's environment (docs/contract.md),
//! in the cage's `generation` profile, through the kernel's [`Runner`] (its
//! own unit under systemd).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::runner::{self, Launch, Limits, Profile, RunError, Runner, Running};
use crate::settings::{Protocol, Provider, Settings};
use crate::spawn::{self, Spec};
use crate::{confine, egress};
use teneral_core::commit::{short, Commit};
use teneral_core::log;

/// Where built bodies are kept, one directory per commit.
pub const BIN_DIR: &str = ".teneral/bin";
/// The cargo target directory shared by every generation's build.
pub const TARGET_DIR: &str = ".teneral/target";

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot start cargo to build the body of {commit}: {source}; is cargo on PATH?")]
    Spawn { commit: Commit, source: std::io::Error },
    #[error("cannot start cargo to build the body: {0}; is cargo on PATH?")]
    Run(#[from] RunError),
    #[error("the body of {commit} does not build ({exit}):\n{tail}")]
    Failed { commit: Commit, exit: spawn::Exit, tail: String },
    #[error("cannot scrub the build target {path} of what the build scripts left: {source}")]
    Scrub { path: PathBuf, source: std::io::Error },
    #[error("cannot keep the built body at {path}: {source}")]
    Keep { path: PathBuf, source: std::io::Error },
}

/// The environment every toolchain command needs, from the kernel's own.
pub fn toolchain_env() -> Vec<(String, OsString)> {
    ["PATH", "HOME", "LANG", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| ((*k).to_owned(), v)))
        .collect()
}

/// The body binary of `commit`, built from `checkout` if not yet kept.
///
/// The body's build scripts are the agent's code: the build runs in the
/// cage's `gate` profile (the checkout and the target directory, nothing
/// else of the individual, loopback only, `--offline`), after a `cargo
/// fetch` outside it, which runs none of the body's code, has fetched and
/// unpacked what the lockfile names. Both go through `runner` with the
/// limits of a check.
pub async fn build(
    runner: &Runner,
    home: &Path,
    checkout: &Path,
    commit: &Commit,
    limits: &Limits,
) -> Result<PathBuf, BuildError> {
    let kept = home.join(BIN_DIR).join(commit).join("teneral-body");
    if kept.is_file() {
        return Ok(kept);
    }
    let target = home.join(TARGET_DIR);
    let _build_lock = lock_target(&target)
        .await
        .map_err(|source| BuildError::Keep { path: target.clone(), source })?;
    if kept.is_file() {
        return Ok(kept);
    }
    log::info(format!("building the body of {}", short(commit)));
    let body = checkout.join("body");
    touch_tree(&body).map_err(|source| BuildError::Keep { path: body.clone(), source })?;
    let spawn_error = |source| BuildError::Spawn { commit: commit.clone(), source };
    // Linkers write temporary files; /tmp may not be theirs (in the cage,
    // or when the kernel itself runs in one).
    let tmp = target.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(spawn_error)?;
    let mut env = toolchain_env();
    env.push(("CARGO_TARGET_DIR".into(), target.clone().into()));
    env.push(("TMPDIR".into(), tmp.into()));
    let cargo = |args: &[&str]| {
        let mut spec = Spec::new("cargo", &body);
        spec.args = args.iter().map(OsString::from).collect();
        spec.env = env.clone();
        spec
    };
    let place = teneral_core::commit::short(&target_id(&target)).to_owned();
    let unit = |step| runner::systemd::build_unit(commit, step, &place);
    let mut build = Launch::new(cargo(&["build", "--release", "--locked"]), *limits);
    if runner.caged() {
        let fetch = Launch::new(cargo(&["fetch", "--locked"]), *limits);
        // A failed fetch shows as the build's own failure to find a crate.
        runner.run(&unit("fetch"), fetch).await?;
        if let Err(e) = confine::sources::readable_by_checks() {
            log::warn(format!("cannot open the fetched crate sources to the cage: {e}"));
        }
        build.spec.args.push("--offline".into());
        build = build
            .caged(Profile::Gate { checkout: checkout.to_owned(), writable: vec![target.clone()] });
    }
    let (ended, run) = runner.run(&unit("build"), build).await?;
    // What the body's build scripts left in the target loses what would
    // mean privilege outside the cage, whether the build passed or not.
    crate::scrub::scrub(&target)
        .map_err(|source| BuildError::Scrub { path: target.clone(), source })?;
    if !ended.exit.success() {
        return Err(BuildError::Failed {
            commit: commit.clone(),
            exit: ended.exit,
            tail: run.stderr_tail(),
        });
    }
    let keep = |source| BuildError::Keep { path: kept.clone(), source };
    if let Some(dir) = kept.parent() {
        std::fs::create_dir_all(dir).map_err(keep)?;
    }
    let tmp = kept.with_extension("tmp");
    copy_built(&target, &tmp).map_err(keep)?;
    std::fs::rename(&tmp, &kept).map_err(keep)?;
    Ok(kept)
}

/// Copies the built body out of the target directory, which the body's
/// build scripts could write: opened beneath it, following no link, a
/// regular file only, and kept executable by its owner alone.
pub(crate) fn copy_built(target: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut built = teneral_core::fsutil::open_beneath(target, Path::new("release/teneral-body"))?;
    let mut out =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o755).open(to)?;
    std::io::copy(&mut built, &mut out)?;
    out.sync_all()
}

/// Hex digits naming a target directory (a hash of its path).
fn target_id(target: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(target.as_os_str().as_encoded_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// Marks every file under `dir` as changed now.
///
/// Cargo names a path package's build by its place relative to its own
/// workspace, so the bodies of two individuals sharing a target directory
/// share one fingerprint, and cargo decides freshness by modification times.
/// A body whose files are older than another's last build would be taken as
/// built. Touching the checkout first makes cargo compare it as new.
pub fn touch_tree(dir: &Path) -> std::io::Result<()> {
    let now = std::time::SystemTime::now();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() && entry.file_name() != ".git" {
            touch_tree(&entry.path())?;
        } else if kind.is_file() {
            std::fs::File::options().write(true).open(entry.path())?.set_modified(now)?;
        }
    }
    Ok(())
}

/// Holds the target directory for one build and the copy of its result, so
/// that kernels sharing a cache never copy each other's binary. Contention
/// is rare (one cache, several individuals), so waiting is a short sleep.
pub(crate) async fn lock_target(target: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{flock, FlockOperation};
    std::fs::create_dir_all(target)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(target.join(".teneral-build.lock"))?;
    while flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(file)
}

/// What a body is started with, besides its binary.
pub struct Start<'a> {
    pub home: &'a Path,
    pub commit: &'a Commit,
    pub events: &'a Path,
    pub model_url: &'a str,
    pub body_key: &'a str,
    pub settings: &'a Settings,
    pub clock: bool,
    /// The organ set of the commit's pins (`TENERAL_ORGANS`), when it pins any.
    pub organs: Option<&'a Path>,
}

/// The body's whole environment: the contract's variables and nothing else.
pub fn environment(s: &Start<'_>) -> Vec<(String, OsString)> {
    let provider = match s.settings.provider {
        Provider::Standin => "standin",
        Provider::Compatible => "compatible",
        Provider::OpenAi => "openai",
        Provider::ChatGpt => "chatgpt",
    };
    let protocol = match s.settings.protocol {
        Protocol::Chat => "chat",
        Protocol::Responses => "responses",
    };
    let mut env: Vec<(String, OsString)> = vec![
        ("TENERAL_CONTRACT".into(), "1".into()),
        ("TENERAL_HOME".into(), s.home.into()),
        ("TENERAL_COMMIT".into(), s.commit.as_str().into()),
        ("TENERAL_EVENTS".into(), s.events.into()),
        ("TENERAL_PROVIDER".into(), provider.into()),
        ("TENERAL_PROTOCOL".into(), protocol.into()),
        ("TENERAL_MODEL_URL".into(), s.model_url.into()),
        ("TENERAL_MODEL".into(), s.settings.model.clone().into()),
        ("TENERAL_API_KEY".into(), s.body_key.into()),
        ("TENERAL_HEARTBEAT_MINUTES".into(), s.settings.heartbeat_minutes.to_string().into()),
        ("TENERAL_CONTEXT_CHARS".into(), s.settings.context_chars.to_string().into()),
        ("TENERAL_CLOCK".into(), if s.clock { "on" } else { "off" }.into()),
    ];
    if let Some(effort) = &s.settings.reasoning_effort {
        env.push(("TENERAL_REASONING_EFFORT".into(), effort.into()));
    }
    if let Some(organs) = s.organs {
        env.push(("TENERAL_ORGANS".into(), organs.into()));
    }
    env.push(("TMPDIR".into(), s.home.join(confine::host::TMP_DIR).into()));
    // The toolchain's homes too: the cage grants the crates and toolchains
    // of the kernel's CARGO_HOME and RUSTUP_HOME, which a cargo started by
    // the body must then look in (a container sets both apart from HOME).
    env.extend(toolchain_env());
    env
}

/// Starts the body binary with the contract's environment, in the
/// individual's directory, in the cage's `generation` profile, through
/// `runner` as unit `teneral-gen-<short>.service` with `limits`; its output
/// goes to the kernel's log.
///
/// The body's network namespace has only loopback: the model's port and the
/// kernel's egress proxy ([`crate::egress`], started at the first
/// generation) are forwarded in, and the proxy's variables are added to the
/// environment. With the cage off there is no namespace and no proxy (the
/// cage says so in the log).
pub async fn start(
    runner: &Runner,
    binary: &Path,
    start: &Start<'_>,
    limits: &Limits,
) -> Result<Running, RunError> {
    let unit = runner::systemd::generation_unit(start.commit);
    let spawn_error = |source| RunError::Spawn { unit: unit.clone(), source };
    let mut spec = Spec::new(binary, start.home);
    spec.env = environment(start);
    let mut forward = vec![loopback_port(start.model_url).map_err(spawn_error)?];
    if runner.caged() {
        let config = egress::Config {
            policy: start.settings.egress.clone(),
            stand_ins: start.settings.test.egress_resolve.clone(),
        };
        let proxy = egress::shared(&config)
            .map_err(|e| spawn_error(std::io::Error::other(format!("the egress proxy: {e}"))))?;
        forward.push(proxy.port());
        spec.env.extend(egress::environment(proxy.port()));
    }
    let profile = Profile::Generation { home: start.home.to_owned(), forward };
    runner.start(&unit, Launch::new(spec, *limits).caged(profile)).await
}

/// The port of `http://127.0.0.1:<port>/...`, the kernel's model URL.
fn loopback_port(url: &str) -> std::io::Result<u16> {
    url.strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| {
            std::io::Error::other(format!(
                "the model URL {url} is not on the kernel's loopback, so it cannot be forwarded into the body's network"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organs_are_in_the_environment_only_when_pinned() {
        let settings = Settings::parse("TENERAL_PROVIDER=standin\n")
            .expect("a standin provider alone is valid");
        let set = Path::new("/home/x/.teneral/organs/sets/0123456789abcdef");
        let commit = Commit::parse("0123456789012345678901234567890123456789").expect("a full id");
        let mut start = Start {
            home: Path::new("/home/x"),
            commit: &commit,
            events: Path::new("/home/x/.teneral/run/e.sock"),
            model_url: "http://127.0.0.1:1/v1",
            body_key: "k",
            settings: &settings,
            clock: true,
            organs: Some(set),
        };
        let organs = |env: Vec<(String, OsString)>| {
            env.into_iter()
                .filter(|(k, _)| k == "TENERAL_ORGANS")
                .map(|(_, v)| v)
                .collect::<Vec<_>>()
        };
        assert_eq!(organs(environment(&start)), vec![OsString::from(set)]);
        start.organs = None;
        assert_eq!(organs(environment(&start)), Vec::<OsString>::new());
    }

    #[test]
    fn only_a_loopback_model_url_is_forwarded() {
        assert_eq!(loopback_port("http://127.0.0.1:4321/v1").ok(), Some(4321));
        assert_eq!(loopback_port("http://127.0.0.1:4321").ok(), Some(4321));
        for bad in ["http://10.0.0.1:4321/v1", "https://127.0.0.1:1/v1", "http://127.0.0.1:x/v1"] {
            assert!(loopback_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_proxy_variables_name_the_forwarded_port_and_spare_loopback() {
        let env: std::collections::HashMap<String, OsString> =
            egress::environment(5555).into_iter().collect();
        for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
            assert_eq!(env.get(name), Some(&OsString::from("http://127.0.0.1:5555")), "{name}");
        }
        assert_eq!(env.get("NO_PROXY"), Some(&OsString::from("127.0.0.1,localhost,::1")));
        assert_eq!(env.get("no_proxy"), env.get("NO_PROXY"));
    }
}
