//! The power-cut check's crash model: from the file-system operations a
//! transition made (in order), the states of the individual's files a power
//! cut could leave, and the files of one such state.
//!
//! The model (docs/design.md, "Power cuts"): a file's content is what its
//! last `fsync`/`fdatasync` made durable, plus any prefix of the writes and
//! truncations made after it, the last write possibly torn in two; a
//! directory's entries are those its last `fsync` made durable, plus any
//! prefix of the creations, renames and removals made in it after that; a
//! rename is whole or absent (a rename across directories belongs to its
//! target's directory); `sync`/`syncfs` make everything durable. Files and
//! directories are independent of each other, which is weaker than ext4's
//! journal (which commits metadata in order) and what POSIX allows.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// A file-system operation of the record, paths relative to the
/// individual's directory (`""` is the directory itself).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `open`: `create` with `O_CREAT` (a new empty file when the name is
    /// free), `truncate` with `O_TRUNC`.
    Open {
        path: String,
        create: bool,
        truncate: bool,
    },
    Mkdir {
        path: String,
    },
    /// At `offset`, or at the end (`O_APPEND`) when none.
    Write {
        path: String,
        offset: Option<u64>,
        data: Vec<u8>,
    },
    Truncate {
        path: String,
        len: u64,
    },
    Rename {
        from: String,
        to: String,
    },
    /// A second name for a file (`link`).
    Link {
        from: String,
        to: String,
    },
    /// `unlink` or `rmdir`.
    Remove {
        path: String,
    },
    /// `fsync` or `fdatasync` of a file or a directory.
    Sync {
        path: String,
    },
    /// `sync` or `syncfs`.
    SyncAll,
}

type Id = usize;

#[derive(Clone, Debug)]
enum Data {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

/// One change of a directory's entries: names set to a node or removed;
/// several for a rename, which is whole or absent.
#[derive(Clone, Debug)]
struct Change(Vec<(Id, String, Option<Id>)>);

#[derive(Clone, Debug)]
enum Node {
    File {
        synced: Vec<u8>,
        pending: Vec<Data>,
        now: Vec<u8>,
        mode: u32,
    },
    Dir {
        synced: BTreeMap<String, Id>,
        pending: Vec<Change>,
        now: BTreeMap<String, Id>,
    },
    /// Outside the model (a link, a checkout, a build target): taken from
    /// the base as it was, at its path there.
    Kept(String),
}

/// What a path holds in a crash state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    Dir,
    /// Content and permission bits.
    File(Vec<u8>, u32),
    /// Copied from the base's path.
    Kept(String),
}

/// The individual's files as the model sees them while a record is replayed.
#[derive(Clone, Debug)]
pub struct Fs {
    nodes: Vec<Node>,
    /// A path whose syncs are taken as never made (a deliberately broken
    /// rule, to prove the check reports what it breaks).
    pub skip_sync_of: Option<String>,
    /// Operations on a path the model does not hold, passed over.
    pub passed_over: usize,
}

fn data_of(content: &[u8], data: &Data) -> Vec<u8> {
    let mut out = content.to_vec();
    match data {
        Data::Write(at, bytes) => {
            let at = *at as usize;
            if out.len() < at + bytes.len() {
                out.resize(at + bytes.len(), 0);
            }
            out[at..at + bytes.len()].copy_from_slice(bytes);
        }
        Data::Truncate(len) => out.resize(*len as usize, 0),
    }
    out
}

fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

impl Fs {
    /// An empty directory, for tests of the model.
    pub fn empty() -> Fs {
        let root = Node::Dir { synced: BTreeMap::new(), pending: Vec::new(), now: BTreeMap::new() };
        Fs { nodes: vec![root], skip_sync_of: None, passed_over: 0 }
    }

    /// The tree at `base`, durable; paths for which `kept` holds (and links
    /// and special files) are taken whole from the base.
    pub fn from_base(base: &Path, kept: &dyn Fn(&str) -> bool) -> std::io::Result<Fs> {
        let mut fs = Fs::empty();
        let mut dirs = vec![(0, String::new())];
        while let Some((id, rel)) = dirs.pop() {
            for entry in std::fs::read_dir(base.join(&rel))? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
                let kind = entry.file_type()?;
                let node = if kept(&path) || kind.is_symlink() {
                    Node::Kept(path.clone())
                } else if kind.is_dir() {
                    dirs.push((fs.nodes.len(), path.clone()));
                    Node::Dir { synced: BTreeMap::new(), pending: Vec::new(), now: BTreeMap::new() }
                } else if kind.is_file() {
                    let bytes = std::fs::read(entry.path())?;
                    let mode =
                        std::os::unix::fs::PermissionsExt::mode(&entry.metadata()?.permissions());
                    Node::File { synced: bytes.clone(), pending: Vec::new(), now: bytes, mode }
                } else {
                    continue;
                };
                let child = fs.nodes.len();
                fs.nodes.push(node);
                if let Node::Dir { synced, now, .. } = &mut fs.nodes[id] {
                    synced.insert(name.clone(), child);
                    now.insert(name, child);
                }
            }
        }
        Ok(fs)
    }

    /// The node at `path` now, if the model holds it.
    fn lookup(&self, path: &str) -> Option<Id> {
        let mut id = 0;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            match &self.nodes[id] {
                Node::Dir { now, .. } => id = *now.get(part)?,
                _ => return None,
            }
        }
        Some(id)
    }

    fn change(&mut self, dir: Id, change: Change) {
        for (d, name, to) in &change.0 {
            if let Node::Dir { now, .. } = &mut self.nodes[*d] {
                match to {
                    Some(id) => now.insert(name.clone(), *id),
                    None => now.remove(name),
                };
            }
        }
        if let Node::Dir { pending, .. } = &mut self.nodes[dir] {
            pending.push(change);
        }
    }

    fn data(&mut self, id: Id, data: Data) {
        if let Node::File { pending, now, .. } = &mut self.nodes[id] {
            *now = data_of(now, &data);
            pending.push(data);
        }
    }

    fn sync(&mut self, id: Id) {
        match &mut self.nodes[id] {
            Node::File { synced, pending, now, .. } => {
                synced.clone_from(now);
                pending.clear();
            }
            Node::Dir { synced, pending, now } => {
                synced.clone_from(now);
                pending.clear();
            }
            Node::Kept(_) => {}
        }
    }

    /// Applies one operation as the running system saw it.
    pub fn apply(&mut self, op: &Op) {
        let done = match op {
            Op::Open { path, create, truncate } => self.open(path, *create, *truncate),
            Op::Mkdir { path } => self.make(
                path,
                Node::Dir { synced: BTreeMap::new(), pending: Vec::new(), now: BTreeMap::new() },
            ),
            Op::Write { path, offset, data } => match self.lookup(path) {
                Some(id) => {
                    let at = match (&self.nodes[id], offset) {
                        (_, Some(at)) => *at,
                        (Node::File { now, .. }, None) => now.len() as u64,
                        _ => 0,
                    };
                    self.data(id, Data::Write(at, data.clone()));
                    true
                }
                None => false,
            },
            Op::Truncate { path, len } => match self.lookup(path) {
                Some(id) => {
                    self.data(id, Data::Truncate(*len));
                    true
                }
                None => false,
            },
            Op::Rename { from, to } => self.rename(from, to),
            Op::Link { from, to } => {
                let (to_dir, to_name) = split(to);
                match (self.lookup(from), self.lookup(to_dir)) {
                    (Some(node), Some(td)) => {
                        self.change(td, Change(vec![(td, to_name.to_owned(), Some(node))]));
                        true
                    }
                    _ => false,
                }
            }
            Op::Remove { path } => {
                let (dir, name) = split(path);
                match (self.lookup(dir), self.lookup(path)) {
                    (Some(d), Some(_)) => {
                        self.change(d, Change(vec![(d, name.to_owned(), None)]));
                        true
                    }
                    _ => false,
                }
            }
            Op::Sync { path } => match self.lookup(path) {
                Some(_) if self.skip_sync_of.as_deref() == Some(path.as_str()) => true,
                Some(id) => {
                    self.sync(id);
                    true
                }
                None => false,
            },
            Op::SyncAll => {
                for id in 0..self.nodes.len() {
                    self.sync(id);
                }
                true
            }
        };
        if !done {
            self.passed_over += 1;
        }
    }

    fn open(&mut self, path: &str, create: bool, truncate: bool) -> bool {
        match self.lookup(path) {
            Some(id) => {
                if truncate {
                    self.data(id, Data::Truncate(0));
                }
                true
            }
            None if create => self.make(
                path,
                Node::File {
                    synced: Vec::new(),
                    pending: Vec::new(),
                    now: Vec::new(),
                    mode: 0o644,
                },
            ),
            None => false,
        }
    }

    fn make(&mut self, path: &str, node: Node) -> bool {
        let (dir, name) = split(path);
        let Some(d) = self.lookup(dir).filter(|d| matches!(self.nodes[*d], Node::Dir { .. }))
        else {
            return false;
        };
        let id = self.nodes.len();
        self.nodes.push(node);
        self.change(d, Change(vec![(d, name.to_owned(), Some(id))]));
        true
    }

    fn rename(&mut self, from: &str, to: &str) -> bool {
        let ((from_dir, from_name), (to_dir, to_name)) = (split(from), split(to));
        let (Some(fd), Some(node)) = (self.lookup(from_dir), self.lookup(from)) else {
            return false;
        };
        match self.lookup(to_dir) {
            Some(td) => {
                let mut changes = vec![(fd, from_name.to_owned(), None)];
                changes.push((td, to_name.to_owned(), Some(node)));
                self.change(td, Change(changes));
            }
            // Out of the model: a removal.
            None => self.change(fd, Change(vec![(fd, from_name.to_owned(), None)])),
        }
        true
    }

    /// What is not yet durable: for each node with pending operations, how
    /// many choices a crash has (a prefix of its operations; for a file, the
    /// last one also torn).
    pub fn pending(&self) -> Vec<(Id, usize)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(id, node)| match node {
                Node::File { pending, .. } if !pending.is_empty() => {
                    Some((id, 2 * pending.len() + 1))
                }
                Node::Dir { pending, .. } if !pending.is_empty() => Some((id, pending.len() + 1)),
                _ => None,
            })
            .collect()
    }

    /// The tree a crash leaves when each pending node keeps the prefix its
    /// choice names (`choice[i]` for `pending()[i]`, below its count).
    pub fn crash(&self, choice: &[usize]) -> BTreeMap<String, Entry> {
        let pending = self.pending();
        let kept: BTreeMap<Id, usize> =
            pending.iter().zip(choice).map(|((id, _), c)| (*id, *c)).collect();
        // Directories' entries after the chosen prefixes.
        let mut entries: BTreeMap<Id, BTreeMap<String, Id>> = BTreeMap::new();
        for (id, node) in self.nodes.iter().enumerate() {
            if let Node::Dir { synced, .. } = node {
                entries.insert(id, synced.clone());
            }
        }
        for (id, node) in self.nodes.iter().enumerate() {
            if let Node::Dir { pending, .. } = node {
                let n = kept.get(&id).copied().unwrap_or(0);
                for Change(changes) in pending.iter().take(n) {
                    for (d, name, to) in changes {
                        let dir = entries.entry(*d).or_default();
                        match to {
                            Some(node) => dir.insert(name.clone(), *node),
                            None => dir.remove(name),
                        };
                    }
                }
            }
        }
        let mut tree = BTreeMap::new();
        let mut walk = vec![(0, String::new())];
        let mut seen = BTreeSet::new();
        while let Some((id, path)) = walk.pop() {
            if !seen.insert(id) {
                continue;
            }
            for (name, child) in entries.get(&id).into_iter().flatten() {
                let p = if path.is_empty() { name.clone() } else { format!("{path}/{name}") };
                let entry = match &self.nodes[*child] {
                    Node::Dir { .. } => {
                        walk.push((*child, p.clone()));
                        Entry::Dir
                    }
                    Node::File { synced, pending, mode, .. } => {
                        let c = kept.get(child).copied().unwrap_or(0);
                        let mut content = synced.clone();
                        for data in pending.iter().take(c / 2) {
                            content = data_of(&content, data);
                        }
                        if let (1, Some(Data::Write(at, bytes))) = (c % 2, pending.get(c / 2)) {
                            let torn = Data::Write(*at, bytes[..bytes.len() / 2].to_vec());
                            content = data_of(&content, &torn);
                        }
                        Entry::File(content, *mode)
                    }
                    Node::Kept(from) => Entry::Kept(from.clone()),
                };
                tree.insert(p, entry);
            }
        }
        tree
    }
}

/// A fingerprint of a crash tree, to count distinct states.
pub fn fingerprint(tree: &BTreeMap<String, Entry>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tree.hash(&mut h);
    h.finish()
}

/// The choices to try at one crash point, `counts` the pending nodes'
/// numbers of choices: all of them when there are at most `all_up_to`;
/// else the corners (nothing pending kept, all kept, each node alone
/// without its pending operations or alone with them) and `random` more
/// drawn from `seed`. Also the number of states the point has (saturated).
pub fn choices(
    counts: &[usize],
    all_up_to: u128,
    random: usize,
    seed: u64,
) -> (u128, Vec<Vec<usize>>) {
    let total = counts.iter().fold(1u128, |t, c| t.saturating_mul(*c as u128));
    if total <= all_up_to {
        let mut all = vec![Vec::new()];
        for c in counts {
            all = all
                .into_iter()
                .flat_map(|prefix| {
                    (0..*c).map(move |k| {
                        let mut v = prefix.clone();
                        v.push(k);
                        v
                    })
                })
                .collect();
        }
        return (total, all);
    }
    let most: Vec<usize> = counts.iter().map(|c| c - 1).collect();
    let none = vec![0; counts.len()];
    let mut out = vec![none.clone(), most.clone()];
    for i in 0..counts.len() {
        let mut v = most.clone();
        v[i] = 0;
        out.push(v);
        let mut v = none.clone();
        v[i] = most[i];
        out.push(v);
    }
    let mut x = seed | 1;
    for _ in 0..random {
        out.push(
            counts
                .iter()
                .map(|c| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % *c as u64) as usize
                })
                .collect(),
        );
    }
    (total, out)
}

/// Writes `tree` under `to` (an empty directory), taking kept entries
/// from `base`.
pub fn materialise(tree: &BTreeMap<String, Entry>, base: &Path, to: &Path) -> std::io::Result<()> {
    // Parents come before their children in the map's order ("a" < "a/b").
    for (path, entry) in tree {
        let target: PathBuf = to.join(path);
        match entry {
            Entry::Dir => std::fs::create_dir_all(&target)?,
            Entry::File(bytes, mode) => {
                std::fs::write(&target, bytes)?;
                let permissions = std::os::unix::fs::PermissionsExt::from_mode(*mode);
                std::fs::set_permissions(&target, permissions)?;
            }
            Entry::Kept(from) => copy_whole(&base.join(from), &target)?,
        }
    }
    Ok(())
}

/// Copies a file, link or tree as it is (`cp -a`, within a time limit).
fn copy_whole(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new("timeout")
        .args(["120", "cp", "-a", "--"])
        .arg(from)
        .arg(to)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("cp -a {} {}: {status}", from.display(), to.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tree: &BTreeMap<String, Entry>, path: &str) -> Option<String> {
        match tree.get(path)? {
            Entry::File(b, _) => Some(String::from_utf8_lossy(b).into_owned()),
            other => Some(format!("{other:?}")),
        }
    }

    /// Every state a crash after `ops` can leave, as the content of `path`
    /// (None: absent).
    fn outcomes(ops: &[Op], path: &str) -> BTreeSet<Option<String>> {
        let mut fs = Fs::empty();
        fs.apply(&Op::Mkdir { path: "d".into() });
        fs.apply(&Op::Open { path: "d/f".into(), create: true, truncate: false });
        fs.apply(&Op::Write { path: "d/f".into(), offset: None, data: b"old".to_vec() });
        fs.apply(&Op::SyncAll);
        for op in ops {
            fs.apply(op);
        }
        let counts: Vec<usize> = fs.pending().iter().map(|(_, c)| *c).collect();
        let (_, all) = choices(&counts, u128::MAX, 0, 1);
        all.iter().map(|c| file(&fs.crash(c), path)).collect()
    }

    fn write_new(synced_file: bool, synced_dir: bool) -> Vec<Op> {
        let mut ops = vec![
            Op::Open { path: "d/.f.tmp-1".into(), create: true, truncate: false },
            Op::Write { path: "d/.f.tmp-1".into(), offset: None, data: b"new".to_vec() },
        ];
        if synced_file {
            ops.push(Op::Sync { path: "d/.f.tmp-1".into() });
        }
        ops.push(Op::Rename { from: "d/.f.tmp-1".into(), to: "d/f".into() });
        if synced_dir {
            ops.push(Op::Sync { path: "d".into() });
        }
        ops
    }

    type Outcomes = BTreeSet<Option<String>>;

    fn set(items: &[Option<&str>]) -> BTreeSet<Option<String>> {
        items.iter().map(|i| i.map(str::to_owned)).collect()
    }

    #[test]
    fn what_a_power_cut_leaves_of_a_file_replaced() {
        let table: [(&str, Vec<Op>, Outcomes); 5] = [
            ("nothing done", vec![], set(&[Some("old")])),
            ("synced, renamed, directory synced", write_new(true, true), set(&[Some("new")])),
            ("synced, renamed", write_new(true, false), set(&[Some("old"), Some("new")])),
            (
                "renamed unsynced: empty or torn too",
                write_new(false, true),
                set(&[Some(""), Some("n"), Some("new")]),
            ),
            (
                "appended, not synced",
                vec![Op::Write { path: "d/f".into(), offset: None, data: b"+more".to_vec() }],
                set(&[Some("old"), Some("old+m"), Some("old+more")]),
            ),
        ];
        for (what, ops, want) in table {
            assert_eq!(outcomes(&ops, "d/f"), want, "{what}");
        }
    }

    #[test]
    fn a_file_linked_into_place_then_unlinked_is_there_once_its_directory_is_synced() {
        let ops = [
            Op::Open { path: "d/tmp".into(), create: true, truncate: false },
            Op::Write { path: "d/tmp".into(), offset: None, data: b"obj".to_vec() },
            Op::Link { from: "d/tmp".into(), to: "d/o".into() },
            Op::Remove { path: "d/tmp".into() },
        ];
        let unsynced = outcomes(&ops, "d/o");
        assert_eq!(unsynced, set(&[None, Some(""), Some("o"), Some("obj")]));
        let mut synced = ops.to_vec();
        synced.insert(2, Op::Sync { path: "d/tmp".into() });
        synced.push(Op::Sync { path: "d".into() });
        assert_eq!(outcomes(&synced, "d/o"), set(&[Some("obj")]));
        assert_eq!(outcomes(&synced, "d/tmp"), set(&[None]));
    }

    #[test]
    fn a_ref_moved_as_libgit2_moves_it_can_be_left_empty_unless_synced() {
        // A lock file written, renamed over the ref; libgit2 syncs neither
        // unless asked to (GIT_OPT_ENABLE_FSYNC_GITDIR).
        let moved = |synced: bool| {
            let mut ops = vec![
                Op::Open { path: "d/f.lock".into(), create: true, truncate: false },
                Op::Write { path: "d/f.lock".into(), offset: None, data: b"new".to_vec() },
                Op::Rename { from: "d/f.lock".into(), to: "d/f".into() },
            ];
            if synced {
                ops.insert(2, Op::Sync { path: "d/f.lock".into() });
                ops.push(Op::Sync { path: "d".into() });
            }
            outcomes(&ops, "d/f")
        };
        assert!(moved(false).contains(&Some(String::new())), "{:?}", moved(false));
        assert_eq!(moved(true), set(&[Some("new")]));
    }

    #[test]
    fn a_removal_is_durable_only_once_its_directory_is_synced() {
        let remove = Op::Remove { path: "d/f".into() };
        assert_eq!(outcomes(std::slice::from_ref(&remove), "d/f"), set(&[Some("old"), None]));
        let synced = [remove, Op::Sync { path: "d".into() }];
        assert_eq!(outcomes(&synced, "d/f"), set(&[None]));
    }

    #[test]
    fn a_sync_taken_as_never_made_leaves_the_write_undone_too() {
        let mut fs = Fs::empty();
        fs.skip_sync_of = Some("j".into());
        fs.apply(&Op::Open { path: "j".into(), create: true, truncate: false });
        fs.apply(&Op::SyncAll);
        fs.apply(&Op::Write { path: "j".into(), offset: None, data: b"line\n".to_vec() });
        fs.apply(&Op::Sync { path: "j".into() });
        let counts: Vec<usize> = fs.pending().iter().map(|(_, c)| *c).collect();
        assert_eq!(counts, vec![3], "the write is still pending");
        assert_eq!(file(&fs.crash(&[0]), "j").as_deref(), Some(""));
    }

    #[test]
    fn choices_are_all_of_them_or_corners_and_a_sample() {
        let (total, all) = choices(&[2, 3], 100, 0, 1);
        assert_eq!((total, all.len()), (6, 6));
        let (total, some) = choices(&[2, 3, 5], 10, 4, 1);
        assert_eq!(total, 30);
        assert_eq!(some.len(), 2 + 2 * 3 + 4);
        assert!(some.contains(&vec![0, 0, 0]) && some.contains(&vec![1, 2, 4]));
        assert!(some.iter().all(|v| v.iter().zip([2, 3, 5]).all(|(k, c)| *k < c)));
    }

    #[test]
    fn an_operation_outside_the_model_is_passed_over() {
        let mut fs = Fs::empty();
        fs.apply(&Op::Write { path: "nowhere".into(), offset: None, data: b"x".to_vec() });
        fs.apply(&Op::Open { path: "missing/f".into(), create: true, truncate: false });
        assert_eq!(fs.passed_over, 2);
        assert!(fs.crash(&[]).is_empty());
    }
}
