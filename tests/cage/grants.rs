//! What a grant holds: a mount nested below a read-only grant is read-only
//! too, and of the toolchain homes only the parts a build reads are there
//! (never `credentials.toml`), for a kernel that is not root as well.

use std::path::{Path, PathBuf};
use std::process::Command;

use teneral::confine::host::{self, Homes};
use teneral::confine::plan;
use teneral_cage::plan::Plan;

use super::*;

/// Tries to write, read or execute each path given after the verb, one per
/// line of output: `<path> OK` or `<path> ERRNO <n>`.
const PROBE: &str = r#"
import os, sys
verb = sys.argv[1]
for p in sys.argv[2:]:
    try:
        if verb == "write":
            open(p, "w").write("x")
        elif verb == "exec":
            os.stat(p)
            if not os.access(p, os.X_OK):
                raise PermissionError(13, "not executable")
        else:
            open(p).read()
        print(p, "OK")
    except OSError as e:
        print(p, "ERRNO", e.errno)
"#;

fn line_of(out: &str, path: &Path) -> String {
    let prefix = format!("{} ", path.display());
    out.lines().find(|l| l.starts_with(&prefix)).unwrap_or("(no line)").to_owned()
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A tmpfs mounted below a read-only grant (in a mount namespace of the
/// test's own, so the machine's mounts stay as they are) is writable
/// outside the cage and read-only inside it: EROFS, as the grant itself.
#[test]
fn a_mount_nested_below_a_read_only_grant_is_read_only() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    if rustix::process::getuid().as_raw() != 0 {
        crate::common::skip("mounting the nested tmpfs needs root");
        return Ok(());
    }
    let dir = tempfile::Builder::new().prefix("tnl-nested").tempdir()?;
    let grant = dir.path().join("grant");
    let nested = grant.join("nested");
    let scratch = dir.path().join("scratch");
    for d in [&nested, &scratch] {
        std::fs::create_dir_all(d)?;
    }
    let script = r#"mount -t tmpfs nested "$NESTED" && echo x > "$NESTED/outside" && echo OUTSIDE-WROTE && exec "$@""#;
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(teneral())
        .args(["confine", "--profile", "gate", "--exec", "/usr", "--exec", "/lib"])
        .args(["--exec", "/lib64", "--read", "/etc", "--read", "/proc", "--read"])
        .arg(&grant)
        .arg("--write")
        .arg(&scratch)
        .args(["--net", "loopback", "--", "/usr/bin/python3", "-c", PROBE, "write"])
        .args([nested.join("inside"), grant.join("top"), scratch.join("ok")])
        .env("NESTED", &nested)
        .current_dir(dir.path())
        .output_within(SLOW)?;
    let all = text(&out);
    assert!(all.contains("OUTSIDE-WROTE"), "the nested tmpfs is writable outside: {all}");
    assert_eq!(
        line_of(&all, &nested.join("inside")),
        format!("{} ERRNO 30", nested.join("inside").display()),
        "{all}"
    );
    assert_eq!(
        line_of(&all, &grant.join("top")),
        format!("{} ERRNO 30", grant.join("top").display()),
        "{all}"
    );
    assert_eq!(
        line_of(&all, &scratch.join("ok")),
        format!("{} OK", scratch.join("ok").display()),
        "{all}"
    );
    Ok(())
}

/// A cargo and a rustup home with what a build reads and the secrets it
/// must never see, all readable by anyone (mode 0644), so that only the
/// cage's tree keeps them out.
struct Toolchain {
    cargo: PathBuf,
    rustup: PathBuf,
}

impl Toolchain {
    fn plant(root: &Path) -> Result<Toolchain, Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt;
        let cargo = root.join("cargo-home");
        let rustup = root.join("rustup-home");
        let files: [(PathBuf, &str); 7] = [
            (cargo.join("credentials.toml"), "[registry]\ntoken = \"sk-cagetest-cargo\"\n"),
            (cargo.join("credentials"), "[registry]\ntoken = \"sk-cagetest-cargo\"\n"),
            (cargo.join("config.toml"), "[net]\nretry = 2\n"),
            (cargo.join("registry/index/ok"), "index\n"),
            (cargo.join("bin/cargo"), "#!/bin/sh\necho shim\n"),
            (rustup.join("settings.toml"), "profile = \"minimal\"\n"),
            (rustup.join("toolchains/stable/bin/rustc"), "#!/bin/sh\necho rustc\n"),
        ];
        for (path, content) in &files {
            std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
            std::fs::write(path, content)?;
        }
        for exe in [cargo.join("bin/cargo"), rustup.join("toolchains/stable/bin/rustc")] {
            std::fs::set_permissions(exe, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(Toolchain { cargo, rustup })
    }

    fn homes(&self) -> Homes {
        Homes {
            home: None,
            cargo: Some(self.cargo.clone()),
            rustup: Some(self.rustup.clone()),
            path: vec![self.cargo.join("bin")],
        }
    }
}

/// Runs the probe with `verb` on `paths` inside `plan`, as nobody (a kernel
/// that is not root: the helper makes its namespaces in a user namespace).
fn as_nobody(plan: &Plan, cwd: &Path, verb: &str, paths: &[PathBuf]) -> std::io::Result<String> {
    let mut args = plan.to_args();
    args.push("--".into());
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(teneral())
        .arg("confine")
        .args(args)
        .args(["/usr/bin/python3", "-c", PROBE, verb])
        .args(paths)
        .current_dir(cwd)
        .output_within(QUICK)?;
    Ok(text(&out))
}

/// `credentials.toml` and `credentials` in the cargo home are not there
/// (ENOENT) for a body (the generation profile) and for a build (the gate
/// profile, where a build script runs) of a kernel that is not root, while
/// what a build needs of the homes is there.
#[test]
fn cargo_credentials_are_not_there_for_a_body_or_a_build_of_a_kernel_that_is_not_root() -> TestResult
{
    if !require_cage()? {
        return Ok(());
    }
    if rustix::process::getuid().as_raw() != 0 {
        crate::common::skip("the test becomes nobody through setpriv, which needs root");
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("tnl-toolchain").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let tools = Toolchain::plant(dir.path())?;
    let checkout = dir.path().join("checkout");
    let home = dir.path().join("individual");
    std::fs::create_dir_all(&checkout)?;
    std::fs::create_dir_all(&home)?;
    host::prepare_generation(&home)?;
    for p in [&checkout, &home] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534))?;
    }
    let gate = plan::gate(&checkout, &[], &host::host_of(&tools.homes(), &[&checkout]));
    let mut body = plan::generation(&home, &[], &host::host_of(&tools.homes(), &[&home]));
    body.rules.retain(|r| r.path.exists());
    let secrets = [tools.cargo.join("credentials.toml"), tools.cargo.join("credentials")];
    let readable = [
        tools.cargo.join("config.toml"),
        tools.cargo.join("registry/index/ok"),
        tools.rustup.join("settings.toml"),
    ];
    let programs =
        [tools.cargo.join("bin/cargo"), tools.rustup.join("toolchains/stable/bin/rustc")];
    for (name, plan, cwd) in [("build", &gate, &checkout), ("body", &body, &home)] {
        let out = as_nobody(plan, cwd, "read", &secrets)?;
        for secret in &secrets {
            assert_eq!(
                line_of(&out, secret),
                format!("{} ERRNO {ENOENT}", secret.display()),
                "{name}: {out}"
            );
        }
        let out = as_nobody(plan, cwd, "read", &readable)?;
        for path in &readable {
            assert_eq!(line_of(&out, path), format!("{} OK", path.display()), "{name}: {out}");
        }
        let out = as_nobody(plan, cwd, "exec", &programs)?;
        for path in &programs {
            assert_eq!(line_of(&out, path), format!("{} OK", path.display()), "{name}: {out}");
        }
    }
    Ok(())
}
