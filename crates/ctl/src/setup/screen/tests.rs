use super::*;

fn text(lines: &[Line<'static>]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_key_is_never_drawn_only_its_length() {
    let facts =
        Facts { provider: "openai".into(), address: "http://h/v1".into(), ..Facts::default() };
    let page = Page::Key { text: "sk-secret-77".into(), problem: None };
    let shown = text(&lines(&page, &facts, 0));
    assert!(!shown.contains("sk-secret"), "{shown}");
    assert!(shown.contains("API key: 12 characters typed"), "{shown}");
}

#[test]
fn each_page_says_what_it_asks_and_its_keys() {
    let tests =
        [Progress::Passed("answered in words: \"hi\"".into()), Progress::Failed("401: no".into())];
    let facts = Facts {
        provider: "compatible".into(),
        address: "http://h/v1".into(),
        model: "m".into(),
        url: Some(("http://i/oauth/authorize?x=1".into(), 1455)),
        tests,
        replace: vec!["TENERAL_API_KEY=(the key)".into()],
        said: vec!["Wrote .env.\nline two".into()],
        ..Facts::default()
    };
    let model = Page::Model {
        options: vec!["a".into(), "b".into()],
        selected: 1,
        typed: String::new(),
        problem: None,
    };
    let table: Vec<(Page, &[&str])> = vec![
        (Page::Provider { selected: 1 }, &["▸ 2  compatible", "  4  chatgpt", "Esc leaves"]),
        (
            Page::Address { text: "http://x".into(), problem: Some("bad".into()) },
            &["Address: http://x▏", "✗ bad"],
        ),
        (model, &["http://h/v1 offers these models", "▸   2  b", "Or type a number or a name"]),
        (Page::SignIn, &["127.0.0.1:1455", "Esc gives up"]),
        (
            Page::Tests,
            &["Testing m at http://h/v1", "passed: answered in words", "failed: 401: no"],
        ),
        (Page::Replace, &["TENERAL_API_KEY=(the key)", "y or Enter writes"]),
        (Page::Ended, &["Wrote .env.", "line two", "Enter or Esc leaves"]),
    ];
    for (page, wants) in table {
        let shown = text(&lines(&page, &facts, 0));
        for want in wants {
            assert!(shown.contains(want), "{page:?}: {want:?} missing from\n{shown}");
        }
    }
}

#[test]
fn the_sign_in_page_keeps_rows_free_for_the_address() {
    let facts = Facts { url: Some(("u".into(), 1455)), ..Facts::default() };
    let shown = lines(&Page::SignIn, &facts, 3);
    // The address is printed from URL_ROW on, over rows left empty.
    assert!(shown[usize::from(URL_ROW) - 2].to_string().starts_with("Open this address"));
    for row in 0..3 {
        assert_eq!(shown[usize::from(URL_ROW) + row].to_string(), "", "row {row}");
    }
    assert!(shown[usize::from(URL_ROW) + 4].to_string().starts_with("Waiting for your browser"));
}

#[test]
fn an_ascii_locale_gets_ascii_marks() {
    let facts = Facts::default();
    let shown = text(&ascii(lines(&Page::Provider { selected: 0 }, &facts, 0)));
    assert!(shown.contains("> 1  openai") && shown.contains("Up/Down"), "{shown}");
    assert!(shown.is_ascii(), "{shown}");
}
