//! The `.env` as a file: `load` reads the one in home and names it in each
//! message, nothing reads the process environment, and the example file
//! the owner copies is accepted and names every setting.

use super::super::*;
use super::{ok, refused};

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
        ("settings.rs", include_str!("../../settings.rs")),
        ("dotenv.rs", include_str!("../../../crates/core/src/dotenv.rs")),
        ("interpret.rs", include_str!("../interpret.rs")),
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
    let example = include_str!("../../../.env.example");
    let settings = ok(example);
    assert_eq!(settings.provider, Provider::Standin);
    // Every known name is mentioned in the example.
    for name in teneral_core::dotenv::NAMES {
        assert!(example.contains(name), "{name} is missing from .env.example");
    }
}
