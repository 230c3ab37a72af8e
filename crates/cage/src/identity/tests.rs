use super::*;

fn id(uid: u32, gid: u32) -> Identity {
    Identity { uid, gid }
}

#[test]
fn identities_round_trip_and_root_is_never_one() {
    let table = [
        ("2000000000:2000000000", Some(id(2_000_000_000, 2_000_000_000))),
        ("65534:65534", Some(Identity::NOBODY)),
        ("0:5", None),
        ("5:0", None),
        ("5", None),
        ("-1:5", None),
    ];
    for (text, want) in table {
        assert_eq!(Identity::from_arg(text), want, "{text}");
        if let Some(id) = want {
            assert_eq!(id.to_arg(), text);
        }
    }
}

/// The walk gives directories and single-link files, and never what a
/// link leads to, a hard-linked file, a FIFO, or what lies on another
/// mount; the kernel's own read-only files stay its own.
#[test]
fn the_walk_gives_the_tree_and_nothing_a_link_leads_to() {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: giving files to another identity needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let top = dir.path().join("soul");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(top.join("a/b/c")).expect("a tree");
    std::fs::write(&outside, "root's").expect("a file outside");
    std::fs::write(top.join("a/b/c/file"), "x").expect("a file");
    std::fs::write(top.join("journal"), "kept").expect("a kept file");
    std::os::unix::fs::symlink(&outside, top.join("a/link")).expect("a link out");
    std::os::unix::fs::symlink(dir.path(), top.join("a/dirlink")).expect("a link to a directory");
    std::fs::hard_link(&outside, top.join("a/hard")).expect("a hard link");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        top.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("a FIFO");
    let me = id(2_000_000_077, 2_000_000_078);
    let keep = [top.join("journal")];
    own(&top, me, &keep).expect("the walk");
    let owner = |p: &Path| std::fs::symlink_metadata(p).map(|m| (m.uid(), m.gid())).expect("there");
    let theirs = (me.uid, me.gid);
    for given in ["", "a", "a/b", "a/b/c", "a/b/c/file"] {
        assert_eq!(owner(&top.join(given)), theirs, "{given}");
    }
    for kept in ["journal", "a/link", "a/dirlink", "a/hard", "fifo"] {
        assert_eq!(owner(&top.join(kept)), (0, 0), "{kept}");
    }
    assert_eq!(owner(&outside), (0, 0), "the file outside");
    assert_eq!(owner(dir.path()), (0, 0), "the directory a link leads to");

    // Owned already: only what the kernel made since is given.
    std::fs::create_dir(top.join("made")).expect("a directory the kernel makes");
    std::fs::write(top.join("made/inside"), "x").expect("a file in it");
    std::os::unix::fs::chown(top.join("a/b/c/file"), Some(0), Some(0)).expect("chown");
    own(&top, me, &keep).expect("the walk again");
    assert_eq!(owner(&top.join("made")), theirs);
    assert_eq!(owner(&top.join("made/inside")), theirs);
    assert_eq!(owner(&top.join("a/b/c/file")), (0, 0), "beneath an owned directory: not walked");
}

/// Grants are resolved as `canonicalize` does, following the kernel's own
/// links, but never a link the identity owns or one in a directory it
/// owns or may write as its group, nor, whoever the kernel is, one beneath
/// a writable grant.
#[test]
fn a_grant_follows_no_link_the_identity_may_have_made() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: making links of another identity needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().canonicalize().expect("its real path");
    let me = id(2_000_000_081, 2_000_000_082);
    let (cache, theirs, shared) = (root.join("cache"), root.join("theirs"), root.join("shared"));
    for d in [&cache, &theirs, &shared, &root.join("kernel")] {
        std::fs::create_dir(d).expect("a directory");
    }
    std::os::unix::fs::chown(&theirs, Some(me.uid), Some(me.gid)).expect("chown");
    std::os::unix::fs::chown(&shared, Some(0), Some(me.gid)).expect("chown");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).expect("chmod");
    let link = |at: &Path, to: &str| std::os::unix::fs::symlink(to, at).expect("a link");
    // The kernel's own links: absolute, relative, through `..`.
    link(&root.join("kernel/abs"), cache.to_str().expect("UTF-8"));
    link(&root.join("kernel/rel"), "../cache");
    link(&root.join("kernel/to-theirs"), "../theirs/planted");
    // A body's: in its own directory, in one its group may write, and one
    // it owns in a directory of root's.
    link(&theirs.join("planted"), "/etc");
    link(&shared.join("planted"), "/etc");
    link(&root.join("kernel/owned"), "/etc");
    std::os::unix::fs::lchown(root.join("kernel/owned"), Some(me.uid), Some(me.gid))
        .expect("lchown");
    let table: [(&str, Option<PathBuf>); 8] = [
        ("cache", Some(cache.clone())),
        ("kernel/abs", Some(cache.clone())),
        ("kernel/rel", Some(cache.clone())),
        ("kernel/./rel/../theirs", Some(theirs.clone())),
        ("theirs/planted", None),
        ("kernel/to-theirs", None),
        ("shared/planted", None),
        ("kernel/owned", None),
    ];
    for (rel, want) in table {
        let got = resolve_grant(&root.join(rel), Some(me), &[]);
        match want {
            Some(want) => assert_eq!(got.ok(), Some(want), "{rel}"),
            None => {
                let e = got.expect_err(rel);
                assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{rel}: {e}");
            }
        }
    }
    // Whoever the kernel is: a link beneath a writable grant is refused,
    // the grant's own path (a link of the kernel's to it) is not.
    let writable = [shared.clone()];
    let refused = resolve_grant(&shared.join("planted"), None, &writable);
    assert_eq!(refused.map_err(|e| e.kind()), Err(io::ErrorKind::PermissionDenied));
    link(&root.join("kernel/to-shared"), "../shared");
    let own = resolve_grant(&root.join("kernel/to-shared"), None, &writable);
    assert_eq!(own.ok(), Some(shared.clone()));
    assert_eq!(resolve_grant(&root.join("kernel/abs"), None, &writable).ok(), Some(cache));
}
