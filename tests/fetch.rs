//! How the kernel takes a mutation's commit from the agent's workspace
//! (`teneral::gate::fetch`): a body that points its clone at a foreign
//! repository (alternates, symlinked objects and refs, extra branches) gets
//! none of that repository's objects into the main repository, which is
//! asserted by looking them up there afterwards.
//!
//! `take` starts git in the cage through the runner, whose reaper takes
//! every child of its process; so each take runs in a process of its own:
//! this test binary again, running only [`child_takes_one_commit`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use git2::{Oid, Repository, Signature};

use crate::common::*;

const HOME_VAR: &str = "TENERAL_TEST_FETCH_HOME";
const COMMIT_VAR: &str = "TENERAL_TEST_FETCH_COMMIT";

/// The child's half: takes the commit its parent names, prints the outcome.
#[test]
fn child_takes_one_commit() {
    let (Some(home), Some(commit)) = (std::env::var_os(HOME_VAR), std::env::var(COMMIT_VAR).ok())
    else {
        return; // Run by a parent test only.
    };
    let home = PathBuf::from(home);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        teneral::spawn::start_reaper_of_own_children().expect("the reaper starts");
        let cage = teneral::runner::Cage::On { exe: teneral(), pretend_missing: vec![] };
        let runner = teneral::runner::Runner::direct(cage);
        let repo = Repository::open(&home).expect("the main repository opens");
        let running = repo.head().ok().and_then(|h| h.target()).expect("main has a HEAD");
        let limits = teneral::runner::Limits::none(Duration::from_secs(5))
            .with_runtime_max(Some(Duration::from_secs(120)));
        // Text that is no commit never reaches the fetch: the kernel takes
        // a `Commit`, and the channel refuses a request naming anything else.
        let commit = match teneral_core::commit::Commit::parse(&commit) {
            Ok(commit) => commit,
            Err(e) => return println!("\nREFUSED {e}"),
        };
        let taken =
            teneral::gate::fetch::take(&runner, &repo, &home, &commit, &[running], limits).await;
        match taken {
            Ok(oid) => println!("\nTAKEN {oid}"),
            Err(e) => println!("\nREFUSED {}", e.to_string().replace('\n', " | ")),
        }
    });
}

/// What the kernel said of taking `commit` into the individual at `home`.
#[derive(Debug)]
enum Taken {
    Yes(String),
    No(String),
}

fn take(home: &Path, commit: &str) -> Taken {
    let out = Command::new(std::env::current_exe().expect("the test binary is known"))
        .args(["fetch::child_takes_one_commit", "--exact", "--nocapture", "--test-threads=1"])
        .env(HOME_VAR, home)
        .env(COMMIT_VAR, commit)
        .output_within(SLOW)
        .expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if let Some(oid) = line.strip_prefix("TAKEN ") {
            return Taken::Yes(oid.to_owned());
        }
        if let Some(why) = line.strip_prefix("REFUSED ") {
            return Taken::No(why.to_owned());
        }
    }
    panic!("the child said neither: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// An individual (a main repository on `lineage/local` with its workspace)
/// and a foreign repository beside it whose one commit holds a blob the
/// individual has never had.
struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    foreign: PathBuf,
    foreign_commit: Oid,
    foreign_blob: Oid,
}

impl World {
    fn new() -> Option<World> {
        match crate::cage::require_cage() {
            Ok(true) => {}
            Ok(false) => return None,
            Err(why) => panic!("{why}"),
        }
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let (home, foreign) = (dir.path().join("ind"), dir.path().join("foreign"));
        std::fs::create_dir_all(home.join("body")).expect("the body's directory can be made");
        std::fs::write(home.join("body/main.rs"), "fn main() {}\n").expect("a body file");
        let first = commit_all(&home, "first").expect("the main repository commits");
        let repo = Repository::open(&home).expect("the main repository opens");
        let first = repo.find_commit(Oid::from_str(&first).expect("an id")).expect("the commit");
        repo.branch("lineage/local", &first, false).expect("the lineage branch is made");
        teneral::repo::ensure_candidate(&home).expect("the workspace clones");
        std::fs::create_dir_all(&foreign).expect("the foreign directory can be made");
        std::fs::write(foreign.join("secret.txt"), "the foreign secret 5d1c\n").expect("a file");
        let foreign_commit = commit_all(&foreign, "foreign").expect("the foreign repo commits");
        let foreign_commit = Oid::from_str(&foreign_commit).expect("an id");
        let f = Repository::open(&foreign).expect("the foreign repository opens");
        let tree = f.find_commit(foreign_commit).and_then(|c| c.tree()).expect("its tree");
        let foreign_blob = tree.get_name("secret.txt").expect("the secret's entry").id();
        Some(World { _dir: dir, home, foreign, foreign_commit, foreign_blob })
    }

    fn workspace(&self) -> PathBuf {
        self.home.join(".teneral/candidate")
    }

    /// Whether the main repository holds `oid`, asked of its object store.
    fn main_has(&self, oid: Oid) -> bool {
        let repo = Repository::open(&self.home).expect("the main repository opens");
        let odb = repo.odb().expect("the main object store opens");
        odb.exists(oid)
    }

    /// Commits in the workspace a tree of `entries` (`(name, blob)`) over
    /// the lineage's tree, on its HEAD.
    fn commit_in_workspace(&self, entries: &[(&str, Oid)]) -> Oid {
        let ws = Repository::open(self.workspace()).expect("the workspace opens");
        let parent = ws.head().and_then(|h| h.peel_to_commit()).expect("the workspace's HEAD");
        let base = parent.tree().expect("the parent's tree");
        let body = base.get_name("body").expect("body/").to_object(&ws);
        let body = body.and_then(|o| o.peel_to_tree()).expect("body/ is a tree");
        let mut body = ws.treebuilder(Some(&body)).expect("a tree builder");
        for (name, blob) in entries {
            body.insert(name, *blob, 0o100644).expect("an entry is inserted");
        }
        let body = body.write().expect("body/ is written");
        let mut root = ws.treebuilder(Some(&base)).expect("a tree builder");
        root.insert("body", body, 0o040000).expect("body/ is replaced");
        let tree = ws.find_tree(root.write().expect("the root is written")).expect("the tree");
        let sig = Signature::now("agent", "agent@localhost").expect("a signature");
        ws.commit(Some("HEAD"), &sig, &sig, "a mutation", &tree, &[&parent]).expect("commits")
    }

    fn own_blob(&self, text: &str) -> Oid {
        Repository::open(self.workspace()).and_then(|ws| ws.blob(text.as_bytes())).expect("blob")
    }
}

fn refused(taken: Taken, says: &str) {
    match taken {
        Taken::No(why) => assert!(why.contains(says), "the refusal should say {says:?}: {why}"),
        Taken::Yes(oid) => panic!("{oid} was taken; it should have been refused ({says})"),
    }
}

#[test]
fn a_mutation_lands_in_the_main_repository() {
    let Some(w) = World::new() else { return };
    let blob = w.own_blob("fn main() { println!(\"v2\"); }\n");
    let commit = w.commit_in_workspace(&[("main.rs", blob)]);
    assert!(!w.main_has(commit));
    match take(&w.home, &commit.to_string()) {
        Taken::Yes(oid) => assert_eq!(oid, commit.to_string()),
        Taken::No(why) => panic!("the mutation was refused: {why}"),
    }
    assert!(w.main_has(commit) && w.main_has(blob), "the commit and its new blob are there");
    assert!(!w.home.join(teneral::gate::fetch::FETCH_DIR).exists(), "nothing is left behind");
    // Taken again, it is already there and nothing runs.
    assert!(matches!(take(&w.home, &commit.to_string()), Taken::Yes(_)));
}

#[test]
fn alternates_in_the_workspace_bring_nothing_foreign() {
    let Some(w) = World::new() else { return };
    let alternates = w.workspace().join(".git/objects/info/alternates");
    let line = format!("{}\n", w.foreign.join(".git/objects").display());
    std::fs::write(&alternates, line).expect("the body writes alternates");
    // A commit of the body's whose tree names the foreign blob, which only
    // the alternates make reachable; and the foreign commit itself.
    let commit = w.commit_in_workspace(&[("stolen.txt", w.foreign_blob)]);
    refused(take(&w.home, &commit.to_string()), "could not be packed");
    refused(take(&w.home, &w.foreign_commit.to_string()), "could not be packed");
    for oid in [commit, w.foreign_commit, w.foreign_blob] {
        assert!(!w.main_has(oid), "{oid} reached the main repository");
    }
}

#[test]
fn symlinked_objects_and_refs_bring_nothing_foreign() {
    let Some(w) = World::new() else { return };
    let (theirs, ours) = (w.foreign.join(".git/objects"), w.workspace().join(".git/objects"));
    let foreign = Repository::open(&w.foreign).expect("the foreign repository opens");
    let tree = foreign.find_commit(w.foreign_commit).map(|c| c.tree_id()).expect("its tree");
    for oid in [w.foreign_commit, w.foreign_blob, tree] {
        let hex = oid.to_string();
        let (fan, rest) = hex.split_at(2);
        std::fs::create_dir_all(ours.join(fan)).expect("a fan-out directory");
        std::os::unix::fs::symlink(theirs.join(fan).join(rest), ours.join(fan).join(rest))
            .expect("the body links a foreign object");
    }
    let head = foreign.head().expect("the foreign HEAD");
    let branch = head.name().expect("a branch name").to_owned();
    std::os::unix::fs::symlink(
        w.foreign.join(".git").join(&branch),
        w.workspace().join(".git/refs/heads/evil"),
    )
    .expect("the body links a foreign ref");
    let commit = w.commit_in_workspace(&[("stolen.txt", w.foreign_blob)]);
    refused(take(&w.home, &commit.to_string()), "could not be packed");
    refused(take(&w.home, &w.foreign_commit.to_string()), "could not be packed");
    for oid in [commit, w.foreign_commit, w.foreign_blob, tree] {
        assert!(!w.main_has(oid), "{oid} reached the main repository");
    }
}

#[test]
fn extra_branches_of_the_workspace_stay_there() {
    let Some(w) = World::new() else { return };
    // The body holds the foreign history itself, on a branch of its own.
    let ws = Repository::open(w.workspace()).expect("the workspace opens");
    let url = w.foreign.to_string_lossy().into_owned();
    let mut remote = ws.remote_anonymous(&url).expect("a remote");
    remote.fetch(&["+refs/heads/*:refs/heads/foreign/*"], None, None).expect("the body fetches");
    assert!(ws.find_commit(w.foreign_commit).is_ok());
    let blob = w.own_blob("fn main() { println!(\"v3\"); }\n");
    let commit = w.commit_in_workspace(&[("main.rs", blob)]);
    assert!(matches!(take(&w.home, &commit.to_string()), Taken::Yes(_)));
    assert!(w.main_has(commit) && w.main_has(blob));
    assert!(!w.main_has(w.foreign_commit) && !w.main_has(w.foreign_blob), "the branch came too");
}

#[test]
fn a_commit_the_workspace_does_not_hold_is_refused_by_name() {
    let Some(w) = World::new() else { return };
    let absent = "0123456789abcdef0123456789abcdef01234567";
    refused(take(&w.home, absent), &format!("commit {absent} could not be packed"));
    refused(take(&w.home, "0123abc"), "is not a full commit id");
    refused(take(&w.home, "../../etc/passwd"), "is not a full commit id");
}
