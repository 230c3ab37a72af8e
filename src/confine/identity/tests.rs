use super::*;

use teneral_cage::identity::Identity;

const A: Range = Range { first: 100_000, count: 65_536 };

fn id(uid: u32, gid: u32) -> Identity {
    Identity { uid, gid }
}

#[test]
fn roots_sub_id_line_is_the_range() {
    let table: [(&str, Option<Range>); 8] = [
        ("root:100000:65536\n", Some(A)),
        ("alice:100000:65536\nroot:200000:1000\n", Some(Range { first: 200_000, count: 1000 })),
        ("0:300000:10\n", Some(Range { first: 300_000, count: 10 })),
        ("# root:1:2\n\nalice:5:5\n", None),
        ("root:100000:0\n", None),
        ("root:0:65536\n", None),
        ("root:4294967295:2\n", None),
        ("root:100000:65536:extra\n", None),
    ];
    for (text, want) in table {
        assert_eq!(parse_subid(text), want, "{text:?}");
    }
}

#[test]
fn an_individual_gets_the_lowest_offset_free_in_both_ranges() {
    let gids = Range { first: 500_000, count: 3 };
    let table: [(Range, Range, Vec<Identity>, Option<Identity>); 6] = [
        (A, A, vec![], Some(id(100_000, 100_000))),
        (A, A, vec![id(100_000, 100_000)], Some(id(100_001, 100_001))),
        (A, gids, vec![id(100_000, 500_000)], Some(id(100_001, 500_001))),
        // A gid held alone (an edited record) keeps its offset out too.
        (A, gids, vec![id(7, 500_000), id(100_001, 9)], Some(id(100_002, 500_002))),
        // The smaller range bounds the choice.
        (A, gids, vec![id(100_000, 500_000), id(100_001, 500_001), id(100_002, 500_002)], None),
        (Range { first: 1, count: 0 }, A, vec![], None),
    ];
    for (uids, gids, taken, want) in table {
        assert_eq!(choose(uids, gids, &taken), want, "{uids:?} {gids:?} {taken:?}");
    }
}

#[test]
fn an_individual_keeps_its_identity_and_the_gone_give_theirs_back() {
    let entry = |uid: u32, key: &str| Entry { id: id(uid, uid), key: PathBuf::from(key) };
    /// Recorded, asked for, gone; the identity, whether recorded anew, entries after.
    type Row<'a> = (Vec<Entry>, &'a str, &'a [&'a str], Identity, bool, usize);
    let table: [Row; 5] = [
        (vec![], "/a", &[], id(100_000, 100_000), true, 1),
        (vec![entry(100_000, "/a")], "/a", &[], id(100_000, 100_000), false, 1),
        (vec![entry(100_000, "/a")], "/b", &[], id(100_001, 100_001), true, 2),
        // Known, it keeps its id even if the check for gone ones would drop it.
        (vec![entry(100_005, "/a")], "/a", &["/a"], id(100_005, 100_005), false, 1),
        // /a is gone: its id is the lowest free again, and /b takes it.
        (
            vec![entry(100_000, "/a"), entry(100_001, "/c")],
            "/b",
            &["/a"],
            id(100_000, 100_000),
            true,
            2,
        ),
    ];
    for (mut entries, key, gone, want, changed, len) in table {
        let got =
            decide(&mut entries, Path::new(key), A, A, |p| gone.iter().any(|g| p == Path::new(g)));
        let (got, did) = got.unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((got, did, entries.len()), (want, changed, len), "{key}");
    }
    let mut full = vec![entry(100_000, "/a")];
    let one = Range { first: 100_000, count: 1 };
    assert!(matches!(
        decide(&mut full, Path::new("/b"), one, one, |_| false),
        Err(IdentityError::Exhausted { .. })
    ));
}

#[test]
fn a_registry_line_it_cannot_read_is_refused_never_passed_over() {
    let path = Path::new("/r");
    let good = "100000 100000 /srv/a\n100001 100001 /srv/with space\n\n";
    let read = parse_registry(path, good).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(read[1].key, PathBuf::from("/srv/with space"));
    assert_eq!(
        parse_registry(path, &String::from_utf8_lossy(&registry_text(&read))).ok(),
        Some(read)
    );
    for bad in ["100000 /srv/a\n", "x 1 /a\n", "0 0 /root-is-never\n", "5 5 \n", "5 5\n"] {
        assert!(parse_registry(path, bad).is_err(), "{bad:?}");
    }
}

/// Two registries at one path (two kernels, or one restarted) agree: the
/// same directory keeps its identity, another gets its own.
#[test]
fn the_record_survives_a_restart_and_never_gives_one_id_twice() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state/identities");
    let homes = [dir.path().join("a"), dir.path().join("b")];
    for home in &homes {
        std::fs::create_dir(home).expect("an individual's directory");
    }
    let first = Registry::at(&path).identity_of(&homes[0], A, A).expect("a first identity");
    let second = Registry::at(&path).identity_of(&homes[1], A, A).expect("a second identity");
    let again = Registry::at(&path).identity_of(&homes[0], A, A).expect("the first again");
    assert_eq!(first, again);
    assert_ne!(first.uid, second.uid);
    assert_ne!(first.gid, second.gid);
    let text = std::fs::read_to_string(&path).expect("the record");
    assert_eq!(text.lines().count(), 2, "{text}");
}

/// A writer killed between writing its temporary and renaming it leaves
/// `.identities.tmp-<pid>` beside the record: the next one to take the lock
/// removes it, and nothing else of the directory.
#[test]
fn a_temporary_a_killed_writer_left_is_removed_under_the_lock() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("the registry's directory");
    let path = state.join("identities");
    let home = dir.path().join("a");
    std::fs::create_dir(&home).expect("an individual's directory");
    let stale = [state.join(".identities.tmp-4242"), state.join(".identities.tmp-1")];
    for planted in &stale {
        std::fs::write(planted, "100000 100000 /half/written").expect("a planted temporary");
    }
    std::os::unix::fs::symlink("/etc/passwd", state.join(".identities.tmp-77"))
        .expect("a planted link");
    let kept = [state.join(".identities.tmp-x"), state.join(".other.tmp-5"), state.join("notes")];
    for other in &kept {
        std::fs::write(other, "x").expect("another file");
    }
    let id = Registry::at(&path).identity_of(&home, A, A).expect("an identity");
    for planted in stale.iter().chain([&state.join(".identities.tmp-77")]) {
        assert!(planted.symlink_metadata().is_err(), "{} is left", planted.display());
    }
    assert!(std::path::Path::new("/etc/passwd").exists());
    for other in &kept {
        assert!(other.exists(), "{} was removed", other.display());
    }
    let text = std::fs::read_to_string(&path).expect("the record");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(!text.contains("/half/written"), "{text}");
    // The identity is the record's, read again by a start after the sweep.
    assert_eq!(Registry::at(&path).identity_of(&home, A, A).expect("again"), id);
}
