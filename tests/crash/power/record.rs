//! The power-cut check's record: the kernel run under `strace`, every
//! file-system call of its own threads written down with its arguments
//! (`-xx`: every string in hexadecimal, so the bytes written come back
//! exactly; `-y`: each descriptor with its path), and the record read back
//! as the model's operations on the individual's directory.
//!
//! `-b execve` lets go of every child at its exec (the body, cargo, git,
//! the keeper), as the system-call mode does: what the check models is what
//! the kernel itself writes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use teneral::launcher::contract;

use super::states::Op;
use crate::common::*;

/// The calls recorded.
const CALLS: &str =
    "open,openat,openat2,creat,write,pwrite64,writev,pwritev,pwritev2,ftruncate,truncate,\
    rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,link,linkat,symlink,symlinkat,\
    fsync,fdatasync,sync,syncfs,close";

/// Starts the kernel on `ind` under `strace`, recording to `file`, as the
/// launcher starts it (`teneral kernel` with the launcher's contract
/// variables); the child (strace) and the kernel's pid.
pub fn start(ind: &Individual, file: &Path) -> Result<(Kernel, u32), Box<dyn std::error::Error>> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ind.path().join("kernel.log"))?;
    let child = Command::new("strace")
        .args(["-f", "-b", "execve", "-qq", "-y", "-xx", "-s", "16777216", "-o"])
        .arg(file)
        .arg("-e")
        .arg(format!("trace={CALLS}"))
        .arg("--")
        .arg(teneral())
        .arg("kernel")
        .arg("--dir")
        .arg(ind.path())
        .current_dir(ind.path())
        .env(contract::VERSION_VARIABLE, contract::LAUNCHER_VERSION.to_string())
        .env(contract::KERNEL_VARIABLE, "install")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    crate::crash::strace::traced_kernel(child, ind)
}

/// Decodes strace's `-xx` text: `\xNN` escapes, anything else as it is.
fn unhex(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 4);
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            let digits = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(digits, 16) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Splits a call's arguments at the commas outside strings, brackets and
/// braces.
fn arguments(args: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    for (i, c) in args.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '[' | '{' | '<' | '(' if !quoted => depth += 1,
            ']' | '}' | '>' | ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !args[start..].trim().is_empty() {
        out.push(args[start..].trim());
    }
    out
}

/// A string argument's bytes (`"…"`), None when strace cut it (`"…"...`).
fn string(arg: &str) -> Option<Vec<u8>> {
    let inner = arg.strip_prefix('"')?;
    let inner = inner.strip_suffix('"')?;
    Some(unhex(inner))
}

/// The path a descriptor names (`3<\x2f…>`), if any.
fn fd_path(arg: &str) -> Option<(i64, String)> {
    let (fd, rest) = arg.split_once('<')?;
    let path = rest.strip_suffix('>')?;
    let fd = if fd == "AT_FDCWD" { -100 } else { fd.parse().ok()? };
    Some((fd, String::from_utf8_lossy(&unhex(path)).into_owned()))
}

/// One completed call: name, arguments, result text.
struct Call<'a> {
    name: &'a str,
    args: Vec<&'a str>,
    result: &'a str,
}

/// Joins strace's `<unfinished ...>` and `<... resumed>` halves; the
/// completed calls in the order they returned, each with its thread.
fn calls(record: &str) -> Vec<(String, String)> {
    let mut open: BTreeMap<String, String> = BTreeMap::new();
    let mut done = Vec::new();
    for line in record.lines() {
        let Some((tid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        if rest.starts_with("---") || rest.starts_with("+++") {
            continue;
        }
        if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            open.insert(tid.to_owned(), head.to_owned());
        } else if let Some(tail) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = tail.split_once(" resumed>") else { continue };
            if let Some(head) = open.remove(tid) {
                done.push((tid.to_owned(), format!("{head}{tail}")));
            }
        } else {
            done.push((tid.to_owned(), rest.to_owned()));
        }
    }
    done
}

/// A completed call's text: `name(args) = result`, strace padding the
/// space before `=` to line results up.
fn parse(text: &str) -> Option<Call<'_>> {
    let (name, rest) = text.split_once('(')?;
    let eq = rest.rfind(" = ")?;
    let args = rest[..eq].trim_end().strip_suffix(')')?;
    Some(Call { name, args: arguments(args), result: rest[eq + 3..].trim() })
}

/// What the record says the kernel did to the files below `home`, as the
/// model's operations (paths relative to `home`), and the calls on those
/// files the model does not know (call and path), which the check reports.
pub fn operations(record: &str, home: &Path) -> (Vec<Op>, Vec<(String, String)>) {
    let home = home.to_string_lossy().into_owned();
    let rel = |p: &str| -> Option<String> {
        if p == home {
            return Some(String::new());
        }
        p.strip_prefix(&home)?.strip_prefix('/').map(str::to_owned)
    };
    // A path argument resolved against its directory descriptor.
    let at = |dir: Option<&str>, arg: &str| -> Option<String> {
        let path = String::from_utf8_lossy(&string(arg)?).into_owned();
        if path.starts_with('/') {
            return rel(&path);
        }
        let (_, base) = fd_path(dir.unwrap_or("AT_FDCWD<>"))?;
        let base = if base.is_empty() { home.clone() } else { base };
        rel(&format!("{base}/{path}"))
    };
    let mut ops = Vec::new();
    let mut unknown = Vec::new();
    // Each descriptor's position and whether it appends.
    let mut fds: BTreeMap<i64, (u64, bool)> = BTreeMap::new();
    for (_, text) in calls(record) {
        let Some(call) = parse(&text) else { continue };
        if call.result.starts_with('-') || call.result.starts_with('?') {
            continue;
        }
        let a = &call.args;
        let described = a.first().and_then(|f| fd_path(f));
        let on = described.as_ref().and_then(|(_, p)| rel(p));
        match call.name {
            "open" | "openat" | "openat2" | "creat" => {
                let Some((fd, path)) = fd_path(call.result) else { continue };
                let flags = match call.name {
                    "openat" | "openat2" => a.get(2).copied().unwrap_or(""),
                    "creat" => "O_CREAT|O_TRUNC",
                    _ => a.get(1).copied().unwrap_or(""),
                };
                let Some(path) = rel(&path) else { continue };
                let append = flags.contains("O_APPEND");
                fds.insert(fd, (0, append));
                ops.push(Op::Open {
                    path,
                    create: flags.contains("O_CREAT"),
                    truncate: flags.contains("O_TRUNC"),
                });
            }
            "write" | "pwrite64" => {
                let (Some((fd, _)), Some(path)) = (described, on) else { continue };
                let n: u64 = call.result.parse().unwrap_or(0);
                let Some(mut data) = a.get(1).and_then(|s| string(s)) else {
                    unknown.push((format!("{} cut short", call.name), path));
                    continue;
                };
                data.truncate(n as usize);
                let entry = fds.entry(fd).or_insert((0, false));
                let offset = if call.name == "pwrite64" {
                    a.get(3).and_then(|o| o.parse().ok())
                } else if entry.1 {
                    None
                } else {
                    let at = entry.0;
                    entry.0 += n;
                    Some(at)
                };
                ops.push(Op::Write { path, offset, data });
            }
            "ftruncate" => {
                let Some(path) = on else { continue };
                let len = a.get(1).and_then(|l| l.parse().ok()).unwrap_or(0);
                ops.push(Op::Truncate { path, len });
            }
            "fsync" | "fdatasync" => {
                let Some(path) = on else { continue };
                ops.push(Op::Sync { path });
            }
            "sync" | "syncfs" => ops.push(Op::SyncAll),
            "rename" => {
                if let (Some(from), Some(to)) = (at(None, a[0]), a.get(1).and_then(|t| at(None, t)))
                {
                    ops.push(Op::Rename { from, to });
                }
            }
            "renameat" | "renameat2" if a.len() >= 4 => {
                if let (Some(from), Some(to)) = (at(Some(a[0]), a[1]), at(Some(a[2]), a[3])) {
                    ops.push(Op::Rename { from, to });
                }
            }
            "unlink" | "rmdir" => {
                if let Some(path) = at(None, a[0]) {
                    ops.push(Op::Remove { path });
                }
            }
            "unlinkat" if a.len() >= 2 => {
                if let Some(path) = at(Some(a[0]), a[1]) {
                    ops.push(Op::Remove { path });
                }
            }
            "link" if a.len() >= 2 => {
                if let (Some(from), Some(to)) = (at(None, a[0]), at(None, a[1])) {
                    ops.push(Op::Link { from, to });
                }
            }
            "linkat" if a.len() >= 4 => {
                if let (Some(from), Some(to)) = (at(Some(a[0]), a[1]), at(Some(a[2]), a[3])) {
                    ops.push(Op::Link { from, to });
                }
            }
            "mkdir" => {
                if let Some(path) = at(None, a[0]) {
                    ops.push(Op::Mkdir { path });
                }
            }
            "mkdirat" if a.len() >= 2 => {
                if let Some(path) = at(Some(a[0]), a[1]) {
                    ops.push(Op::Mkdir { path });
                }
            }
            "close" => {
                if let Some((fd, _)) = described {
                    fds.remove(&fd);
                }
            }
            other => {
                // The first path below `home` the call names, as the model's.
                let named = on.or_else(|| {
                    a.iter().find_map(|x| {
                        let bytes =
                            string(x).or_else(|| fd_path(x).map(|(_, p)| p.into_bytes()))?;
                        rel(&String::from_utf8_lossy(&bytes))
                    })
                });
                if let Some(path) = named {
                    unknown.push((other.to_owned(), path));
                }
            }
        }
    }
    (ops, unknown)
}

/// `text` as strace's `-xx` prints it.
fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("\\x{b:02x}")).collect()
}

#[test]
fn a_record_reads_back_as_operations() {
    let home = "/h";
    let p = |s: &str| hex(s);
    let record = [
        format!(
            "7 openat(AT_FDCWD<{}>, \"{}\", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0666) = 3<{}>",
            p("/h"),
            p("/h/.s.tmp-7"),
            p("/h/.s.tmp-7")
        ),
        format!("7 write(3<{}>, \"{}\", 2 <unfinished ...>", p("/h/.s.tmp-7"), p("{}")),
        "8 close(4<\\x2f\\x78>) = 0".to_owned(),
        "7 <... write resumed>) = 2".to_owned(),
        format!("7 fsync(3<{}> <unfinished ...>", p("/h/.s.tmp-7")),
        "7 <... fsync resumed>)              = 0".to_owned(),
        format!("7 rename(\"{}\", \"{}\") = 0", p("/h/.s.tmp-7"), p("/h/s")),
        format!(
            "7 openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_CLOEXEC) = 5<{}>",
            p("/h"),
            p("/h"),
            p("/h")
        ),
        format!("7 fsync(5<{}>) = 0", p("/h")),
        format!(
            "7 openat(AT_FDCWD<{}>, \"{}\", O_WRONLY|O_APPEND|O_CLOEXEC) = 6<{}>",
            p("/h"),
            p("j"),
            p("/h/j")
        ),
        format!("7 write(6<{}>, \"{}\", 3) = 3", p("/h/j"), p("ab\n")),
        format!(
            "7 unlinkat(AT_FDCWD<{}>, \"{}\", 0) = -1 ENOENT (No such file or directory)",
            p("/h"),
            p("gone")
        ),
        format!("7 write(9<{}>, \"{}\", 1) = 1", p("/elsewhere"), p("x")),
        format!("7 link(\"{}\", \"{}\") = 0", p("/h/s"), p("/h/t")),
        format!("7 symlink(\"{}\", \"{}\") = 0", p("x"), p("/h/l")),
    ]
    .join("\n");
    let (ops, unknown) = operations(&record, Path::new(home));
    let want = vec![
        Op::Open { path: ".s.tmp-7".into(), create: true, truncate: false },
        Op::Write { path: ".s.tmp-7".into(), offset: Some(0), data: b"{}".to_vec() },
        Op::Sync { path: ".s.tmp-7".into() },
        Op::Rename { from: ".s.tmp-7".into(), to: "s".into() },
        Op::Open { path: "".into(), create: false, truncate: false },
        Op::Sync { path: "".into() },
        Op::Open { path: "j".into(), create: false, truncate: false },
        Op::Write { path: "j".into(), offset: None, data: b"ab\n".to_vec() },
        Op::Link { from: "s".into(), to: "t".into() },
    ];
    assert_eq!(ops, want);
    assert_eq!(unknown, vec![("symlink".to_owned(), "l".to_owned())]);
}
