//! What a kernel in a Kubernetes pod leans on (docs/kubernetes.md): its log
//! as JSON lines a cluster's collector reads, and its settings from a
//! further file, where a Secret is mounted.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const LONG: Duration = Duration::from_secs(240);

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
"#;

/// Under `TENERAL_LOG_FORMAT=json` every line the kernel writes is one JSON
/// object with the journal's fields; the lines about the generation carry
/// its commit and ordinal, and the individual's directory.
#[test]
fn the_log_as_json_lines_carries_the_journal_fields() -> TestResult {
    let ind = Individual::new(SCRIPT, &["TENERAL_LOG_FORMAT=json"])?;
    let commit = ind.head()?;
    let mut kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(Duration::from_secs(60))?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    // The lines before the settings are read follow the default: into a
    // file, text. Every line after them is JSON.
    let lines: Vec<&str> = log.lines().skip_while(|l| !l.starts_with('{')).collect();
    assert!(lines.len() >= 3, "too few JSON lines:\n{log}");
    let dir = ind.path().canonicalize()?.display().to_string();
    let mut about_the_generation = 0;
    for line in &lines {
        let object: Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}\n{log}"))?;
        for field in ["ts", "tag", "message", "priority", "event"] {
            assert!(!object[field].is_null(), "{field} missing: {line}");
        }
        assert!(object["priority"].as_u64().is_some_and(|p| (3..=7).contains(&p)), "{line}");
        assert_eq!(object["individual"], Value::String(dir.clone()), "{line}");
        if object["commit"] == Value::String(commit.clone()) {
            assert_eq!(object["generation"], 1, "{line}");
            about_the_generation += 1;
        }
    }
    assert!(about_the_generation >= 2, "no line names the generation:\n{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#""event":"kernel.stopped""#) || l.contains("supervising")),
        "{log}"
    );
    Ok(())
}

/// `TENERAL_ENV_FILE` names a file outside the individual's directory; the
/// kernel takes its settings from both files (here the log's format), and a setting in both is
/// refused at start with the two lines named.
#[test]
fn settings_come_from_the_file_env_names_too() -> TestResult {
    let secret = tempfile::tempdir()?;
    let file = secret.path().join("settings.env");
    std::fs::write(&file, "TENERAL_LOG_FORMAT=json\n")?;
    let line = format!("TENERAL_ENV_FILE={}", file.display());
    let ind = Individual::new(SCRIPT, &[&line])?;
    let mut kernel = ind.start()?;
    ind.wait_for("ready", LONG, |e| e["type"] == "generation.ready")?;
    kernel.signal(libc::SIGTERM);
    assert_eq!(kernel.wait(Duration::from_secs(60))?, Some(0), "{}", ind.kernel_log());
    let log = ind.kernel_log();
    assert!(
        log.lines().any(|l| l.starts_with("{\"ts\":")),
        "the named file's setting holds:\n{log}"
    );

    std::fs::write(&file, "TENERAL_HEARTBEAT_MINUTES=5\n")?;
    let mut kernel = ind.start()?;
    let status = kernel.wait(Duration::from_secs(60))?;
    let log = ind.kernel_log();
    assert_ne!(status, Some(0), "{log}");
    let said =
        format!("TENERAL_HEARTBEAT_MINUTES is set in both {}", ind.path().join(".env").display());
    assert!(log.contains(&said) && log.contains(&file.display().to_string()), "{log}");
    Ok(())
}
