use std::collections::HashMap;

use super::*;

/// A small history as plain data: 1 is the candidate commit, 2 its tree,
/// 3 a blob, 4 a subtree, 5 a blob in it; 10 its parent, the running commit,
/// which the main repository has with its tree 11.
fn history() -> HashMap<u32, Obj<u32>> {
    HashMap::from([
        (1, Obj::Commit { tree: 2, parents: vec![10] }),
        (2, Obj::Tree(vec![(3, Kind::Blob), (4, Kind::Tree), (11, Kind::Tree)])),
        (3, Obj::Blob),
        (4, Obj::Tree(vec![(5, Kind::Blob)])),
        (5, Obj::Blob),
        (10, Obj::Commit { tree: 11, parents: vec![] }),
        (11, Obj::Tree(vec![])),
        (20, Obj::Blob),
        (21, Obj::Commit { tree: 2, parents: vec![] }),
    ])
}

fn check(pack: &[u32], main: &[u32]) -> Result<(), Gap<u32>> {
    let objects = history();
    check_closure(
        1,
        pack,
        |id| main.contains(&id),
        |id| pack.contains(&id).then(|| objects.get(&id).cloned()).flatten(),
    )
}

/// What a pack holds, what the main repository has, the verdict.
type Row = (&'static str, Vec<u32>, &'static [u32], Result<(), Gap<u32>>);

#[test]
fn a_pack_is_taken_only_when_it_is_exactly_the_commits_new_objects() {
    let running: &[u32] = &[10, 11];
    let table: Vec<Row> = vec![
        ("the new objects", vec![1, 2, 3, 4, 5], running, Ok(())),
        ("some the main repository has too", vec![1, 2, 3, 4, 5, 10, 11], running, Ok(())),
        ("the whole history, into an empty repository", vec![1, 2, 3, 4, 5, 10, 11], &[], Ok(())),
        ("the commit is not there", vec![2, 3, 4, 5], running, Err(Gap::NotInPack)),
        (
            "a blob is missing",
            vec![1, 2, 4, 5],
            running,
            Err(Gap::Missing { id: 3, kind: Kind::Blob }),
        ),
        (
            "a subtree is missing",
            vec![1, 2, 3, 5],
            running,
            Err(Gap::Missing { id: 4, kind: Kind::Tree }),
        ),
        (
            "the parent is missing",
            vec![1, 2, 3, 4, 5],
            &[],
            Err(Gap::Missing { id: 10, kind: Kind::Commit }),
        ),
        (
            "an object of another history",
            vec![1, 2, 3, 4, 5, 20],
            running,
            Err(Gap::Extra { count: 1, example: 20 }),
        ),
        (
            "another commit",
            vec![1, 2, 3, 4, 5, 21],
            running,
            Err(Gap::Extra { count: 1, example: 21 }),
        ),
    ];
    for (what, pack, main, want) in table {
        assert_eq!(check(&pack, main), want, "{what}");
    }
}

#[test]
fn an_object_of_the_wrong_kind_is_refused() {
    let objects = HashMap::from([
        (1, Obj::Commit { tree: 9, parents: vec![] }),
        (9, Obj::Tree(vec![])),
        (3, Obj::Blob),
        (6, Obj::Commit { tree: 3, parents: vec![] }),
        (7, Obj::Commit { tree: 8, parents: vec![1] }),
        (8, Obj::Tree(vec![(1, Kind::Blob)])),
    ]);
    let read = |id| objects.get(&id).cloned();
    let table: [(&str, u32, &[u32], Gap<u32>); 2] = [
        ("a blob as a commit's tree", 6, &[6, 3], Gap::WrongKind { id: 3, want: Kind::Tree }),
        ("a commit as a tree's blob", 7, &[1, 9, 7, 8], Gap::WrongKind { id: 1, want: Kind::Blob }),
    ];
    for (what, commit, pack, want) in table {
        assert_eq!(check_closure(commit, pack, |_| false, read), Err(want), "{what}");
    }
    let tag = |_| Some(Obj::<u32>::Other);
    assert_eq!(
        check_closure(1, &[1], |_| false, tag),
        Err(Gap::WrongKind { id: 1, want: Kind::Commit })
    );
}

#[test]
fn the_script_packs_the_commit_less_the_bases_the_clone_has() {
    assert!(SCRIPT.contains("git pack-objects --revs --stdout"));
    assert!(!SCRIPT.contains("--thin"), "a thin pack would need the main repository to index");
    let env =
        bare_git_env(Path::new("/i/.teneral/candidate"), Path::new("/i/.teneral/gate/fetch/out"));
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("GIT_DIR"), Some("/i/.teneral/candidate/.git".into()));
    assert_eq!(get("HOME"), Some("/i/.teneral/gate/fetch/out".into()));
    assert_eq!(get("GIT_CONFIG_NOSYSTEM"), Some("1".into()));
    assert!(env.iter().all(|(k, _)| k == "PATH"
        || k == "HOME"
        || k.starts_with("GIT_")
        || k == "XDG_CONFIG_HOME"));
}
