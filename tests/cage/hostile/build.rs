//! The hostile body's build script: it runs when the kernel builds the body,
//! and tries the doors a build could open (the owner's `.env`, the network).
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
    let code = format!("const BUILD_DOORS: &[(&str, i32)] = &[(\"build.env_read\", {env}), (\"build.network\", {net})];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    std::fs::write(out.join("build_doors.rs"), code).unwrap_or_default();
}
