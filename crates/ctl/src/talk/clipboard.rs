//! Ctrl+V: an image from the clipboard, through the tool the desktop has
//! (`wl-paste` on Wayland, `xclip` on X11, `pngpaste` on macOS).
//!
//! Invariants: which tools to try is a pure decision over the environment
//! ([`tools`]); a tool gets [`LIMIT`] to answer and is then killed, so a
//! clipboard owner that never answers cannot hang the client; every failure
//! is one sentence saying what to do instead.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a clipboard tool may take.
pub const LIMIT: Duration = Duration::from_secs(3);

/// A clipboard tool and its arguments for a PNG on standard output.
pub type Tool = (&'static str, &'static [&'static str]);

const WL_PASTE: Tool = ("wl-paste", &["--no-newline", "--type", "image/png"]);
const XCLIP: Tool = ("xclip", &["-selection", "clipboard", "-target", "image/png", "-out"]);
const PNGPASTE: Tool = ("pngpaste", &["-"]);

/// The tools worth trying, in order, for a session with a Wayland display,
/// an X display, on macOS. Empty: there is no display to ask.
pub fn tools(wayland: bool, x11: bool, macos: bool) -> Vec<Tool> {
    let mut tools = Vec::new();
    if macos {
        tools.push(PNGPASTE);
    }
    if wayland {
        tools.push(WL_PASTE);
    }
    if x11 {
        tools.push(XCLIP);
    }
    tools
}

/// The clipboard's image, or what to do instead.
pub fn paste() -> Result<Vec<u8>, String> {
    let set = |name| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let tools = tools(set("WAYLAND_DISPLAY"), set("DISPLAY"), cfg!(target_os = "macos"));
    if tools.is_empty() {
        return Err("Ctrl+V: no display here; paste the image's path or use /image <path> \
                    (neither WAYLAND_DISPLAY nor DISPLAY is set)"
            .to_owned());
    }
    let mut said = Vec::new();
    for (name, args) in &tools {
        match run(name, args) {
            Ok(bytes) if !bytes.is_empty() => return Ok(bytes),
            Ok(_) => said.push(format!("{name}: no image there")),
            Err(why) => said.push(format!("{name}: {why}")),
        }
    }
    Err(format!(
        "Ctrl+V: no image in the clipboard; copy one or use /image <path> ({})",
        said.join("; ")
    ))
}

/// Runs one tool for at most [`LIMIT`]; its standard output.
fn run(name: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let mut child = Command::new(name)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "not installed".to_owned(),
            _ => e.to_string(),
        })?;
    let mut out = child.stdout.take().ok_or("no output")?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = out.by_ref().take(super::image::MAX_BYTES + 1).read_to_end(&mut bytes);
        bytes
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(status)) => return Err(format!("it ended with {status}")),
            Ok(None) if start.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s", LIMIT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    reader.join().map_err(|_| "its output could not be read".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_tools_are_tried() {
        let names = |t: Vec<Tool>| t.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(tools(false, false, false)), Vec::<&str>::new());
        assert_eq!(names(tools(true, false, false)), ["wl-paste"]);
        assert_eq!(names(tools(false, true, false)), ["xclip"]);
        assert_eq!(names(tools(true, true, false)), ["wl-paste", "xclip"]);
        assert_eq!(names(tools(false, false, true)), ["pngpaste"]);
    }

    #[test]
    fn a_tool_that_is_not_there_says_so() {
        assert_eq!(run("teneral-no-such-tool", &[]), Err("not installed".to_owned()));
        assert_eq!(run("true", &[]), Ok(Vec::new()));
        assert_eq!(run("printf", &["abc"]), Ok(b"abc".to_vec()));
        assert!(run("false", &[]).is_err_and(|e| e.contains("ended with")));
    }
}
