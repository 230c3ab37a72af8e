//! The mutation gate's checks on an offer, from `teneralctl`: this program
//! does not link the kernel, which alone makes cages and runs the gate, so
//! it runs the trusted `teneral offer-gates --dir D <commit> [--also C]`
//! (found as for `teneralctl replay`: beside this program, else on `PATH`)
//! and reads the one JSON object it prints. What the gate says along the way
//! goes to this program's stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use teneral_core::commit::Commit;

pub use teneral_offer::gates::*;

#[derive(Debug, thiserror::Error)]
pub enum GatesError {
    #[error(
        "cannot find the kernel program `teneral` beside teneralctl or on PATH, which runs the \
         mutation gate's checks: install it (scripts/install), or pass --no-gates to check without them"
    )]
    NoKernel,
    #[error("cannot run {}: {source}", path.display())]
    Spawn { path: PathBuf, source: std::io::Error },
    #[error("{} offer-gates ended ({status}) without its report; what it printed above says why", path.display())]
    NoReport { path: PathBuf, status: std::process::ExitStatus },
}

/// The arguments `teneral` is given for the gates on `commit` of `home`.
pub fn arguments(home: &Path, commit: &Commit, also: Option<&str>) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        vec!["offer-gates".into(), "--dir".into(), home.into(), commit.as_str().into()];
    if let Some(command) = also {
        args.push("--also".into());
        args.push(command.into());
    }
    args
}

/// The gates' results and the extra command's from `teneral offer-gates`'s output.
pub fn parse(stdout: &str) -> Option<(Gates, Option<Also>)> {
    let line = stdout.lines().rev().find(|l| l.starts_with('{'))?;
    let value: Value = serde_json::from_str(line).ok()?;
    let gates = Gates::from_json(&value["gates"])?;
    Some((gates, Also::from_json(&value["also"])))
}

/// Runs the gate's checks (and `also`) on `commit` of the individual at `home`.
pub fn run(
    home: &Path,
    commit: &Commit,
    also: Option<&str>,
) -> Result<(Gates, Option<Also>), GatesError> {
    let this = std::env::current_exe().ok();
    let path = std::env::var_os("PATH");
    let program = crate::replay::kernel_program(this.as_deref(), path.as_deref())
        .ok_or(GatesError::NoKernel)?;
    let spawn = |source| GatesError::Spawn { path: program.clone(), source };
    let out = Command::new(&program)
        .args(arguments(home, commit, also))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(spawn)?;
    parse(&String::from_utf8_lossy(&out.stdout))
        .ok_or(GatesError::NoReport { path: program.clone(), status: out.status })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_report_is_read_and_the_arguments_passed_on() {
        let out = concat!(
            r#"{"commit":"c","gates":{"passed":true,"seconds":3.0,"steps":[{"name":"smoke","result":"passed","seconds":1.5,"output":null}]},"#,
            r#""also":{"command":"make lint","passed":false,"exit":"exit status 2","seconds":0.5,"output":"oops"}}"#,
            "\n"
        );
        let (gates, also) = parse(out).expect("a report");
        assert!(gates.passed());
        assert_eq!(gates.steps[0].name, "smoke");
        let also = also.expect("the command's result");
        assert!(!also.passed && also.exit == "exit status 2" && also.output == "oops");
        assert!(parse("no json\n").is_none());
        let commit = Commit::parse(&"a".repeat(40)).expect("a commit");
        let args = arguments(Path::new("/h"), &commit, Some("make lint"));
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["offer-gates", "--dir", "/h", &"a".repeat(40), "--also", "make lint"]);
    }
}
