//! The kernel's check of a staged tree (`organs::staged::check`): what an
//! honest unpacker makes passes; each thing a lying one could leave is
//! refused by name.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use teneral::organs::staged::{check, Found, StagedError};
use teneral::organs::unpack::resolve::Refusal;

use super::corpus::Place;
use super::tarball::Tar;
use crate::common::TestResult;
use teneral_testkit::{Within, QUICK};

fn mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A staged tree as the unpacker makes it: directories, files, a hard
/// link, links inside.
fn honest(place: &Place) -> std::io::Result<()> {
    let tar = Tar::new()
        .dir("pkg/", 0o755)
        .file_mode("pkg/bin/tool", b"#!/bin/sh\n", 0o755)
        .hard_link("pkg/bin/again", "pkg/bin/tool")
        .symlink("pkg/lib", "bin")
        .symlink("pkg/up", "../pkg/./bin/tool")
        .symlink("pkg/dangling", "later/x")
        .finish();
    teneral::organs::unpack::unpack_tar(&tar[..], &place.stage())
        .map(drop)
        .map_err(std::io::Error::other)
}

#[test]
fn what_the_unpacker_makes_passes() -> TestResult {
    let p = Place::new()?;
    honest(&p)?;
    let found = check(&p.stage(), 40)?;
    // pkg, bin, tool, again, lib, up, dangling; the file's 10 bytes once.
    assert_eq!(found, Found { entries: 7, bytes: 10 });
    assert_eq!(check(&Place::new()?.stage(), 40)?, Found::default(), "an empty tree passes");
    Ok(())
}

/// Each thing a lying unpacker could leave, planted by `plant` in a
/// staging directory that holds an honest tree, and the refusal it gets.
#[test]
fn each_thing_a_lying_unpacker_leaves_is_refused_by_name() -> TestResult {
    type Plant = Box<dyn Fn(&Path) -> std::io::Result<()>>;
    type Want = Box<dyn Fn(&StagedError) -> bool>;
    let shell = |script: &'static str| -> Plant {
        Box::new(move |stage: &Path| {
            let status = std::process::Command::new("timeout")
                .args(["10", "sh", "-c", script])
                .current_dir(stage)
                .status_within(QUICK)?;
            if status.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!("{script}: {status}")))
            }
        })
    };
    let outside = Place::new()?;
    let secret = outside.dir.path().join("outside/secret");
    std::fs::write(&secret, b"not the organ's")?;
    let secret_for_link = secret.clone();
    let cases: Vec<(&str, Plant, Want)> = vec![
        (
            "a fifo",
            shell("mkfifo pkg/pipe"),
            Box::new(
                |e| matches!(e, StagedError::Kind { name, kind: "fifo" } if name == "pkg/pipe"),
            ),
        ),
        (
            "a socket",
            Box::new(|stage: &Path| {
                std::os::unix::net::UnixListener::bind(stage.join("pkg/sock")).map(drop)
            }),
            Box::new(
                |e| matches!(e, StagedError::Kind { name, kind: "socket" } if name == "pkg/sock"),
            ),
        ),
        (
            "a set-uid file",
            Box::new(|stage: &Path| mode(&stage.join("pkg/bin/tool"), 0o4755)),
            Box::new(|e| {
                matches!(e, StagedError::Mode { name, mode: 0o4755 }
                    if name == "pkg/bin/tool" || name == "pkg/bin/again")
            }),
        ),
        (
            "a set-gid directory",
            Box::new(|stage: &Path| mode(&stage.join("pkg/bin"), 0o2755)),
            Box::new(
                |e| matches!(e, StagedError::Mode { name, mode: 0o2755 } if name == "pkg/bin"),
            ),
        ),
        (
            "a world-writable staging directory",
            Box::new(|stage: &Path| mode(stage, 0o777)),
            Box::new(|e| matches!(e, StagedError::Mode { name, mode: 0o777 } if name.is_empty())),
        ),
        (
            "a sticky directory",
            Box::new(|stage: &Path| mode(&stage.join("pkg"), 0o1755)),
            Box::new(|e| matches!(e, StagedError::Mode { name, mode: 0o1755 } if name == "pkg")),
        ),
        (
            "a link out",
            shell("ln -s ../../../../../../../../etc pkg/etc"),
            Box::new(|e| {
                matches!(e, StagedError::Refused { name, reason: Refusal::LinkOut(_) }
                    if name == "pkg/etc")
            }),
        ),
        (
            "an absolute link",
            shell("ln -s /etc/passwd pkg/passwd"),
            Box::new(|e| {
                matches!(e, StagedError::Refused { name, reason: Refusal::LinkOut(t) }
                    if name == "pkg/passwd" && t == "/etc/passwd")
            }),
        ),
        (
            "a hard link to a file outside",
            Box::new(move |stage: &Path| std::fs::hard_link(&secret_for_link, stage.join("pkg/s"))),
            Box::new(
                |e| matches!(e, StagedError::HardLinkOut { name, links: 2, inside: 1 } if name == "pkg/s"),
            ),
        ),
        (
            "too many entries",
            Box::new(|stage: &Path| {
                std::fs::create_dir(stage.join("many"))?;
                (0..20_000).try_for_each(|i| std::fs::write(stage.join(format!("many/{i}")), b""))
            }),
            Box::new(|e| matches!(e, StagedError::TooMany)),
        ),
        (
            "too many bytes",
            Box::new(|stage: &Path| {
                let file = std::fs::File::create(stage.join("pkg/huge"))?;
                file.set_len((1 << 30) + 1)
            }),
            Box::new(|e| matches!(e, StagedError::TooLarge)),
        ),
    ];
    for (case, plant, want) in cases {
        let p = Place::new()?;
        honest(&p)?;
        check(&p.stage(), 40).map_err(|e| format!("{case}: the honest tree: {e}"))?;
        match plant(&p.stage()) {
            // Inside a gate check's cage (the kernel's own suite judged as a
            // mutation), seccomp refuses set-id modes before they exist.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && case.starts_with("a set-") => {
                crate::common::skip(&format!(
                    "{case}: set-id modes are refused in this cage (EPERM), so none can be planted"
                ));
                continue;
            }
            planted => planted.map_err(|e| format!("{case}: planting: {e}"))?,
        }
        match check(&p.stage(), 40) {
            Err(e) if want(&e) => {
                let text = e.to_string();
                assert!(!text.is_empty(), "{case}");
            }
            other => panic!("{case}: not refused as it should be: {other:?}"),
        }
    }
    // The secret is still whole: the check only looks.
    assert_eq!(std::fs::read(&secret)?, b"not the organ's");
    Ok(())
}

#[test]
fn a_name_too_long_for_where_the_tree_is_used_is_refused() -> TestResult {
    let p = Place::new()?;
    std::fs::create_dir(p.stage().join("d"))?;
    std::fs::write(p.stage().join("d").join("f".repeat(200)), b"")?;
    check(&p.stage(), 3800)?;
    match check(&p.stage(), 3900) {
        Err(StagedError::Refused {
            reason: Refusal::PathTooLong { len, root_len: 3900 }, ..
        }) => {
            assert_eq!(len, 3900 + 1 + 202)
        }
        other => panic!("want the path refused, got {other:?}"),
    }
    Ok(())
}
