use super::*;

fn provider(selected: usize) -> Page {
    Page::Provider { selected }
}

fn address(text: &str) -> Page {
    Page::Address { text: text.to_owned(), problem: None }
}

fn model(options: &[&str], selected: usize, typed: &str) -> Page {
    Page::Model {
        options: options.iter().map(|o| (*o).to_owned()).collect(),
        selected,
        typed: typed.to_owned(),
        problem: None,
    }
}

#[test]
fn the_pages_offer_the_providers_plain_offers() {
    assert_eq!(PROVIDERS.map(|(p, _)| p), super::super::PROVIDERS);
}

#[test]
fn which_page_follows_which() {
    use Kind::*;
    // (provider, from, .env exists, next)
    let table: &[(&str, Kind, bool, Kind)] = &[
        ("openai", Provider, true, Address),
        ("compatible", Provider, false, Address),
        ("chatgpt", Provider, true, SignIn),
        ("standin", Provider, true, Replace),
        ("standin", Provider, false, Ended),
        ("compatible", Address, true, Key),
        ("compatible", Key, true, Model),
        ("chatgpt", SignIn, true, Model),
        ("openai", Model, true, Tests),
        ("openai", Tests, true, Replace),
        ("chatgpt", Tests, false, Ended),
        ("openai", Replace, true, Ended),
    ];
    for (p, from, exists, to) in table {
        assert_eq!(next(p, *from, *exists), *to, "{p} {from:?} {exists}");
    }
    let backs: &[(&str, Kind, Kind)] = &[
        ("compatible", Address, Provider),
        ("compatible", Key, Address),
        ("openai", Model, Key),
        // The sign-in's code is spent: back to the choice.
        ("chatgpt", Model, Provider),
    ];
    for (p, from, to) in backs {
        assert_eq!(back(p, *from), *to, "{p} {from:?}");
    }
}

#[test]
fn keys_on_each_page() {
    let url = "http://127.0.0.1:9/v1/";
    // (page before, key, step, page after)
    let table: Vec<(Page, Key, Step, Page)> = vec![
        (provider(0), Key::Down, Step::Stay, provider(1)),
        (provider(3), Key::Down, Step::Stay, provider(0)),
        (provider(0), Key::Up, Step::Stay, provider(3)),
        (provider(1), Key::Enter, Step::Provider("compatible"), provider(1)),
        (provider(0), Key::Char('4'), Step::Provider("chatgpt"), provider(0)),
        (provider(0), Key::Char('5'), Step::Stay, provider(0)),
        (provider(0), Key::Char('0'), Step::Stay, provider(0)),
        (provider(2), Key::Esc, Step::Leave, provider(2)),
        (provider(2), Key::CtrlC, Step::GiveUp, provider(2)),
        (address("http://h"), Key::Char('/'), Step::Stay, address("http://h/")),
        (address("http://h/"), Key::Backspace, Step::Stay, address("http://h")),
        (address("http://h/"), Key::Clear, Step::Stay, address("")),
        (address(url), Key::Enter, Step::Answer("http://127.0.0.1:9/v1".into()), address(url)),
        (address(""), Key::Esc, Step::Back, address("")),
        (address("x"), Key::CtrlC, Step::GiveUp, address("x")),
        (
            Page::Key { text: String::new(), problem: None },
            Key::Paste("sk-1\n".into()),
            Step::Stay,
            Page::Key { text: "sk-1".into(), problem: None },
        ),
        (
            Page::Key { text: "sk-1".into(), problem: None },
            Key::Enter,
            Step::Answer("sk-1".into()),
            Page::Key { text: "sk-1".into(), problem: None },
        ),
        (model(&["a", "b"], 0, ""), Key::Down, Step::Stay, model(&["a", "b"], 1, "")),
        (model(&["a", "b"], 1, ""), Key::Down, Step::Stay, model(&["a", "b"], 1, "")),
        (
            model(&["a", "b"], 1, ""),
            Key::Enter,
            Step::Answer("b".into()),
            model(&["a", "b"], 1, ""),
        ),
        // Typed: a number picks from the list, a name is taken as it is.
        (
            model(&["a", "b"], 0, "2"),
            Key::Enter,
            Step::Answer("b".into()),
            model(&["a", "b"], 0, "2"),
        ),
        (
            model(&["a"], 0, "gpt-5"),
            Key::Enter,
            Step::Answer("gpt-5".into()),
            model(&["a"], 0, "gpt-5"),
        ),
        (model(&[], 0, ""), Key::Char('m'), Step::Stay, model(&[], 0, "m")),
        (model(&[], 0, ""), Key::Esc, Step::Back, model(&[], 0, "")),
        (Page::SignIn, Key::Enter, Step::Stay, Page::SignIn),
        (Page::SignIn, Key::Esc, Step::GiveUp, Page::SignIn),
        (Page::Tests, Key::Esc, Step::GiveUp, Page::Tests),
        (Page::Replace, Key::Char('y'), Step::Replace(true), Page::Replace),
        (Page::Replace, Key::Enter, Step::Replace(true), Page::Replace),
        (Page::Replace, Key::Esc, Step::Replace(false), Page::Replace),
        (Page::Replace, Key::Char('x'), Step::Stay, Page::Replace),
        (Page::Ended, Key::Enter, Step::Close, Page::Ended),
        (Page::Ended, Key::Char('x'), Step::Stay, Page::Ended),
    ];
    for (before, pressed, step, after) in table {
        let mut page = before.clone();
        assert_eq!(key(&mut page, pressed.clone()), step, "{before:?} {pressed:?}");
        assert_eq!(page, after, "{before:?} {pressed:?}");
    }
}

#[test]
fn a_value_that_fails_its_check_stays_with_the_reason() {
    let cases: Vec<(Page, &str)> = vec![
        (address("api.openai.com/v1"), "not an http:// or https:// address"),
        (Page::Key { text: "two words".into(), problem: None }, "has spaces"),
        (Page::Key { text: String::new(), problem: None }, "is empty"),
        (model(&[], 0, ""), "type the model's name"),
        (model(&[], 0, "a#b"), "has a #"),
    ];
    for (before, said) in cases {
        let mut page = before.clone();
        assert_eq!(key(&mut page, Key::Enter), Step::Stay, "{before:?}");
        let problem = match &page {
            Page::Address { problem, .. }
            | Page::Key { problem, .. }
            | Page::Model { problem, .. } => problem.clone().unwrap_or_default(),
            _ => String::new(),
        };
        assert!(problem.contains(said), "{before:?}: {problem}");
        // Typing again clears the reason.
        key(&mut page, Key::Char('x'));
        assert!(!format!("{page:?}").contains(said), "{page:?}");
    }
}
