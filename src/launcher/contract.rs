//! The launcher's side of its contract with a kernel (docs/contract.md, "The
//! launcher"), version [`LAUNCHER_VERSION`].
//!
//! The launcher starts `<kernel> kernel --dir <home>` with its own
//! environment plus [`VERSION_VARIABLE`] (this launcher's version) and
//! [`KERNEL_VARIABLE`] (which kernel it is: `install`, or the kernel key it
//! was built from). A kernel states the lowest launcher version it needs in
//! the top-level [`LAUNCH_FILE`]. The kernel's exit status means:
//! [`EXIT_NEXT_KERNEL`] (85): it changed the generation to one whose kernel
//! differs, start the next one; [`EXIT_UPDATE_INSTALL`] (78): the owner must
//! update the install, start nothing; anything else ends the launcher with
//! that status (a kernel on trial excepted: [`super::trial`]).

/// This launcher's version of the contract.
pub const LAUNCHER_VERSION: u32 = 1;
/// "I changed the generation to one whose kernel differs: start the next kernel."
pub const EXIT_NEXT_KERNEL: i32 = 85;
/// "The owner must update the install": the launcher starts nothing.
pub const EXIT_UPDATE_INSTALL: i32 = 78;
/// The file, at the top of a kernel's tree, naming the launcher it needs.
pub const LAUNCH_FILE: &str = "launch.json";
/// The launcher's version, as the kernel it started reads it.
pub const VERSION_VARIABLE: &str = "TENERAL_LAUNCHER_VERSION";
/// Which kernel this is: `install` or the kernel key of its tree.
pub const KERNEL_VARIABLE: &str = "TENERAL_KERNEL";
/// The kernel's own launch file, compiled in.
const OWN_LAUNCH: &str = include_str!("../../launch.json");

/// Why a launch file does not say what it needs.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{LAUNCH_FILE} does not name the launcher version it needs ({0}); it holds {{\"launcher\": <version>}}")]
pub struct LaunchFileError(String);

/// The launcher version a launch file asks for. A tree without the file is a
/// kernel from before the launcher: it needs none (version 0).
pub fn needs(text: Option<&[u8]>) -> Result<u32, LaunchFileError> {
    let Some(text) = text else { return Ok(0) };
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| LaunchFileError(e.to_string()))?;
    let version = value
        .get("launcher")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| LaunchFileError("no whole number under \"launcher\"".into()))?;
    u32::try_from(version).map_err(|e| LaunchFileError(e.to_string()))
}

/// What this kernel needs of its launcher.
pub fn own_needs() -> Result<u32, LaunchFileError> {
    needs(Some(OWN_LAUNCH.as_bytes()))
}

/// The version of the launcher that started this process: the variable it
/// set, else this binary's own launcher (a kernel started by hand).
pub fn launcher_here() -> u32 {
    std::env::var(VERSION_VARIABLE)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(LAUNCHER_VERSION)
}

/// The words of the refusal, and of the launcher that stops, when a kernel
/// needs a newer launcher than the install has.
pub fn update_the_install(what: &str, needed: u32, have: u32) -> String {
    format!(
        "{what} needs launcher version {needed}, and the install's launcher (`teneral run`) is \
         version {have}: the owner must update the install (git pull in the owner's checkout, \
         build and install teneral again, then restart the unit)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_files_read() {
        let table: &[(Option<&str>, Result<u32, ()>)] = &[
            (None, Ok(0)),
            (Some(r#"{"launcher": 1}"#), Ok(1)),
            (Some(r#"{"about": "x", "launcher": 2}"#), Ok(2)),
            (Some(r#"{"launcher": "2"}"#), Err(())),
            (Some(r#"{"launcher": -1}"#), Err(())),
            (Some(r#"{}"#), Err(())),
            (Some("launcher = 1"), Err(())),
        ];
        for (text, want) in table {
            let got = needs(text.map(str::as_bytes)).map_err(|_| ());
            assert_eq!(&got, want, "{text:?}");
        }
    }

    #[test]
    fn this_kernel_needs_the_first_launcher() {
        assert_eq!(own_needs(), Ok(1));
        assert!(own_needs().is_ok_and(|n| n <= LAUNCHER_VERSION));
    }
}
