//! What an archive entry may be: pure rules over entry names and a model of
//! the tree written so far.
//!
//! [`normalize`] turns an entry's name (after PAX and GNU long names) into
//! the path it would be written at, or refuses it. [`Tree`] remembers what
//! every name became (directory, file, symlink) and decides whether the next
//! entry may be written: its parents must be directories (never a link, never
//! a file), its name new, a hard link must name a file written before it, and
//! a symlink must resolve inside the tree the way the kernel would resolve it,
//! following every link it meets. Because a later entry can change what an
//! earlier link resolves to, [`Tree::escaping_link`] checks every link again
//! against the finished tree before the tree is accepted.

use std::collections::HashMap;

/// The kernel's own bound on symlinks followed in one resolution (ELOOP).
const MAX_HOPS: usize = 40;
/// The longest name or link target (PATH_MAX less its NUL).
pub const MAX_NAME: usize = 4095;
/// The longest component of a name (NAME_MAX).
const MAX_COMPONENT: usize = 255;
/// Components one resolution may walk, and all resolutions of one archive
/// together: a bound on the work a hostile archive can ask for.
const MAX_STEPS: usize = 4096;
const MAX_TOTAL_STEPS: usize = 4 << 20;

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("its name is empty")]
    EmptyName,
    #[error("its name or link target holds a NUL byte")]
    Nul,
    #[error("its name or link target is longer than 4095 bytes, or has a part longer than 255")]
    TooLong,
    #[error("it is a symlink to {0:?}, which takes too long to resolve")]
    LinkCost(String),
    #[error("its name is absolute")]
    Absolute,
    #[error("its name climbs out with ..")]
    Climbs,
    #[error("a second entry for a name already written")]
    Duplicate,
    #[error("it would be written through the link {0:?}")]
    ThroughLink(String),
    #[error("it would be written inside the file {0:?}")]
    ThroughFile(String),
    #[error("it is a symlink to {0:?}, which leads out of the tree")]
    LinkOut(String),
    #[error("it is a symlink to {0:?}, and the links it leads through form a loop")]
    LinkLoop(String),
    #[error("it is a hard link to {0:?}, which leads out of the tree")]
    HardLinkOut(String),
    #[error("it is a hard link to {0:?}, which is not a file written before it")]
    HardLinkTarget(String),
    #[error("it is a {0}; only files, directories and links are allowed")]
    Type(&'static str),
    #[error("it is a link without a target")]
    NoTarget,
    #[error("its PAX size {pax} disagrees with its header size {header}")]
    PaxSize { pax: u64, header: u64 },
    #[error("it gives its {0} twice (a GNU long name and a PAX record)")]
    TwoNames(&'static str),
    #[error("its metadata header is {0} bytes; at most 65536 are allowed")]
    MetadataTooLarge(u64),
    #[error("it is a sparse file in a form this unpacker does not read ({0})")]
    Sparse(&'static str),
    #[error("the archive unpacks to more than 1 GiB (counted from declared sizes)")]
    TooLarge,
    #[error("the archive has more than 20000 entries")]
    TooMany,
}

/// What a name became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory; `explicit` when an entry of its own made it.
    Dir { explicit: bool },
    /// A regular file (or a hard link to one).
    File,
    /// A symlink with its target as written in the archive.
    Symlink(Vec<u8>),
}

/// The path an entry's name is written at: components joined with `/`,
/// without empty or `.` components. Empty for the tree's root itself.
pub fn normalize(name: &[u8]) -> Result<Vec<u8>, Refusal> {
    if name.is_empty() {
        return Err(Refusal::EmptyName);
    }
    if name.contains(&0) {
        return Err(Refusal::Nul);
    }
    if name[0] == b'/' {
        return Err(Refusal::Absolute);
    }
    if name.len() > MAX_NAME {
        return Err(Refusal::TooLong);
    }
    let mut out = Vec::with_capacity(name.len());
    for part in name.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(Refusal::Climbs),
            _ if part.len() > MAX_COMPONENT => return Err(Refusal::TooLong),
            _ => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(part);
            }
        }
    }
    Ok(out)
}

/// The parent of a normalized path (empty for the root's children).
pub fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|b| *b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// Shows a name as people read it.
pub fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The tree written so far, by normalized name.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: HashMap<Vec<u8>, Node>,
    links: Vec<Vec<u8>>,
    /// Components walked by every resolution so far.
    steps: std::cell::Cell<usize>,
}

impl Tree {
    pub fn get(&self, name: &[u8]) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Admits `node` at `name` (normalized, not empty) or refuses it. On
    /// success the tree holds it, and the parents it needs that did not
    /// exist yet are returned, outermost first, to be made as directories.
    pub fn admit(&mut self, name: &[u8], node: Node) -> Result<Vec<Vec<u8>>, Refusal> {
        let mut missing = Vec::new();
        for (i, _) in name.iter().enumerate().filter(|(_, b)| **b == b'/') {
            let prefix = &name[..i];
            match self.nodes.get(prefix) {
                Some(Node::Dir { .. }) => {}
                None => missing.push(prefix.to_vec()),
                Some(Node::File) => return Err(Refusal::ThroughFile(show(prefix))),
                Some(Node::Symlink(_)) => return Err(Refusal::ThroughLink(show(prefix))),
            }
        }
        match (self.nodes.get(name), &node) {
            (None, _) => {}
            (Some(Node::Dir { explicit: false }), Node::Dir { .. }) => {}
            (Some(_), _) => return Err(Refusal::Duplicate),
        }
        match &node {
            Node::Symlink(target) => {
                self.resolve(parent(name), target)?;
                self.links.push(name.to_vec());
            }
            Node::Dir { .. } | Node::File => {}
        }
        for m in &missing {
            self.nodes.insert(m.clone(), Node::Dir { explicit: false });
        }
        self.nodes.insert(name.to_vec(), node);
        Ok(missing)
    }

    /// Checks a hard link's target: a file written before, named the way
    /// entry names are. Returns the normalized target.
    pub fn hard_link_target(&self, target: &[u8]) -> Result<Vec<u8>, Refusal> {
        let normal = normalize(target).map_err(|_| Refusal::HardLinkOut(show(target)))?;
        match self.nodes.get(&normal) {
            Some(Node::File) => Ok(normal),
            _ => Err(Refusal::HardLinkTarget(show(target))),
        }
    }

    /// Resolves a symlink's `target` as the kernel would, from the directory
    /// `from`: every link met is followed, `..` goes to the real parent of
    /// where resolution stands. A name not written (yet) counts as a plain
    /// directory, which can only shorten what `..` climbs. Returns where it
    /// ends, as components from the root.
    pub fn resolve(&self, from: &[u8], target: &[u8]) -> Result<Vec<u8>, Refusal> {
        let out = || Refusal::LinkOut(show(target));
        if target.is_empty() {
            return Err(Refusal::NoTarget);
        }
        if target.contains(&0) {
            return Err(Refusal::Nul);
        }
        if target.len() > MAX_NAME {
            return Err(Refusal::TooLong);
        }
        if target[0] == b'/' {
            return Err(out());
        }
        // Where resolution stands, as one path, and where each component starts.
        let mut at: Vec<u8> = from.to_vec();
        let mut starts: Vec<usize> = Vec::new();
        if !from.is_empty() {
            starts.push(0);
            starts.extend(from.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| i));
        }
        let mut todo: Vec<&[u8]> = target.split(|b| *b == b'/').rev().collect();
        let (mut hops, mut steps) = (0, 0);
        while let Some(part) = todo.pop() {
            steps += 1;
            let total = self.steps.get() + 1;
            self.steps.set(total);
            if steps > MAX_STEPS || total > MAX_TOTAL_STEPS || at.len() > MAX_NAME {
                return Err(Refusal::LinkCost(show(target)));
            }
            match part {
                b"" | b"." => {}
                b".." => match starts.pop() {
                    Some(start) => at.truncate(start),
                    None => return Err(out()),
                },
                _ => {
                    starts.push(at.len());
                    if !at.is_empty() {
                        at.push(b'/');
                    }
                    at.extend_from_slice(part);
                    if let Some(Node::Symlink(next)) = self.nodes.get(&at) {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Err(Refusal::LinkLoop(show(target)));
                        }
                        if next.first() == Some(&b'/') {
                            return Err(out());
                        }
                        if let Some(start) = starts.pop() {
                            at.truncate(start);
                        }
                        todo.extend(next.split(|b| *b == b'/').rev());
                    }
                }
            }
        }
        Ok(at)
    }

    /// The first link that, in the finished tree, leads out (with why).
    pub fn escaping_link(&self) -> Option<(Vec<u8>, Refusal)> {
        self.links.iter().find_map(|name| match self.nodes.get(name) {
            Some(Node::Symlink(target)) => {
                self.resolve(parent(name), target).err().map(|e| (name.clone(), e))
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_or_are_refused() {
        type Case<'a> = (&'a [u8], Result<&'a [u8], Refusal>);
        let cases: &[Case<'_>] = &[
            (b"a", Ok(b"a")),
            (b"./a/b/", Ok(b"a/b")),
            (b"a//b/./c", Ok(b"a/b/c")),
            (b"./", Ok(b"")),
            (b".", Ok(b"")),
            (b"a..b/..c", Ok(b"a..b/..c")),
            (b"", Err(Refusal::EmptyName)),
            (b"/etc/passwd", Err(Refusal::Absolute)),
            (b"//etc/passwd", Err(Refusal::Absolute)),
            (b"../x", Err(Refusal::Climbs)),
            (b"a/../../x", Err(Refusal::Climbs)),
            (b"a/../b", Err(Refusal::Climbs)),
            (b"a\0b", Err(Refusal::Nul)),
            (&[b'n'; 256], Err(Refusal::TooLong)),
            (&[b'n'; 255], Ok(&[b'n'; 255])),
        ];
        for (name, want) in cases {
            assert_eq!(normalize(name), want.clone().map(<[u8]>::to_vec), "{}", show(name));
        }
    }

    fn tree(entries: &[(&str, Node)]) -> Tree {
        let mut t = Tree::default();
        for (name, node) in entries {
            t.admit(name.as_bytes(), node.clone()).unwrap_or_else(|e| unreachable!("{name}: {e}"));
        }
        t
    }

    fn link(target: &str) -> Node {
        Node::Symlink(target.as_bytes().to_vec())
    }

    const DIR: Node = Node::Dir { explicit: true };

    #[test]
    fn admission_table() {
        let base =
            || tree(&[("d", DIR), ("d/f", Node::File), ("l", link("d")), ("cur", link("."))]);
        let cases: &[(&str, Node, Result<(), Refusal>)] = &[
            ("d/g", Node::File, Ok(())),
            ("e/f/g", Node::File, Ok(())),
            ("d", DIR, Err(Refusal::Duplicate)),
            ("d/f", Node::File, Err(Refusal::Duplicate)),
            ("l", DIR, Err(Refusal::Duplicate)),
            ("l/x", Node::File, Err(Refusal::ThroughLink("l".into()))),
            ("l/x/y", DIR, Err(Refusal::ThroughLink("l".into()))),
            ("d/f/x", Node::File, Err(Refusal::ThroughFile("d/f".into()))),
            ("up", link(".."), Err(Refusal::LinkOut("..".into()))),
            ("abs", link("/tmp"), Err(Refusal::LinkOut("/tmp".into()))),
            ("d/up", link("../.."), Err(Refusal::LinkOut("../..".into()))),
            ("d/ok", link("../d/f"), Ok(())),
            ("par", link("cur/.."), Err(Refusal::LinkOut("cur/..".into()))),
            ("via", link("l/../.."), Err(Refusal::LinkOut("l/../..".into()))),
            ("dangling", link("nothing/yet"), Ok(())),
            ("empty", link(""), Err(Refusal::NoTarget)),
        ];
        for (name, node, want) in cases {
            let got = base().admit(name.as_bytes(), node.clone()).map(|_| ());
            assert_eq!(&got, want, "{name}");
        }
    }

    #[test]
    fn implicit_parents_are_returned_and_may_be_made_explicit_once() {
        let mut t = Tree::default();
        let made = t.admit(b"a/b/c", Node::File).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(made, vec![b"a".to_vec(), b"a/b".to_vec()]);
        assert_eq!(t.admit(b"a/b", DIR), Ok(vec![]));
        assert_eq!(t.admit(b"a/b", DIR), Err(Refusal::Duplicate));
        assert_eq!(t.admit(b"a", Node::File), Err(Refusal::Duplicate));
    }

    #[test]
    fn links_loop_and_chains() {
        let t = tree(&[("a", link("b")), ("b", link("c")), ("c", link("a"))]);
        assert_eq!(t.resolve(b"", b"a/x"), Err(Refusal::LinkLoop("a/x".into())));
        let t = tree(&[("x/y", DIR), ("one", link("x/y")), ("two", link("one/.."))]);
        assert_eq!(t.resolve(b"", b"two"), Ok(b"x".to_vec()));
        assert_eq!(t.resolve(b"", b"two/.."), Ok(vec![]));
        assert_eq!(t.resolve(b"x", b"y/../y"), Ok(b"x/y".to_vec()));
        let deep = tree(&[("a/b/c", DIR), ("a/b/c/up", link("../../.."))]);
        assert_eq!(deep.resolve(b"a/b", b"c/up/a"), Ok(b"a".to_vec()));
        assert_eq!(deep.resolve(b"a/b", b"c/up/.."), Err(Refusal::LinkOut("c/up/..".into())));
        assert_eq!(t.resolve(b"", b"two/../.."), Err(Refusal::LinkOut("two/../..".into())));
    }

    #[test]
    fn a_later_link_that_makes_an_earlier_one_escape_is_found() {
        // `a -> b/..` stays inside while b is a plain name; `b -> .` makes it `./..`.
        let t = tree(&[("a", link("b/..")), ("b", link("."))]);
        assert_eq!(t.escaping_link(), Some((b"a".to_vec(), Refusal::LinkOut("b/..".into()))));
        let t = tree(&[("a", link("b/..")), ("b", DIR)]);
        assert_eq!(t.escaping_link(), None);
    }

    #[test]
    fn hard_links_must_name_an_earlier_file() {
        let t = tree(&[("d", DIR), ("d/f", Node::File), ("s", link("d/f"))]);
        assert_eq!(t.hard_link_target(b"./d/f"), Ok(b"d/f".to_vec()));
        assert_eq!(
            t.hard_link_target(b"/etc/passwd"),
            Err(Refusal::HardLinkOut("/etc/passwd".into()))
        );
        assert_eq!(t.hard_link_target(b"../x"), Err(Refusal::HardLinkOut("../x".into())));
        assert_eq!(t.hard_link_target(b"s"), Err(Refusal::HardLinkTarget("s".into())));
        assert_eq!(t.hard_link_target(b"d"), Err(Refusal::HardLinkTarget("d".into())));
        assert_eq!(t.hard_link_target(b"later"), Err(Refusal::HardLinkTarget("later".into())));
    }
}
