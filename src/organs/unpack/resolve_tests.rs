//! Table tests of the pure rules: names, admission, link resolution.

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

#[test]
fn depth_is_bounded_at_256() {
    let deep = |n: usize| "d/".repeat(n - 1) + "f";
    assert_eq!(normalize(deep(256).as_bytes()).map(|p| p.len()), Ok(deep(256).len()));
    assert_eq!(normalize(deep(257).as_bytes()), Err(Refusal::TooDeep));
    // `.` and empty components do not count.
    let padded = "./".repeat(300) + &deep(256);
    assert_eq!(normalize(padded.as_bytes()).map(|p| p.len()), Ok(deep(256).len()));
}

#[test]
fn names_are_shown_escaped_and_cut() {
    let cases: &[(&[u8], &str)] = &[
        (b"plain/name.txt", "plain/name.txt"),
        (b"esc\x1b[31mred\x07", "esc\\u{1b}[31mred\\u{7}"),
        (b"new\nline\ttab\r", "new\\nline\\ttab\\r"),
        (b"quote\"back\\", "quote\\\"back\\\\"),
        ("bidi\u{202e}txt.exe".as_bytes(), "bidi\\u{202e}txt.exe"),
        (b"bad\xffutf8", "bad\u{fffd}utf8"),
    ];
    for (name, want) in cases {
        assert_eq!(show(name), *want);
    }
    let long = show(&[b'x'; 5000]);
    assert_eq!(long, format!("{}... (5000 bytes in all)", "x".repeat(200)));
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
    let base = || tree(&[("d", DIR), ("d/f", Node::File), ("l", link("d")), ("cur", link("."))]);
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
    assert_eq!(t.hard_link_target(b"/etc/passwd"), Err(Refusal::HardLinkOut("/etc/passwd".into())));
    assert_eq!(t.hard_link_target(b"../x"), Err(Refusal::HardLinkOut("../x".into())));
    assert_eq!(t.hard_link_target(b"s"), Err(Refusal::HardLinkTarget("s".into())));
    assert_eq!(t.hard_link_target(b"d"), Err(Refusal::HardLinkTarget("d".into())));
    assert_eq!(t.hard_link_target(b"later"), Err(Refusal::HardLinkTarget("later".into())));
}
