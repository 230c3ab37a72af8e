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
/// The most components one name may have: directories nest at most this deep.
pub const MAX_DEPTH: usize = 256;
/// PATH_MAX: the longest path, its NUL included, the tree's users can open.
pub const PATH_MAX: usize = 4096;
/// The longest a name is shown in a message, in characters.
const MAX_SHOWN: usize = 200;
/// Components one resolution may walk, and all resolutions of one archive
/// together: a bound on the work a hostile archive can ask for.
const MAX_STEPS: usize = 4096;
const MAX_TOTAL_STEPS: usize = 4 << 20;
/// Bytes of path looked up by every resolution of one archive together: a
/// step looks up the whole path it stands at, so steps alone do not bound
/// the work of long names.
const MAX_TOTAL_LOOKED_UP: usize = 256 << 20;

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("its name is empty")]
    EmptyName,
    #[error("its name or link target holds a NUL byte")]
    Nul,
    #[error("its name or link target is longer than 4095 bytes, or has a part longer than 255")]
    TooLong,
    #[error("its name is more than 256 directories deep")]
    TooDeep,
    #[error(
        "where the tree is used its path would be {len} bytes long (the tree's own path is \
         {root_len}); at most 4095 (PATH_MAX) are allowed"
    )]
    PathTooLong { len: usize, root_len: usize },
    #[error("it is a symlink to \"{0}\", which takes too long to resolve")]
    LinkCost(String),
    #[error("its name is absolute")]
    Absolute,
    #[error("its name climbs out with ..")]
    Climbs,
    #[error("a second entry for a name already written")]
    Duplicate,
    #[error("it would be written through the link \"{0}\"")]
    ThroughLink(String),
    #[error("it would be written inside the file \"{0}\"")]
    ThroughFile(String),
    #[error("it is a symlink to \"{0}\", which leads out of the tree")]
    LinkOut(String),
    #[error("it is a symlink to \"{0}\", and the links it leads through form a loop")]
    LinkLoop(String),
    #[error("it is a hard link to \"{0}\", which leads out of the tree")]
    HardLinkOut(String),
    #[error("it is a hard link to \"{0}\", which is not a file written before it")]
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
    let mut depth = 0;
    for part in name.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(Refusal::Climbs),
            _ if part.len() > MAX_COMPONENT => return Err(Refusal::TooLong),
            _ if depth == MAX_DEPTH => return Err(Refusal::TooDeep),
            _ => {
                depth += 1;
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

/// Shows a name in a message, to be put between double quotes: invalid
/// UTF-8 as U+FFFD, control and format characters (terminal escapes, bidi
/// overrides), `\\` and `"` escaped, cut after 200 characters with the
/// name's length in bytes.
pub fn show(name: &[u8]) -> String {
    let text = String::from_utf8_lossy(name);
    let mut out = String::new();
    for (shown, c) in text.chars().enumerate() {
        if shown == MAX_SHOWN {
            out.push_str(&format!("... ({} bytes in all)", name.len()));
            return out;
        }
        let format_char = matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if c.is_control() || format_char || c == '\\' || c == '"' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The tree written so far, by normalized name.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: HashMap<Vec<u8>, Node>,
    links: Vec<Vec<u8>>,
    /// Components walked, and bytes of path looked up, by every resolution so far.
    steps: std::cell::Cell<usize>,
    looked_up: std::cell::Cell<usize>,
}

impl Tree {
    pub fn get(&self, name: &[u8]) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Admits `node` at `name` (normalized, not empty) or refuses it. On
    /// success the tree holds it, and the parents it needs that did not
    /// exist yet are returned, outermost first, to be made as directories.
    pub fn admit(&mut self, name: &[u8], node: Node) -> Result<Vec<Vec<u8>>, Refusal> {
        // Every name the tree holds has directories for all its parents, so
        // the nearest parent that exists is the only one that can be a file
        // or a link: look up from the name's parent outwards and stop there
        // (one lookup when entries come in order, not one per component).
        let mut missing = Vec::new();
        let mut at = name;
        while let Some(i) = at.iter().rposition(|b| *b == b'/') {
            let prefix = &name[..i];
            match self.nodes.get(prefix) {
                Some(Node::Dir { .. }) => break,
                None => missing.push(prefix.to_vec()),
                Some(Node::File) => return Err(Refusal::ThroughFile(show(prefix))),
                Some(Node::Symlink(_)) => return Err(Refusal::ThroughLink(show(prefix))),
            }
            at = prefix;
        }
        missing.reverse();
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

    /// Records `node` at `name` (normalized, not empty) as found in a
    /// finished tree, without the checks of [`Tree::admit`]: for a tree that
    /// was walked, not unpacked, in an order that says nothing, and whose
    /// links are all checked against the whole of it by
    /// [`Tree::escaping_link`].
    pub fn record(&mut self, name: &[u8], node: Node) {
        if matches!(node, Node::Symlink(_)) {
            self.links.push(name.to_vec());
        }
        self.nodes.insert(name.to_vec(), node);
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
            let looked_up = self.looked_up.get() + at.len() + part.len() + 1;
            self.looked_up.set(looked_up);
            if steps > MAX_STEPS
                || total > MAX_TOTAL_STEPS
                || looked_up > MAX_TOTAL_LOOKED_UP
                || at.len() > MAX_NAME
            {
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
#[path = "resolve_tests.rs"]
mod tests;
