//! `teneralctl replay`: two generations side by side on the same stimuli.
//!
//! The work needs the kernel (builds in the cage, the stand-in model, the
//! event channel), which this program does not link: it runs the trusted
//! `teneral replay` in its place, found beside this program or else on
//! `PATH`, with the same arguments, and takes its exit status.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "cannot find the kernel program `teneral` beside teneralctl or on PATH; install it \
         (scripts/install) or put it on PATH"
    )]
    NoKernel,
    #[error("cannot run {}: {source}", path.display())]
    Exec { path: PathBuf, source: std::io::Error },
}

/// What the owner asked for.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub home: PathBuf,
    pub from: String,
    pub to: String,
    pub last: usize,
    pub json: bool,
}

/// The `teneral` program: beside `this` (teneralctl's own path), else the
/// first on `path` (the value of `PATH`).
pub fn kernel_program(this: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let beside = this.and_then(Path::parent).map(|dir| dir.join("teneral"));
    let on_path = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("teneral"));
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

/// The arguments `teneral` is given.
pub fn arguments(options: &ReplayOptions) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["replay".into(), "--dir".into()];
    args.push(options.home.clone().into_os_string());
    for (name, value) in [("--from", &options.from), ("--to", &options.to)] {
        args.push(name.into());
        args.push(value.into());
    }
    args.push("--last".into());
    args.push(options.last.to_string().into());
    if options.json {
        args.push("--json".into());
    }
    args
}

/// Becomes `teneral replay`; returns only when that cannot be done.
pub fn run(options: &ReplayOptions) -> ReplayError {
    become_kernel(arguments(options))
}

/// Becomes the kernel's program with `args`; returns only when that cannot
/// be done.
pub fn become_kernel(args: Vec<OsString>) -> ReplayError {
    let this = std::env::current_exe().ok();
    let path = std::env::var_os("PATH");
    let Some(program) = kernel_program(this.as_deref(), path.as_deref()) else {
        return ReplayError::NoKernel;
    };
    let source = std::process::Command::new(&program).args(args).exec();
    ReplayError::Exec { path: program, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_is_found_beside_first_then_on_path() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let (beside, on_path) = (dir.path().join("bin"), dir.path().join("path"));
        for d in [&beside, &on_path] {
            std::fs::create_dir_all(d).expect("a dir");
        }
        let this = beside.join("teneralctl");
        let path = std::env::join_paths([on_path.clone()]).expect("a PATH");
        assert_eq!(kernel_program(Some(&this), Some(&path)), None, "none anywhere");
        std::fs::write(on_path.join("teneral"), "").expect("a kernel on PATH");
        assert_eq!(kernel_program(Some(&this), Some(&path)), Some(on_path.join("teneral")));
        std::fs::write(beside.join("teneral"), "").expect("a kernel beside");
        assert_eq!(kernel_program(Some(&this), Some(&path)), Some(beside.join("teneral")));
    }

    #[test]
    fn the_arguments_passed_on() {
        let options = ReplayOptions {
            home: "/some/home".into(),
            from: "1".into(),
            to: "abc1234".into(),
            last: 3,
            json: true,
        };
        let args: Vec<String> =
            arguments(&options).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "replay",
                "--dir",
                "/some/home",
                "--from",
                "1",
                "--to",
                "abc1234",
                "--last",
                "3",
                "--json"
            ]
        );
    }
}
