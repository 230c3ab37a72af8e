//! The hostile body's build script: it runs when the kernel builds the body,
//! and tries the doors a build could open (the owner's `.env`, the network,
//! an ssh-agent and journald).
//! What each attempt got is compiled into the body as `BUILD_DOORS`, which
//! the body reports with its other doors (0: it worked; else the errno).
use std::io::Read;

fn errno(r: std::io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

fn main() {
    // The kernel builds in <home>/.teneral/live/body.
    let env = errno(std::fs::File::open("../../../.env").and_then(|mut f| {
        let mut text = String::new();
        f.read_to_string(&mut text).map(|_| ())
    }));
    let addr = std::net::SocketAddr::from(([1, 1, 1, 1], 80));
    let net = errno(
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3)).map(|_| ()),
    );
    // The test's stand-in ssh-agent for this individual, in the host's /tmp
    // (see `agent_path` in src/main.rs), and journald's socket.
    let cwd = std::env::current_dir().unwrap_or_default();
    let name = cwd.ancestors().nth(3).and_then(|h| h.file_name()).unwrap_or_default();
    let agent = format!("/tmp/tnl-agent-{}/agent.sock", name.to_string_lossy());
    let agent = errno(std::os::unix::net::UnixStream::connect(agent).map(|_| ()));
    let journald = errno(
        std::os::unix::net::UnixDatagram::unbound()
            .and_then(|s| s.connect("/run/systemd/journal/socket")),
    );
    // A credentials file planted in the kernel's cargo home (the test
    // plants one there): never there for a build. With no home to look in
    // it reports -1, which no test takes for a refusal.
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")));
    let credentials = match cargo_home {
        Some(home) => errno(std::fs::File::open(home.join("credentials.toml")).map(|_| ())),
        None => -1,
    };
    let code = format!(
        "const BUILD_DOORS: &[(&str, i32)] = &[(\"build.env_read\", {env}), (\"build.network\", {net}), \
         (\"build.ssh_agent\", {agent}), (\"build.journald\", {journald}), \
         (\"build.cargo_credentials\", {credentials})];\n"
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    std::fs::write(out.join("build_doors.rs"), code).unwrap_or_default();
}
