//! Taking a mutation's commit from the agent's workspace without opening it.
//!
//! The workspace (`.teneral/candidate`) is the body's: its alternates, refs,
//! configuration and links are whatever the body made them, so the kernel
//! never opens it as a repository with its own rights. Instead:
//! 1. in the cage's `pack` profile (the clone read, one output directory of
//!    the kernel's written, nothing else of the individual, loopback only)
//!    and a bare environment (no system or global git configuration, `HOME`
//!    the output directory), `git pack-objects` packs the commit named and
//!    what it reaches, less what the main repository's running and lineage
//!    commits reach when the clone has them ([`SCRIPT`]);
//! 2. the kernel opens that pack beneath its own directory (no link
//!    followed, a regular file only, [`teneral_core::fsutil::open_beneath`]) and
//!    indexes it in a scratch directory of its own: every object's id is
//!    computed from its bytes;
//! 3. it walks the commit's closure ([`check_closure`]): each object the main
//!    repository lacks must be in the pack, of the kind its parent says, and
//!    each object in the pack must be one the closure needs or the main
//!    repository already has;
//! 4. only then does the pack go into the main repository's object store.
//!
//! Nothing but the commit's full id is named; no ref of the clone is read.
//! With the cage off (`TENERAL_UNSAFE_UNCONFINED=1`) step 1 runs uncaged,
//! so git follows the clone's alternates with the kernel's rights; steps 2-4
//! still keep out every object outside the commit's closure.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Display;
use std::hash::Hash;
use std::path::{Path, PathBuf};

use git2::{Indexer, ObjectType, Odb, Oid, Repository};

use crate::repo::{CANDIDATE_DIR, LINEAGE_BRANCH};
use crate::runner::{self, Launch, Limits, Profile, RunError, Runner};
use crate::spawn::Spec;
use teneral_core::commit::Commit;

/// The kernel's directory for one fetch: `out/` (the cage writes the pack
/// there) and `index/pack/` (the kernel indexes it there). Remade each time.
pub const FETCH_DIR: &str = ".teneral/gate/fetch";

/// The pack's name in `out/`.
pub const PACK_FILE: &str = "candidate.pack";

/// The largest pack taken: far above any body's change.
pub const MAX_PACK: u64 = 1 << 30;

/// What runs in the cage, as `sh -c SCRIPT sh <pack> <commit> <base>...`:
/// the commit, and `^base` for each base the clone has (a clone that lacks
/// one packs more, never less).
pub const SCRIPT: &str = r#"out=$1; commit=$2; shift 2
{ echo "$commit"
  for base in "$@"; do git cat-file -e "$base^{commit}" 2>/dev/null && echo "^$base"; done
} | git pack-objects --revs --stdout > "$out""#;

const NEXT: &str = "commit in .teneral/candidate on lineage/local, with every object in that \
                    clone itself (no alternates, no links), and ask again with the full id";

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0} is a SHA-256 commit id, which this kernel's git cannot read yet; use a SHA-1 repository")]
    BadId(String),
    #[error("cannot prepare {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot start git in the cage to pack the commit: {0}")]
    Start(RunError),
    #[error(
        "commit {commit} could not be packed from .teneral/candidate ({how}): {output}; {NEXT}"
    )]
    Pack { commit: Commit, how: String, output: String },
    #[error("the pack made from .teneral/candidate cannot be taken: {0}; {NEXT}")]
    Open(std::io::Error),
    #[error("the pack made from .teneral/candidate is not a valid pack: {0}; {NEXT}")]
    Index(git2::Error),
    #[error("commit {commit} is not complete in .teneral/candidate: {gap}; {NEXT}")]
    Gap { commit: Commit, gap: Gap<Oid> },
    #[error("git ({what}): {source}")]
    Git { what: &'static str, source: git2::Error },
}

/// The kind of an object, as its parent names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
}

/// What the walk needs of one object of the pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Obj<Id> {
    Commit {
        tree: Id,
        parents: Vec<Id>,
    },
    /// A tree's entries; submodule links (which point outside) left out.
    Tree(Vec<(Id, Kind)>),
    Blob,
    /// A tag or what git2 does not know.
    Other,
}

/// Why a pack does not hold exactly a commit's closure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Gap<Id: Display> {
    #[error("the commit itself is not there (is it committed in that clone?)")]
    NotInPack,
    #[error("{kind:?} {id}, which it reaches, is neither in the pack nor in the main repository")]
    Missing { id: Id, kind: Kind },
    #[error("{id} should be a {want:?} and is not")]
    WrongKind { id: Id, want: Kind },
    #[error("the pack holds {count} object(s) the commit does not reach, e.g. {example}")]
    Extra { count: usize, example: Id },
}

/// Checks that the objects `in_pack` are exactly the closure of `commit`
/// less what the main repository has (`in_main`, trusted complete beneath
/// every object it holds). `read` reads an object of the pack.
pub fn check_closure<Id: Copy + Eq + Hash + Display>(
    commit: Id,
    in_pack: &[Id],
    in_main: impl Fn(Id) -> bool,
    read: impl Fn(Id) -> Option<Obj<Id>>,
) -> Result<(), Gap<Id>> {
    // An id names one object of one kind; reached as two kinds, one is wrong.
    let mut seen: HashMap<Id, Kind> = HashMap::new();
    let mut todo = vec![(commit, Kind::Commit)];
    while let Some((id, want)) = todo.pop() {
        if in_main(id) {
            continue;
        }
        match seen.insert(id, want) {
            Some(kind) if kind == want => continue,
            Some(_) => return Err(Gap::WrongKind { id, want }),
            None => {}
        }
        let Some(obj) = read(id) else {
            return Err(if id == commit {
                Gap::NotInPack
            } else {
                Gap::Missing { id, kind: want }
            });
        };
        match (obj, want) {
            (Obj::Commit { tree, parents }, Kind::Commit) => {
                todo.push((tree, Kind::Tree));
                todo.extend(parents.into_iter().map(|p| (p, Kind::Commit)));
            }
            (Obj::Tree(entries), Kind::Tree) => todo.extend(entries),
            (Obj::Blob, Kind::Blob) => {}
            _ => return Err(Gap::WrongKind { id, want }),
        }
    }
    let extra: Vec<Id> =
        in_pack.iter().copied().filter(|id| !seen.contains_key(id) && !in_main(*id)).collect();
    match extra.first() {
        Some(&example) => Err(Gap::Extra { count: extra.len(), example }),
        None => Ok(()),
    }
}

/// Brings `candidate` (a full commit id) from the agent's workspace into the
/// main repository `repo` of `home`, as the module says; `bases` are commits
/// of the main repository the clone likely has (the running generation's).
/// Returns the commit. A commit the main repository already has is taken as
/// it is, and nothing runs.
pub async fn take(
    runner: &Runner,
    repo: &Repository,
    home: &Path,
    candidate: &Commit,
    bases: &[Oid],
    limits: Limits,
) -> Result<Oid, FetchError> {
    let oid = Oid::from_str(candidate).map_err(|_| FetchError::BadId(candidate.to_string()))?;
    if repo.find_commit(oid).is_ok() {
        return Ok(oid);
    }
    let dir = home.join(FETCH_DIR);
    let result = take_into(runner, repo, home, &dir, oid, bases, limits).await;
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| oid)
}

async fn take_into(
    runner: &Runner,
    repo: &Repository,
    home: &Path,
    dir: &Path,
    oid: Oid,
    bases: &[Oid],
    limits: Limits,
) -> Result<(), FetchError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| FetchError::Io { path, source }
    };
    let (out, scratch) = (dir.join("out"), dir.join("index"));
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io(dir))?;
    }
    std::fs::create_dir_all(&out).map_err(io(&out))?;
    std::fs::create_dir_all(scratch.join("pack")).map_err(io(&scratch))?;
    let mut bases = bases.to_vec();
    if let Some(tip) = repo
        .find_branch(LINEAGE_BRANCH, git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().target())
    {
        bases.push(tip);
    }
    bases.dedup();
    pack_in_cage(runner, home, &out, oid, &bases, limits).await?;
    let main =
        repo.odb().map_err(|source| FetchError::Git { what: "open the object store", source })?;
    index(&out, &scratch.join("pack"), &main)?;
    let scratch_repo = scratch_repository(&scratch)?;
    let mut in_pack = Vec::new();
    scratch_repo
        .odb()
        .and_then(|odb| {
            odb.foreach(|id| {
                in_pack.push(*id);
                true
            })
        })
        .map_err(|source| FetchError::Git { what: "list the pack", source })?;
    check_closure(oid, &in_pack, |id| main.exists(id), |id| read(&scratch_repo, id))
        .map_err(|gap| FetchError::Gap { commit: crate::repo::commit_of(oid), gap })?;
    store(&main, &scratch.join("pack"))?;
    repo.find_commit(oid)
        .map(|_| ())
        .map_err(|source| FetchError::Git { what: "find the commit taken", source })
}

/// Runs [`SCRIPT`] in the `pack` profile over the workspace.
async fn pack_in_cage(
    runner: &Runner,
    home: &Path,
    out: &Path,
    oid: Oid,
    bases: &[Oid],
    limits: Limits,
) -> Result<(), FetchError> {
    let source = home.join(CANDIDATE_DIR);
    let pack = out.join(PACK_FILE);
    let mut spec = Spec::new("sh", &source).arg("-c").arg(SCRIPT).arg("sh").arg(&pack);
    spec.args.push(oid.to_string().into());
    spec.args.extend(bases.iter().map(|b| OsString::from(b.to_string())));
    spec.env = bare_git_env(&source, out);
    let profile = Profile::Pack { source: source.clone(), out: out.to_owned() };
    let unit = runner::systemd::gate_unit(&crate::repo::commit_of(oid), "pack");
    let (ended, running) = runner
        .run(&unit, Launch::new(spec, limits).caged(profile))
        .await
        .map_err(FetchError::Start)?;
    if ended.exit.success() {
        return Ok(());
    }
    let how = match ended.cage_step() {
        Some(step) => format!("{}; {step}", ended.exit),
        None if ended.over_time => format!("stopped after its time limit, {}", ended.exit),
        None => ended.exit.to_string(),
    };
    Err(FetchError::Pack {
        commit: crate::repo::commit_of(oid),
        how,
        output: running.stderr_tail(),
    })
}

/// git's environment in the cage: nothing of the kernel's but `PATH`, no
/// system or global configuration, no replacement objects, no prompt, no
/// lazy fetch; the clone named explicitly.
pub fn bare_git_env(source: &Path, out: &Path) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> =
        std::env::var_os("PATH").map(|p| ("PATH".to_owned(), p)).into_iter().collect();
    let fixed: [(&str, OsString); 11] = [
        ("HOME", out.into()),
        ("XDG_CONFIG_HOME", out.into()),
        ("GIT_DIR", source.join(".git").into()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        // The clone's owner may differ from the cage's user (a root kernel).
        ("GIT_CONFIG_COUNT", "1".into()),
        ("GIT_CONFIG_KEY_0", "safe.directory".into()),
        ("GIT_CONFIG_VALUE_0", "*".into()),
        ("GIT_NO_REPLACE_OBJECTS", "1".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_NO_LAZY_FETCH", "1".into()),
    ];
    env.extend(fixed.into_iter().map(|(k, v)| (k.to_owned(), v)));
    env
}

/// Indexes the pack the cage wrote into `pack_dir`, a directory of the
/// kernel's: a regular file beneath `out`, no link followed, a bounded size.
/// The indexer checks that every object the pack's objects name is in the
/// pack or in `main` (the pack leaves out what the bases reach).
fn index(out: &Path, pack_dir: &Path, main: &Odb<'_>) -> Result<(), FetchError> {
    let mut pack =
        teneral_core::fsutil::open_beneath(out, Path::new(PACK_FILE)).map_err(FetchError::Open)?;
    let len = pack.metadata().map_err(FetchError::Open)?.len();
    if len > MAX_PACK {
        return Err(FetchError::Open(std::io::Error::other(format!(
            "it is {len} bytes, more than the {MAX_PACK} a mutation may bring"
        ))));
    }
    let mut indexer = Indexer::new(Some(main), pack_dir, 0o600, true).map_err(FetchError::Index)?;
    std::io::copy(&mut pack, &mut indexer).map_err(|e| match e.into_inner() {
        Some(inner) => match inner.downcast::<git2::Error>() {
            Ok(git) => FetchError::Index(*git),
            Err(other) => FetchError::Open(std::io::Error::other(other)),
        },
        None => FetchError::Open(std::io::Error::other("reading the pack failed")),
    })?;
    indexer.commit().map(|_| ()).map_err(FetchError::Index)
}

/// A repository over the scratch object store alone (the pack just indexed).
fn scratch_repository(scratch: &Path) -> Result<Repository, FetchError> {
    let git = |what| move |source| FetchError::Git { what, source };
    let path = scratch.to_str().ok_or_else(|| FetchError::Io {
        path: scratch.to_owned(),
        source: std::io::Error::other("the individual's path is not UTF-8"),
    })?;
    let odb = Odb::new().map_err(git("make a scratch object store"))?;
    odb.add_disk_alternate(path).map_err(git("open the scratch object store"))?;
    Repository::from_odb(odb).map_err(git("open the scratch object store"))
}

/// One object of the pack, as [`check_closure`] needs it.
fn read(scratch: &Repository, id: Oid) -> Option<Obj<Oid>> {
    let object = scratch.find_object(id, None).ok()?;
    Some(match object.kind() {
        Some(ObjectType::Commit) => {
            let commit = object.as_commit()?;
            Obj::Commit { tree: commit.tree_id(), parents: commit.parent_ids().collect() }
        }
        Some(ObjectType::Tree) => {
            let tree = object.as_tree()?;
            Obj::Tree(
                tree.iter()
                    .filter_map(|entry| match entry.kind() {
                        Some(ObjectType::Tree) => Some((entry.id(), Kind::Tree)),
                        Some(ObjectType::Blob) => Some((entry.id(), Kind::Blob)),
                        // A submodule's commit is not part of this repository.
                        _ => None,
                    })
                    .collect(),
            )
        }
        Some(ObjectType::Blob) => Obj::Blob,
        _ => Obj::Other,
    })
}

/// Writes the checked pack into the main object store.
fn store(main: &Odb<'_>, pack_dir: &Path) -> Result<(), FetchError> {
    let io = |source| FetchError::Io { path: pack_dir.to_owned(), source };
    let pack = std::fs::read_dir(pack_dir)
        .map_err(io)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .ok_or_else(|| io(std::io::Error::other("the indexed pack is gone")))?;
    let mut file = std::fs::File::open(&pack).map_err(io)?;
    let mut writer =
        main.packwriter().map_err(|source| FetchError::Git { what: "write the pack", source })?;
    std::io::copy(&mut file, &mut writer).map_err(io)?;
    writer.commit().map(|_| ()).map_err(|source| FetchError::Git { what: "write the pack", source })
}

#[cfg(test)]
mod tests;
