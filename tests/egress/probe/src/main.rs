//! A probe body for the egress tests (tests/egress.rs): it runs each line
//! of `body/probes.txt` (`name<TAB>command`) from inside a real caged
//! generation and reports what it got as a `note` of kind `probe`, then
//! replies "every probe tried". `connect ADDR` is a direct TCP connection
//! made here (its errno reported); any other command runs under `sh -c`.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn main() {
    let home = PathBuf::from(std::env::var("TENERAL_HOME").unwrap_or_default());
    let events = std::env::var("TENERAL_EVENTS").unwrap_or_default();
    let Ok(stream) = UnixStream::connect(&events) else { std::process::exit(9) };
    let Ok(read) = stream.try_clone() else { std::process::exit(9) };
    let mut reader = BufReader::new(read);
    let mut writer = stream;
    let mut send = |line: String| {
        let _ = writer.write_all(format!("{line}\n").as_bytes());
        let mut ack = String::new();
        let _ = reader.read_line(&mut ack);
    };
    send(r#"{"type":"generation.ready"}"#.into());
    let probes = std::fs::read_to_string(home.join("body/probes.txt")).unwrap_or_default();
    for line in probes.lines().filter(|l| !l.trim().is_empty()) {
        let (name, command) = line.split_once('\t').unwrap_or((line, ""));
        let (ok, errno, detail) = match command.strip_prefix("connect ") {
            Some(addr) => connect(addr),
            None => shell(command),
        };
        send(format!(
            r#"{{"type":"note","kind":"probe","data":{{"probe":{},"ok":{ok},"errno":{errno},"detail":{}}}}}"#,
            quote(name),
            quote(&detail)
        ));
    }
    send(r#"{"type":"reply","text":"every probe tried"}"#.into());
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

fn connect(addr: &str) -> (bool, String, String) {
    let tried = addr
        .parse::<SocketAddr>()
        .map_err(io::Error::other)
        .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(5)));
    match tried {
        Ok(_) => (true, "null".into(), "connected".into()),
        Err(e) => (false, e.raw_os_error().map_or("null".into(), |n| n.to_string()), e.to_string()),
    }
}

fn shell(command: &str) -> (bool, String, String) {
    match Command::new("/bin/sh").args(["-c", command]).output() {
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), "null".into(), text)
        }
        Err(e) => (false, e.raw_os_error().map_or("null".into(), |n| n.to_string()), e.to_string()),
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
