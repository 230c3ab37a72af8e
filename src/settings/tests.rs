//! Table tests over good and bad `.env` files.

use std::path::PathBuf;
use std::time::Duration;

use super::*;

const COMPATIBLE: &str = "TENERAL_PROVIDER=compatible\n\
                          TENERAL_BASE_URL=https://llm.example/v1\n\
                          TENERAL_API_KEY=sk-abc\n\
                          TENERAL_MODEL=m1\n";

fn ok(text: &str) -> Settings {
    Settings::parse(text).unwrap_or_else(|e| panic!("{text:?} was refused: {e}"))
}

fn refused(text: &str) -> String {
    match Settings::parse(text) {
        Ok(s) => panic!("{text:?} was accepted: {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn standin_alone_takes_every_default() {
    let s = ok("TENERAL_PROVIDER=standin\n");
    assert_eq!(s.provider, Provider::Standin);
    assert_eq!(s.protocol, Protocol::Chat);
    assert_eq!(s.base_url, None);
    assert_eq!(s.api_key, None);
    assert_eq!(s.model, "standin");
    assert_eq!(s.reasoning_effort, None);
    assert_eq!(s.heartbeat_minutes, 30);
    assert_eq!(s.context_chars, 250_000);
    assert_eq!(s.check_minutes, 10);
    assert_eq!(s.smoke_seconds, 30);
    assert_eq!(s.upstream, None);
    assert_eq!(s.species, Species::Ask);
    assert_eq!(s.publish, Species::Ask);
    assert_eq!(s.standin_script, None);
    assert_eq!(s.test.timing.ready, Duration::from_secs(60));
    assert_eq!(s.test.timing.first_reply, Duration::from_secs(600));
    assert_eq!(s.test.timing.stop_grace, Duration::from_secs(5));
    assert_eq!(s.test.timing.backoff_unit, Duration::from_secs(1));
    assert_eq!(s.test.timing.long_run, Duration::from_secs(3600));
    assert_eq!(s.test.timing.check_limit, None);
}

#[test]
fn good_files() {
    type Check = fn(&Settings) -> bool;
    let table: &[(&str, &str, Check)] = &[
        ("compatible", COMPATIBLE, |s| {
            s.provider == Provider::Compatible
                && s.protocol == Protocol::Chat
                && s.base_url.as_deref() == Some("https://llm.example/v1")
                && s.api_key.as_ref().map(Secret::expose) == Some("sk-abc")
                && s.model == "m1"
        }),
        (
            "no provider means compatible",
            "TENERAL_BASE_URL=http://10.0.0.1:8080/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n",
            |s| s.provider == Provider::Compatible && s.protocol == Protocol::Chat,
        ),
        (
            "openai without an address gets OpenAI's",
            "TENERAL_PROVIDER=openai\nTENERAL_API_KEY=k\nTENERAL_MODEL=gpt\n",
            |s| {
                s.protocol == Protocol::Responses
                    && s.base_url.as_deref() == Some("https://api.openai.com/v1")
            },
        ),
        ("chatgpt has no key", "TENERAL_PROVIDER=chatgpt\nTENERAL_MODEL=gpt\n", |s| {
            s.provider == Provider::ChatGpt
                && s.protocol == Protocol::Responses
                && s.api_key.is_none()
                && s.base_url.is_none()
        }),
        (
            "standin speaks responses when asked",
            "TENERAL_PROVIDER=standin\nTENERAL_STANDIN_PROTOCOL=responses\nTENERAL_STANDIN_SCRIPT=t/s.json\n",
            |s| {
                s.protocol == Protocol::Responses
                    && s.standin_script == Some(PathBuf::from("t/s.json"))
            },
        ),
        (
            "standin ignores an address",
            "TENERAL_PROVIDER=standin\nTENERAL_BASE_URL=https://x/v1\nTENERAL_API_KEY=k\n",
            |s| s.base_url.is_none() && s.api_key.is_some(),
        ),
        (
            "comments, blanks, other names and CRLF",
            "# my agent\r\n\r\n   # indented comment\r\nOTHER=1\r\nPATH=/nowhere\r\nTENERAL_PROVIDER=standin\r\nnot a setting at all\r\n",
            |s| s.provider == Provider::Standin,
        ),
        (
            "a value keeps every = after the first",
            "TENERAL_PROVIDER=compatible\nTENERAL_BASE_URL=https://h/v1\nTENERAL_API_KEY=a=b==\nTENERAL_MODEL=m\n",
            |s| s.api_key.as_ref().map(Secret::expose) == Some("a=b=="),
        ),
        (
            "a # inside a value is kept",
            "TENERAL_PROVIDER=standin\nTENERAL_MODEL=m#1\n",
            |s| s.model == "m#1",
        ),
        (
            "trailing slashes go",
            "TENERAL_BASE_URL=https://h:8443/api/v1//\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n",
            |s| s.base_url.as_deref() == Some("https://h:8443/api/v1"),
        ),
        (
            "an empty value reads as unset",
            "TENERAL_PROVIDER=standin\nTENERAL_REASONING_EFFORT=\nTENERAL_HEARTBEAT_MINUTES=\n",
            |s| s.reasoning_effort.is_none() && s.heartbeat_minutes == 30,
        ),
        (
            "every setting written",
            "TENERAL_PROVIDER=openai\nTENERAL_BASE_URL=https://proxy.example/v1/\n\
             TENERAL_API_KEY=sk\nTENERAL_MODEL=gpt-5\nTENERAL_REASONING_EFFORT=xhigh\n\
             TENERAL_HEARTBEAT_MINUTES=0\nTENERAL_CONTEXT_CHARS=1000\nTENERAL_CHECK_MINUTES=0\n\
             TENERAL_SMOKE_SECONDS=90\nTENERAL_UPSTREAM=origin/dev\nTENERAL_SPECIES=auto\n\
             TENERAL_PUBLISH=off\n",
            |s| {
                s.base_url.as_deref() == Some("https://proxy.example/v1")
                    && s.reasoning_effort.as_deref() == Some("xhigh")
                    && s.heartbeat_minutes == 0
                    && s.context_chars == 1000
                    && s.check_minutes == 0
                    && s.smoke_seconds == 90
                    && s.upstream.as_deref() == Some("origin/dev")
                    && s.species == Species::Auto
                    && s.publish == Species::Off
            },
        ),
        (
            "test knobs",
            "TENERAL_PROVIDER=standin\nTENERAL_TEST_READY_SECONDS=2\nTENERAL_TEST_REPLY_SECONDS=3\n\
             TENERAL_TEST_STOP_GRACE_SECONDS=0\nTENERAL_TEST_BACKOFF_MS=10\nTENERAL_TEST_LONG_RUN_SECONDS=4\n",
            |s| {
                s.test.timing
                    == Timing {
                        ready: Duration::from_secs(2),
                        first_reply: Duration::from_secs(3),
                        stop_grace: Duration::ZERO,
                        backoff_unit: Duration::from_millis(10),
                        long_run: Duration::from_secs(4),
                        check_limit: None,
                    }
            },
        ),
    ];
    for (what, text, check) in table {
        let settings = ok(text);
        assert!(check(&settings), "{what}: {settings:?}");
    }
}

#[test]
fn bad_files() {
    // (what, file, fragments the message must hold)
    let table: &[(&str, &str, &[&str])] = &[
        (
            "not a number",
            "TENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTES=abc\n",
            &[
                "TENERAL_HEARTBEAT_MINUTES=abc in .env line 2: not a whole number of minutes",
                "write e.g. TENERAL_HEARTBEAT_MINUTES=30, or 0 to turn the clock off",
            ],
        ),
        (
            "negative",
            "TENERAL_PROVIDER=standin\nTENERAL_SMOKE_SECONDS=-1\n",
            &["line 2", "0 for no limit"],
        ),
        (
            "too little context",
            "TENERAL_PROVIDER=standin\nTENERAL_CONTEXT_CHARS=999\n",
            &["TENERAL_CONTEXT_CHARS=999", "less than 1000", "TENERAL_CONTEXT_CHARS=250000"],
        ),
        (
            "double quotes",
            "TENERAL_PROVIDER=standin\nTENERAL_MODEL=\"m\"\n",
            &["line 2", "the value is in quotes", "without quotes or comments"],
        ),
        ("single quotes", "TENERAL_PROVIDER='standin'\n", &["line 1", "the value is in quotes"]),
        (
            "trailing comment",
            "TENERAL_PROVIDER=standin # for now\n",
            &["a comment follows the value", "without quotes or comments"],
        ),
        ("spaces around the value", "TENERAL_PROVIDER= standin\n", &["spaces around the value"]),
        (
            "misspelt name",
            "TENERAL_PROVIDER=standin\nTENERAL_HEARTBEAT_MINUTE=5\n",
            &["TENERAL_HEARTBEAT_MINUTE in .env line 2", "did you mean TENERAL_HEARTBEAT_MINUTES?"],
        ),
        (
            "small letters",
            "teneral_provider=standin\n",
            &["line 1", "write TENERAL_PROVIDER=<value> in capitals"],
        ),
        ("export", "export TENERAL_PROVIDER=standin\n", &["nothing before the name"]),
        ("space before =", "TENERAL_PROVIDER =standin\n", &["no space before ="]),
        ("an unknown kernel name", "TENERAL_HOME=/x\n", &["not a setting teneral knows"]),
        (
            "no =",
            "TENERAL_PROVIDER=standin\nTENERAL_MODEL\n",
            &["TENERAL_MODEL in .env line 2: no `=` after the name"],
        ),
        (
            "twice",
            "TENERAL_PROVIDER=standin\nTENERAL_MODEL=a\n\nTENERAL_MODEL=b\n",
            &["TENERAL_MODEL is set twice in .env, on lines 2 and 4"],
        ),
        (
            "empty file is compatible without an address",
            "",
            &["TENERAL_BASE_URL is not set in .env", "TENERAL_BASE_URL=https://host/v1"],
        ),
        (
            "compatible without a key",
            "TENERAL_BASE_URL=https://h/v1\nTENERAL_MODEL=m\n",
            &["TENERAL_API_KEY is not set", "compatible provider needs its key"],
        ),
        (
            "openai without a model",
            "TENERAL_PROVIDER=openai\nTENERAL_API_KEY=k\n",
            &["TENERAL_MODEL is not set", "openai provider needs the model's name"],
        ),
        (
            "a misspelt provider reads as compatible and says so",
            "TENERAL_PROVIDER=opneai\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n",
            &[
                "TENERAL_BASE_URL is not set",
                "TENERAL_PROVIDER=opneai on line 1",
                "so it means compatible",
            ],
        ),
        (
            "chatgpt with a key",
            "TENERAL_PROVIDER=chatgpt\nTENERAL_MODEL=m\nTENERAL_API_KEY=sk-secret\n",
            &["TENERAL_API_KEY=<redacted> in .env line 3", "must not have a key"],
        ),
        (
            "not http",
            "TENERAL_BASE_URL=ftp://h/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n",
            &["http:// or https://"],
        ),
        (
            "no scheme",
            "TENERAL_BASE_URL=h/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n",
            &["not an address"],
        ),
        (
            "unknown effort",
            "TENERAL_PROVIDER=standin\nTENERAL_REASONING_EFFORT=max\n",
            &["TENERAL_REASONING_EFFORT=max", "none, minimal, low, medium, high, xhigh"],
        ),
        (
            "unknown species",
            "TENERAL_PROVIDER=standin\nTENERAL_SPECIES=yes\n",
            &[
                "TENERAL_SPECIES=yes",
                "not one of ask, auto, off",
                "TENERAL_SPECIES=ask or auto or off",
            ],
        ),
        (
            "unknown publish",
            "TENERAL_PROVIDER=standin\nTENERAL_PUBLISH=Auto\n",
            &["TENERAL_PUBLISH=Auto"],
        ),
        (
            "unknown standin protocol",
            "TENERAL_PROVIDER=standin\nTENERAL_STANDIN_PROTOCOL=completions\n",
            &["TENERAL_STANDIN_PROTOCOL=chat or responses"],
        ),
        (
            "a ready window of nothing",
            "TENERAL_PROVIDER=standin\nTENERAL_TEST_READY_SECONDS=0\n",
            &["TENERAL_TEST_READY_SECONDS=0", "less than 1, the least allowed", "knob for tests"],
        ),
        (
            "backoff not a number",
            "TENERAL_PROVIDER=standin\nTENERAL_TEST_BACKOFF_MS=1s\n",
            &["milliseconds"],
        ),
    ];
    for (what, text, fragments) in table {
        let message = refused(text);
        for fragment in *fragments {
            assert!(message.contains(fragment), "{what}: {message:?} lacks {fragment:?}");
        }
    }
}

#[test]
fn the_key_never_shows_in_a_message() {
    let texts = [
        "TENERAL_BASE_URL=https://h/v1\nTENERAL_MODEL=m\nTENERAL_API_KEY=\"sk-hunter2\"\n",
        "TENERAL_BASE_URL=https://h/v1\nTENERAL_MODEL=m\nTENERAL_API_KEY=sk-hunter2 # mine\n",
        "TENERAL_PROVIDER=chatgpt\nTENERAL_MODEL=m\nTENERAL_API_KEY=sk-hunter2\n",
        "TENERAL_API_KEI=sk-hunter2\n",
    ];
    for text in texts {
        let message = refused(text);
        assert!(!message.contains("hunter2"), "{message}");
    }
    let settings = ok(COMPATIBLE);
    let printed = format!(
        "{settings:?} {}",
        settings.api_key.as_ref().map_or(String::new(), |k| k.to_string())
    );
    assert!(!printed.contains("sk-abc"), "{printed}");
    assert!(printed.contains("<redacted>"), "{printed}");
}

#[test]
fn a_misspelling_suggests_the_nearest_name() {
    let table = [
        ("TENERAL_MODLE", "TENERAL_MODEL"),
        ("TENERAL_APIKEY", "TENERAL_API_KEY"),
        ("TENERAL_BASEURL", "TENERAL_BASE_URL"),
        ("TENERAL_PUBLSH", "TENERAL_PUBLISH"),
        ("TENERAL_SMOKE_SECS", "TENERAL_SMOKE_SECONDS"),
    ];
    for (typo, meant) in table {
        match Settings::parse(&format!("TENERAL_PROVIDER=standin\n{typo}=1\n")) {
            Err(SettingsError::Unknown { line: 2, nearest, .. }) => {
                assert_eq!(nearest, meant, "{typo}")
            }
            other => panic!("{typo} should be refused as unknown: {other:?}"),
        }
    }
}

#[test]
fn egress_is_public_by_default_and_takes_a_list_or_off() {
    use crate::egress::Policy;
    let s = ok("TENERAL_PROVIDER=standin\n");
    assert_eq!((s.egress, s.test.egress_resolve), (Policy::Public, vec![]));
    let s = ok("TENERAL_PROVIDER=standin\nTENERAL_EGRESS=crates.io,github.com\n");
    assert_eq!(s.egress, Policy::Allow(vec!["crates.io".into(), "github.com".into()]));
    assert_eq!(ok("TENERAL_PROVIDER=standin\nTENERAL_EGRESS=off\n").egress, Policy::Off);
    let s = ok("TENERAL_PROVIDER=standin\nTENERAL_TEST_EGRESS_RESOLVE=A.test=127.0.0.1:8080\n");
    assert_eq!(
        s.test.egress_resolve,
        vec![("a.test".into(), "127.0.0.1:8080".parse().expect("an address"))]
    );
    let e = refused("TENERAL_PROVIDER=standin\nTENERAL_EGRESS=*.github.com\n");
    assert!(e.contains("line 2") && e.contains("write public, off, or host names"), "{e}");
    let e = refused("TENERAL_PROVIDER=standin\nTENERAL_TEST_EGRESS_RESOLVE=a.test=nowhere\n");
    assert!(e.contains("is not name=address:port"), "{e}");
}

// The `.env` as a file: `load` reads the one in home and names it in each
// message, nothing reads the process environment, and the example file the
// owner copies is accepted and names every setting.

#[test]
fn load_reads_the_env_in_home_and_names_it() {
    let home = tempfile::tempdir().expect("a temporary directory can be made");
    let path = home.path().join(".env");
    match Settings::load(home.path()) {
        Err(e @ SettingsError::Missing { .. }) => {
            let message = e.to_string();
            assert!(message.contains(&path.display().to_string()), "{message}");
            let setup = format!("teneralctl setup -d {}", home.path().display());
            assert!(message.contains(&setup), "the hint names the directory: {message}");
            assert!(message.contains("copy .env.example to .env"), "{message}");
        }
        other => panic!("an empty home should miss its .env: {other:?}"),
    }
    std::fs::write(&path, "TENERAL_PROVIDER=standin\nTENERAL_CHECK_MINUTES=x\n")
        .expect("the .env can be written in home");
    let message = Settings::load(home.path()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains(&format!("TENERAL_CHECK_MINUTES=x in {} line 2", path.display())),
        "{message}"
    );
    std::fs::write(&path, "TENERAL_PROVIDER=standin\n").expect("the .env can be written in home");
    let settings = Settings::load(home.path()).expect("a standin .env loads");
    assert_eq!(settings.provider, Provider::Standin);
}

#[test]
fn the_environment_is_not_consulted() {
    // Setting a variable in a test races other tests, so check the code
    // instead: nothing here reads the process environment.
    for (file, source) in [
        ("settings.rs", include_str!("../settings.rs")),
        ("dotenv.rs", include_str!("../../crates/core/src/dotenv.rs")),
        ("interpret.rs", include_str!("interpret.rs")),
        ("limits.rs", include_str!("limits.rs")),
        ("setting.rs", include_str!("../../crates/core/src/setting.rs")),
    ] {
        for word in ["env::var", "std::env", "dotenvy"] {
            assert!(!source.contains(word), "{file} uses {word}");
        }
    }
    let message = refused("TENERAL_PROVIDER=openai\nTENERAL_API_KEY=k\n");
    assert!(message.contains("TENERAL_MODEL is not set"), "{message}");
}

#[test]
fn the_example_file_is_accepted() {
    let example = include_str!("../../.env.example");
    let settings = ok(example);
    assert_eq!(settings.provider, Provider::Standin);
    // Every owner's setting is in the example, and no knob for tests.
    for setting in teneral_core::setting::OWNER {
        assert!(example.contains(setting.name), "{} is missing from .env.example", setting.name);
    }
    for setting in teneral_core::setting::TEST {
        assert!(!example.contains(setting.name), "{} is in .env.example", setting.name);
    }
}

/// Writing every setting's default from the table changes nothing: the
/// defaults the kernel takes are the table's.
#[test]
fn the_tables_defaults_are_the_settings() {
    let mut written = String::from("TENERAL_PROVIDER=standin\n");
    for setting in teneral_core::setting::all() {
        if !setting.default.is_empty() && setting.name != "TENERAL_PROVIDER" {
            written.push_str(&format!("{}={}\n", setting.name, setting.default));
        }
    }
    assert_eq!(ok(&written), ok("TENERAL_PROVIDER=standin\n"), "{written}");
    let unnamed = "TENERAL_BASE_URL=https://h/v1\nTENERAL_API_KEY=k\nTENERAL_MODEL=m\n";
    assert_eq!(ok(unnamed).provider, Provider::Compatible, "TENERAL_PROVIDER's default");
    assert_eq!(teneral_core::setting::default("TENERAL_PROVIDER"), "compatible");
}

/// What the kernel says of a `.env` its reader refuses is the reader's
/// message, word for word: the message every crate that reads `.env` gives.
#[test]
fn a_refused_file_gets_the_readers_message() {
    let home = tempfile::tempdir().expect("a temporary directory can be made");
    let path = home.path().join(".env");
    for text in [
        "TENERAL_PUBLISH=\"auto\"\n",
        "export TENERAL_PUBLISH=auto\n",
        "TENERAL_PUBLISH=auto\nTENERAL_PUBLISH=off\n",
    ] {
        std::fs::write(&path, text).expect("the .env can be written in home");
        let kernels = Settings::load(home.path()).err().map(|e| e.to_string());
        let readers = dotenv::read(text, &path.display().to_string()).err().map(|e| e.to_string());
        assert!(kernels.is_some(), "{text:?} was taken");
        assert_eq!(kernels, readers, "{text:?}");
    }
}
