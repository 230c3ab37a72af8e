//! The stand-in's choices, one conversation each, on both protocols.
use serde_json::json;

use super::*;

fn user(text: &str) -> Entry {
    Entry::User(text.into())
}

fn call(name: &str, arguments: Value) -> Entry {
    Entry::Call { name: name.into(), arguments: arguments.to_string() }
}

fn out(text: &str) -> Entry {
    Entry::Output(text.into())
}

/// The names of the calls of an act, and its text.
type Shape<'a> = Option<(Vec<&'a str>, Option<&'a str>)>;

fn shape(act: &Option<Act>) -> Shape<'_> {
    act.as_ref().map(|a| (a.calls.iter().map(|c| c.name.as_str()).collect(), a.text.as_deref()))
}

fn args(act: &Option<Act>) -> Value {
    let raw = act.as_ref().and_then(|a| a.calls.first()).map_or("null", |c| &c.arguments);
    serde_json::from_str(raw).unwrap_or(Value::Null)
}

const SEED_PROMPT: &str = "const ABOUT: &str = \"\\\nthey say next. Credentials are not yours to look for or use.\";\n\npub fn soul_written(home: &Path) -> bool {\n";
const CHANGED: &str = "Committed 0123456789abcdef0123456789abcdef01234567 in .teneral/candidate and asked the kernel for it.";
const ACCEPTED: &str = "[kernel: mutation.accepted] Your mutation passed every check: you now run 0123456789abcdef0123456789abcdef01234567 (promoted from fedcba9876543210fedcba9876543210fedcba98).";

#[test]
fn lines_are_read_loosely_and_nothing_else_is_one() {
    let table: &[(&str, Option<Line>)] = &[
        ("show me your code", Some(Line::ShowCode)),
        ("  Show me your code.\n", Some(Line::ShowCode)),
        ("`change yourself`", Some(Line::Change)),
        ("Change   yourself!", Some(Line::Change)),
        ("break yourself", Some(Line::Break)),
        ("go back?", Some(Line::GoBack)),
        ("please change yourself", None),
        ("go back to sleep", None),
        ("hello", None),
        ("", None),
    ];
    for (text, line) in table {
        assert_eq!(Line::of(text), *line, "{text:?}");
    }
}

#[test]
fn each_step_follows_from_the_conversation_so_far() {
    let edit = json!({"path": PROMPT, "old": PROMPT_END,
        "new": format!("Credentials are not yours to look for or use.\n\n{COUNTED}1.\";")});
    let broken = json!({"path": PROMPT, "old": SOUND, "new": BROKEN});
    let table: Vec<(&str, Vec<Entry>, Shape)> = vec![
        ("anything else is echoed", vec![user("hello")], None),
        ("no user message", vec![], None),
        ("go back is words only", vec![user("go back")], Some((vec![], Some(GO_BACK)))),
        (
            "show: list and read",
            vec![user("show me your code")],
            Some((vec!["list_files", "read_file"], None)),
        ),
        ("change: read first", vec![user("change yourself")], Some((vec!["read_file"], None))),
        (
            "change: then edit",
            vec![user("change yourself"), call("read_file", json!({})), out(SEED_PROMPT)],
            Some((vec!["edit_file"], None)),
        ),
        (
            "change: then mutate",
            vec![
                user("change yourself"),
                call("read_file", json!({})),
                out(SEED_PROMPT),
                call("edit_file", edit.clone()),
                out("replaced one passage in x"),
            ],
            Some((vec!["mutate"], None)),
        ),
        (
            "break: then mutate",
            vec![
                user("break yourself"),
                call("read_file", json!({})),
                out(SEED_PROMPT),
                call("edit_file", broken),
                out("replaced one passage in x"),
            ],
            Some((vec!["mutate"], None)),
        ),
        (
            "a verdict on no change of the stand-in's is echoed",
            vec![user("hello"), user(ACCEPTED)],
            None,
        ),
        (
            "a verdict after go back is echoed",
            vec![user("go back"), Entry::Assistant("x".into()), user(ACCEPTED)],
            None,
        ),
        (
            "a refusal: undo it in the workspace first",
            vec![
                user("break yourself"),
                call("mutate", json!({})),
                out(CHANGED),
                user("[kernel: mutation.rejected] {\"candidate\":\"0123456789abcdef0123456789abcdef01234567\",\"check\":\"lint-body\",\"output\":\"error[E0308]: mismatched types\"}"),
            ],
            Some((vec!["bash"], None)),
        ),
    ];
    for (what, entries, expected) in table {
        assert_eq!(shape(&choose(&entries)), expected, "{what}");
    }
}

#[test]
fn change_counts_up_from_what_the_file_says() {
    let first = counted_edit(SEED_PROMPT).expect("the seed prompt takes the counted line");
    assert_eq!(first.0, PROMPT_END);
    assert!(first.1.ends_with(&format!("\n\n{COUNTED}1.\";")), "{}", first.1);
    let once = SEED_PROMPT.replacen(&first.0, &first.1, 1);
    let second = counted_edit(&once).expect("a counted prompt counts up");
    assert_eq!(second, (format!("{COUNTED}1"), format!("{COUNTED}2")));
    let twice = once.replacen(&second.0, &second.1, 1);
    assert_eq!(counted_edit(&twice).map(|e| e.1), Some(format!("{COUNTED}3")));
    assert_eq!(counted_edit("fn main() {}"), None);
    assert_eq!(breaking_edit(SEED_PROMPT).map(|e| e.1), Some(BROKEN.to_owned()));
    assert_eq!(breaking_edit(&SEED_PROMPT.replace(SOUND, BROKEN)), None);

    let entries = vec![user("change yourself"), call("read_file", json!({})), out(&twice)];
    let edit = choose(&entries);
    assert_eq!(args(&edit)["new"], format!("{COUNTED}3"));
}

#[test]
fn the_mutation_message_and_replies_name_what_was_done() {
    let made = vec![
        user("change yourself"),
        call("edit_file", json!({"new": format!("{COUNTED}2")})),
        out("replaced one passage in x"),
    ];
    let mutate = choose(&made);
    let message = args(&mutate)["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("changes I made on my owner's word: 2"), "{message}");

    let mut asked = made.clone();
    asked.extend([call("mutate", json!({})), out(CHANGED)]);
    let said = choose(&asked).and_then(|a| a.text).unwrap_or_default();
    assert!(said.contains("0123456") && said.contains(&format!("{COUNTED}2.")), "{said}");

    asked.extend([Entry::Assistant(said), user(ACCEPTED)]);
    let reply = choose(&asked).and_then(|a| a.text).unwrap_or_default();
    assert!(reply.starts_with("I am the new generation, 0123456"), "{reply}");
    assert!(reply.contains("promoted it from fedcba9") && reply.contains("2."), "{reply}");
}

#[test]
fn a_refusal_is_answered_with_its_check_once_the_workspace_is_undone() {
    let refused = "[kernel: mutation.rejected] {\"candidate\":\"0123456789abcdef0123456789abcdef01234567\",\"check\":\"lint-body\",\"output\":\"   Checking teneral-body\\nerror[E0308]: mismatched types\\n  --> src/main.rs:106:35\",\"refusals\":1}";
    let mut entries =
        vec![user("break yourself"), call("mutate", json!({})), out(CHANGED), user(refused)];
    let undo = choose(&entries);
    let command = args(&undo)["command"].as_str().unwrap_or_default().to_owned();
    assert!(
        command.contains("= 0123456789abcdef0123456789abcdef01234567 &&")
            && command.contains("reset --quiet --hard HEAD~1"),
        "{command}"
    );
    entries.extend([
        call("bash", json!({"command": command})),
        out("undone: the workspace is back at 89abcde\n"),
    ]);
    let reply = choose(&entries).and_then(|a| a.text).unwrap_or_default();
    assert!(reply.contains("refused my change 0123456 at the check `lint-body`"), "{reply}");
    assert!(reply.contains("error[E0308]: mismatched types."), "{reply}");
    assert!(
        reply.contains("undid that commit in my workspace, which is back at 89abcde."),
        "{reply}"
    );
}

#[test]
fn show_me_your_code_names_the_files_and_what_the_crate_is() {
    let entries = vec![
        user("show me your code"),
        call("list_files", json!({})),
        call("read_file", json!({})),
        out("Cargo.toml\nsrc/\nsrc/lib.rs\nsrc/tools.rs"),
        out("//! The seed body of a teneral individual.\n//!\n//! More.\nuse x;"),
    ];
    let said = choose(&entries).and_then(|a| a.text).unwrap_or_default();
    assert!(said.contains("src/: lib.rs, tools.rs; 1 more files"), "{said}");
    assert!(said.contains("\"The seed body of a teneral individual.\""), "{said}");
}

#[test]
fn the_birth_letter_is_answered_with_the_four_lines() {
    let said = choose(&[user("[birth: the letter in BIRTH.md]\nHello")])
        .and_then(|a| a.text)
        .unwrap_or_default();
    for line in LINES {
        assert!(said.contains(&format!("`{line}`")), "{said}");
    }
    assert_eq!(choose(&[user("[birth: x]"), Entry::Assistant("hi".into())]), None);
}

#[test]
fn both_protocols_give_the_same_transcript() {
    let chat = json!({"model": "m", "messages": [
        {"role": "system", "content": "prompt"},
        {"role": "user", "content": "change yourself"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"p\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "text"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]});
    let responses = json!({"model": "m", "instructions": "prompt", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "change yourself"}]},
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"p\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "text"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]});
    let expected = vec![
        user("change yourself"),
        Entry::Call { name: "read_file".into(), arguments: "{\"path\":\"p\"}".into() },
        out("text"),
        Entry::Assistant("done".into()),
    ];
    assert_eq!(transcript(&chat), expected);
    assert_eq!(transcript(&responses), expected);
    assert_eq!(transcript(&json!({"model": "m", "input": "go back"})), vec![user("go back")]);
}
