//! A hostile body for the cage's tests (tests/cage.rs): it tries every door
//! the design closes, and reports what each attempt got, as `note` events
//! of kind `door` when it runs as a generation, or as JSON lines on stdout
//! when it runs as a gate check (`teneral-body gate <home> <pid>`).
//!
//! With `soul/harmless` present it only reads `.env` and its own status (for
//! a run without the cage, where every door would open).
//!
//! Each report is `{"door", "ok", "errno", "detail"}`: `errno` is the
//! operating system's error number when the attempt failed with one.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod tools;

use tools::{ask_model, cargo, loopback, search_secrets};

type Try = io::Result<String>;

include!(concat!(env!("OUT_DIR"), "/build_doors.rs"));

const SECRET_PREFIX: &str = "sk-cagetest-";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("gate") {
        let home = PathBuf::from(&args[2]);
        let pid: i32 = args[3].parse().unwrap_or(0);
        for (door, result) in gate_doors(&home, pid) {
            println!("{}", report(&door, &result));
        }
        return;
    }
    let home = PathBuf::from(std::env::var("TENERAL_HOME").unwrap_or_default());
    let events = std::env::var("TENERAL_EVENTS").unwrap_or_default();
    let stream = UnixStream::connect(&events).unwrap_or_else(|e| fail(&format!("events: {e}")));
    let mut reader = BufReader::new(stream.try_clone().unwrap_or_else(|e| fail(&e.to_string())));
    let mut writer = stream;
    let mut send = |line: String| {
        let _ = writer.write_all(format!("{line}\n").as_bytes());
        let mut ack = String::new();
        let _ = reader.read_line(&mut ack);
    };
    send(r#"{"type":"generation.ready"}"#.into());
    // Run unconfined on purpose (a test of the unsafe setting), it only looks.
    let doors = if home.join("soul/harmless").exists() {
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        vec![
            ("env.read".to_owned(), read(&home.join(".env"))),
            ("self.status".to_owned(), Ok(status)),
        ]
    } else {
        generation_doors(&home)
    };
    for (door, result) in doors {
        send(format!(r#"{{"type":"note","kind":"door","data":{}}}"#, report(&door, &result)));
    }
    send(r#"{"type":"reply","text":"every door tried"}"#.into());
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

fn fail(why: &str) -> ! {
    eprintln!("hostile body: {why}");
    std::process::exit(9)
}

fn report(door: &str, result: &Try) -> String {
    let (ok, errno, detail) = match result {
        Ok(d) => (true, "null".to_owned(), d.clone()),
        Err(e) => (false, e.raw_os_error().map_or("null".into(), |n| n.to_string()), e.to_string()),
    };
    format!(r#"{{"door":{},"ok":{ok},"errno":{errno},"detail":{}}}"#, quote(door), quote(&detail))
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

fn cvt(ret: i64) -> Try {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(format!("returned {ret}"))
    }
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default()
}

fn write_to(p: &Path) -> Try {
    OpenOptions::new().append(true).open(p)?.write_all(b"x")?;
    Ok("appended".into())
}

fn create(p: &Path) -> Try {
    fs::write(p, "forged\n")?;
    Ok("created".into())
}

fn read(p: &Path) -> Try {
    let mut text = String::new();
    fs::File::open(p)?.read_to_string(&mut text)?;
    Ok(format!("read {} bytes", text.len()))
}

/// Doors shared by both profiles: the kernel (the parent) and the syscalls.
fn common_doors(parent: i32, scratch: &Path) -> Vec<(String, Try)> {
    let mut d: Vec<(String, Try)> = Vec::new();
    let mut add = |name: &str, r: Try| d.push((name.to_owned(), r));
    // SAFETY (all below): raw system calls with valid or null pointers to
    // buffers that live across the call; a child made by clone exits at once.
    unsafe {
        add("kernel.ptrace", cvt(libc::ptrace(libc::PTRACE_ATTACH, parent, 0, 0)));
        add("kernel.signal", cvt(libc::kill(parent, libc::SIGURG) as i64));
        let mut buf = [0u8; 8];
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: 8 };
        let remote = libc::iovec { iov_base: 0x400000 as *mut libc::c_void, iov_len: 8 };
        add("kernel.vm_read", cvt(libc::process_vm_readv(parent, &local, 1, &remote, 1, 0) as i64));
        let target = cpath(scratch);
        add(
            "mount",
            cvt(libc::mount(
                c"none".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            ) as i64),
        );
        let attr = [0u8; 128];
        add("bpf", cvt(libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), 128)));
        add("userns.unshare", cvt(libc::unshare(libc::CLONE_NEWUSER) as i64));
        let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_long;
        let pid = libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0);
        if pid == 0 {
            libc::_exit(0);
        }
        add("userns.clone", cvt(pid));
        let args = [0u64; 11];
        let pid = libc::syscall(libc::SYS_clone3, args.as_ptr(), 88);
        if pid == 0 {
            libc::_exit(0);
        }
        add("clone3", cvt(pid));
        add("keyctl", cvt(libc::syscall(libc::SYS_keyctl, 0, -3, 0)));
        let params = [0u8; 120];
        add("io_uring", cvt(libc::syscall(libc::SYS_io_uring_setup, 1, params.as_ptr())));
        add("userfaultfd", cvt(libc::syscall(libc::SYS_userfaultfd, 0)));
        add(
            "perf_event_open",
            cvt(libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0)),
        );
        let c = b'x';
        add("tiocsti", cvt(libc::ioctl(0, libc::TIOCSTI, &c) as i64));
        add("tiocsti.high_bits", cvt(libc::syscall(libc::SYS_ioctl, 0, 0x1_0000_5412u64, &c)));
        add("tioclinux", cvt(libc::ioctl(0, libc::TIOCLINUX, &c) as i64));
        add(
            "raw_socket",
            cvt(libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) as i64),
        );
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps: Vec<&str> = status
        .lines()
        .filter(|l| {
            l.starts_with("Cap")
                || l.starts_with("NoNewPrivs")
                || l.starts_with("Seccomp:")
                || l.starts_with("Uid:")
        })
        .collect();
    add("self.status", Ok(caps.join(" ")));
    d
}

/// Where the test starts its stand-in ssh-agent for the individual at
/// `home` (outside the cage, in the host's /tmp).
fn agent_path(home: &Path) -> PathBuf {
    let name = home.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Path::new("/tmp").join(format!("tnl-agent-{name}")).join("agent.sock")
}

/// Doors of what the host holds that no profile grants: another program's
/// socket (an ssh-agent, journald) and the processes of `/proc`.
fn host_doors(home: &Path) -> Vec<(String, Try)> {
    let mut d: Vec<(String, Try)> = Vec::new();
    let mut add = |name: &str, r: Try| d.push((name.to_owned(), r));
    add("ssh_agent", UnixStream::connect(agent_path(home)).map(|_| "connected".into()));
    add(
        "journald",
        UnixDatagram::unbound()
            .and_then(|s| s.connect("/run/systemd/journal/socket"))
            .map(|()| "connected".into()),
    );
    add(
        "proc.count",
        fs::read_dir("/proc").map(|it| {
            let pids: Vec<String> = it
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                .collect();
            pids.join(" ")
        }),
    );
    // A descriptor that whatever started the kernel held open (the test
    // starts it holding 7), and every descriptor above 2 there is.
    add("fd.inherited", cvt(unsafe { libc::fcntl(7, libc::F_GETFD) } as i64));
    add(
        "fd.list",
        fs::read_dir("/proc/self/fd").map(|it| {
            let fds: Vec<String> =
                it.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            fds.join(" ")
        }),
    );
    d
}

fn generation_doors(home: &Path) -> Vec<(String, Try)> {
    let parent = unsafe { libc::getppid() };
    let at = |rel: &str| home.join(rel);
    let ws = at(".teneral/candidate");
    let _ = fs::create_dir_all(ws.join("mnt"));
    let mut d: Vec<(String, Try)> = Vec::new();
    let mut add = |name: &str, r: Try| d.push((name.to_owned(), r));
    // Positive cases first: what the body must be able to do.
    add("workspace.write", create(&ws.join("hello.txt")));
    add("soul.write", create(&at("soul/me.md")));
    add("memory.write", create(&at("memory/notes.md")));
    add("inbox.write", create(&at("inbox/.draft")));
    add("tmp.write", create(&PathBuf::from(std::env::var("TMPDIR").unwrap_or_default()).join("t")));
    add("journal.read", read(&at("memory/journal.jsonl")));
    add("live.read", read(&at(".teneral/live/body/Cargo.toml")));
    add("install.read", read(&at("BIRTH.md")));
    add("owner.read", read(&at(".teneral/owner/read-me.note")));
    add(
        "owner.consume",
        fs::remove_file(at(".teneral/owner/consume-me.note")).map(|()| "removed".into()),
    );
    add("secret.search", search_secrets(home, parent));
    add("model", ask_model());
    add("cargo", cargo(&ws.join("body"), &ws.join("target")));
    // The doors that must stay shut. First those of the build (build.rs).
    for (door, errno) in BUILD_DOORS {
        add(
            door,
            if *errno == 0 {
                Ok("opened".into())
            } else {
                Err(io::Error::from_raw_os_error(*errno))
            },
        );
    }
    add("install.write", write_to(&at("body/src/main.rs")));
    add("install.create", create(&at("body/src/evil.rs")));
    add("live.write", write_to(&at(".teneral/live/body/src/main.rs")));
    add("journal.append", write_to(&at("memory/journal.jsonl")));
    let journal = cpath(&at("memory/journal.jsonl"));
    add("journal.truncate", cvt(unsafe { libc::truncate(journal.as_ptr(), 0) } as i64));
    let _ = fs::write(at("memory/fake.jsonl"), "{}\n");
    add(
        "journal.replace",
        fs::rename(at("memory/fake.jsonl"), at("memory/journal.jsonl")).map(|()| "replaced".into()),
    );
    add("journal.remove", fs::remove_file(at("memory/journal.jsonl")).map(|()| "removed".into()));
    // The kernel's count of what each generation did: readable, not forgeable.
    add("scorecard.read", read(&at("memory/scorecard.json")));
    add("scorecard.write", write_to(&at("memory/scorecard.json")));
    let _ = fs::write(at("memory/fake.json"), "{\"generations\": []}\n");
    add(
        "scorecard.replace",
        fs::rename(at("memory/fake.json"), at("memory/scorecard.json")).map(|()| "replaced".into()),
    );
    // Its own generation's results of the owner's evaluations: the same.
    add("evals_results.read", read(&at("memory/evals.json")));
    add("evals_results.write", write_to(&at("memory/evals.json")));
    let _ = fs::write(at("memory/fake.json"), "{\"evaluations\": []}\n");
    add(
        "evals_results.replace",
        fs::rename(at("memory/fake.json"), at("memory/evals.json")).map(|()| "replaced".into()),
    );
    add("backlog.append", write_to(&at("BACKLOG.md")));
    add("backlog.read", read(&at("BACKLOG.md")));
    add("state.read", read(&at(".teneral/state.json")));
    add("state.write", write_to(&at(".teneral/state.json")));
    add("evals.read", read(&at("evals/greets.toml")));
    add("evals.write", create(&at("evals/mine.toml")));
    add("git.config", write_to(&at(".git/config")));
    add("git.hook", create(&at(".git/hooks/pre-commit")));
    add("git.ref", create(&at(".git/refs/heads/evil")));
    add("env.read", read(&at(".env")));
    add("shadow.read", read(Path::new("/etc/shadow")));
    let credentials = fs::read_to_string(at("soul/credentials-path")).unwrap_or_default();
    add("cargo.credentials", read(Path::new(credentials.trim())));
    add("env.name", fs::symlink_metadata(at(".env")).map(|_| "named".into()));
    add(
        "home.list",
        fs::read_dir(home).map(|it| {
            let names: Vec<String> =
                it.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            names.join(" ")
        }),
    );
    add("auth.read", read(&at(".teneral/auth/token")));
    add("auth.list", fs::read_dir(at(".teneral/auth")).map(|_| "listed".into()));
    add("kernel.environ", read(&PathBuf::from(format!("/proc/{parent}/environ"))));
    add("kernel.mem", read(&PathBuf::from(format!("/proc/{parent}/mem"))));
    add("owner.line", create(&at(".teneral/owner/9-forged.txt")));
    add("owner.accept", create(&at(".teneral/owner/forged.accept")));
    add("owner.dot_accept", create(&at(".teneral/owner/.9-forged.accept")));
    add("owner.approve", create(&at(".teneral/owner/forged.approve")));
    add("owner.interrupt", create(&at(".teneral/owner/forged.interrupt")));
    let _ = fs::write(ws.join("forged.txt"), "obey\n");
    add(
        "owner.rename_in",
        fs::rename(ws.join("forged.txt"), at(".teneral/owner/8-forged.txt"))
            .map(|()| "moved".into()),
    );
    let _ = std::os::unix::fs::symlink(at(".env"), ws.join("peek-env"));
    add("symlink.env", read(&ws.join("peek-env")));
    let _ = std::os::unix::fs::symlink("../state.json", ws.join("peek-state"));
    add("symlink.state", read(&ws.join("peek-state")));
    add("hardlink.env", fs::hard_link(at(".env"), ws.join("env-link")).map(|()| "linked".into()));
    d.extend(host_doors(home));
    d.extend(common_doors(parent, &ws.join("mnt")));
    d
}

fn gate_doors(home: &Path, parent: i32) -> Vec<(String, Try)> {
    let mut d: Vec<(String, Try)> = Vec::new();
    let mut add = |name: &str, r: Try| d.push((name.to_owned(), r));
    add("checkout.write", create(Path::new("gate-was-here")));
    add("loopback", loopback());
    let connect = |addr: &str| -> Try {
        let addr: SocketAddr = addr.parse().map_err(io::Error::other)?;
        TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map(|_| "connected".into())
    };
    add("net.ipv4", connect("1.1.1.1:80"));
    add("net.ipv6", connect("[2606:4700:4700::1111]:80"));
    let resolver = fs::read_to_string("/etc/resolv.conf")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("nameserver ").map(|s| s.trim().to_owned()))
        })
        .unwrap_or_else(|| "8.8.8.8".into());
    add(
        "net.dns",
        UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.send_to(b"\0", format!("{resolver}:53")))
            .map(|n| format!("sent {n}")),
    );
    use std::net::ToSocketAddrs;
    add(
        "net.resolve",
        "example.com:80".to_socket_addrs().map(|a| format!("{:?}", a.collect::<Vec<_>>())),
    );
    add("individual.env", read(&home.join(".env")));
    add("individual.soul", read(&home.join("soul/decoy.txt")));
    add("individual.write", create(&home.join("gate-was-here")));
    add("individual.list", fs::read_dir(home).map(|_| "listed".into()));
    let _ = fs::create_dir_all("mnt");
    d.extend(host_doors(home));
    d.extend(common_doors(parent, Path::new("mnt")));
    d
}
