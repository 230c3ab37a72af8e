use super::*;

fn c(digit: char) -> Commit {
    Commit::parse(&digit.to_string().repeat(40)).expect("a full id")
}

fn paths(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| (*s).to_owned()).collect()
}

fn standing(running_on: Option<char>, candidate_on: Option<char>, relation: Relation) -> Standing {
    Standing {
        species: "origin/main".into(),
        running_on: running_on.map(c),
        candidate_on: candidate_on.map(c),
        relation,
        shallow: false,
        differing: Vec::new(),
    }
}

#[test]
fn changeable_and_document_paths() {
    let table = [
        ("body/src/main.rs", true, false),
        ("BACKLOG.md", true, false),
        ("BACKLOG.md.bak", false, false),
        ("bodyguard/x", false, false),
        ("README.md", false, true),
        ("LICENSE", false, true),
        ("LICENSE-MIT", false, true),
        ("docs/species.md", false, true),
        (".github/workflows/ci.yml", false, true),
        (".ci/run", false, true),
        ("src/species.rs", false, false),
        ("docsx/a", false, false),
        ("SIGNERS", false, false),
    ];
    for (path, may, doc) in table {
        assert_eq!(changeable(path), may, "{path}");
        assert_eq!(document(path), doc, "{path}");
    }
    assert_eq!(outside(&paths(&["body/a", "src/x.rs", "BACKLOG.md"])), paths(&["src/x.rs"]));
}

#[test]
fn the_first_look_fetches_nothing_for_a_body_change() {
    assert_eq!(first_look(&[], Setting::Off), First::Ordinary);
    assert_eq!(first_look(&[], Setting::Ask), First::Ordinary);
    assert_eq!(first_look(&paths(&["src/x.rs"]), Setting::Ask), First::Species);
    assert_eq!(first_look(&paths(&["src/x.rs"]), Setting::Auto), First::Species);
    let First::Refused(r) = first_look(&paths(&["src/x.rs"]), Setting::Off) else {
        panic!("off refuses")
    };
    assert!(r.message.starts_with("protected paths changed: src/x.rs."), "{}", r.message);
    assert!(r.message.contains("TENERAL_SPECIES=off"), "{}", r.message);
    assert!(r.counts && r.check == "paths");
}

#[test]
fn where_the_candidate_stands_decides() {
    let kernel = paths(&["src/x.rs", "README.md"]);
    let docs = paths(&["README.md", "docs/a.md"]);
    // (outside, standing, Ok(placed) or Err(words the refusal holds, counts))
    let differing = Standing {
        differing: paths(&["src/x.rs", "tests/y.rs"]),
        ..standing(Some('a'), Some('b'), Relation::Later)
    };
    let shallow = Standing { shallow: true, ..standing(None, None, Relation::Same) };
    type Want = Result<Placed, (&'static [&'static str], bool)>;
    let table: Vec<(&Vec<String>, Standing, Want)> = vec![
        (&kernel, standing(Some('a'), Some('b'), Relation::Later), Ok(Placed::Kernel(c('b')))),
        (&docs, standing(Some('a'), Some('b'), Relation::Later), Ok(Placed::Documents(c('b')))),
        // A lineage from before the rule comes under it with its first merge.
        (&kernel, standing(None, Some('b'), Relation::Same), Ok(Placed::Kernel(c('b')))),
        (
            &kernel,
            standing(Some('a'), Some('a'), Relation::Same),
            Err((&["protected paths changed: src/x.rs, README.md."], true)),
        ),
        (
            &kernel,
            standing(Some('b'), Some('a'), Relation::Earlier),
            Err((&["would move the species back from bbbbbbb to aaaaaaa"], true)),
        ),
        (
            &kernel,
            standing(Some('b'), Some('a'), Relation::Beside),
            Err((&["would move the species back from bbbbbbb to aaaaaaa"], true)),
        ),
        (
            &kernel,
            differing,
            Err((
                &[
                    "species commit bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                    "src/x.rs, tests/y.rs",
                ],
                true,
            )),
        ),
        (
            &kernel,
            standing(None, None, Relation::Same),
            Err((&["protected paths changed", "shares no history"], true)),
        ),
        (&kernel, shallow, Err((&["git fetch --unshallow"], false))),
        (
            &kernel,
            Standing { shallow: true, ..standing(None, Some('b'), Relation::Same) },
            Err((&["protected paths changed: src/x.rs", "git fetch --unshallow"], false)),
        ),
    ];
    for (outside, standing, want) in table {
        let got = place(outside, &standing);
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{standing:?}"),
            (Err(got), Err((words, counts))) => {
                for w in words {
                    assert!(got.message.contains(w), "{standing:?}: {w:?} not in {}", got.message);
                }
                assert_eq!(got.counts, counts, "{standing:?}: {}", got.message);
            }
            (got, want) => panic!("{standing:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn consent_under_each_setting() {
    assert!(consent(Setting::Auto, &c('b'), false).is_ok());
    assert!(consent(Setting::Ask, &c('b'), true).is_ok());
    let asked = consent(Setting::Ask, &c('b'), false).expect_err("ask waits for the owner");
    assert!(!asked.counts);
    assert_eq!(asked.awaiting, Some(c('b')));
    assert!(asked.message.contains("teneralctl accept bbbbbbb"), "{}", asked.message);
    assert!(consent(Setting::Off, &c('b'), true).is_err());
}

#[test]
fn the_launchers_kernel_key_leaves_out_what_the_rule_takes_like_a_body_change() {
    use crate::launcher::kernels::not_kernel;
    let paths = [
        "body/src/main.rs",
        "BACKLOG.md",
        "README.md",
        "LICENSE",
        "LICENSE-MIT",
        "docs/x.md",
        ".github/ci.yml",
        ".ci/run",
        "site/index.html",
        "src/main.rs",
        "Cargo.toml",
        "launch.json",
        "SIGNERS",
        "units/teneral.service",
        "README.txt",
        "bodyx/y",
    ];
    for path in paths {
        let top = path.split('/').next().unwrap_or(path);
        let by_rule = changeable(path) || document(path);
        assert_eq!(not_kernel(top), by_rule, "{path}");
    }
}
