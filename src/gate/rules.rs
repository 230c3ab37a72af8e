//! The gate's pure rules: what `body/` may hold and when a test run counts
//! as passed. Which paths a mutation may change is the species rule's.

/// Git file modes of regular files (plain and executable).
const REGULAR: [i32; 2] = [0o100644, 0o100755];
const TREE: i32 = 0o040000;

/// Refuses anything in `body/` that is not a regular file or a directory:
/// symlinks, submodules.
pub fn check_body_entries(entries: &[(String, i32)]) -> Result<(), String> {
    let odd: Vec<String> = entries
        .iter()
        .filter(|(_, mode)| *mode != TREE && !REGULAR.contains(mode))
        .map(|(path, mode)| format!("{path} ({})", kind(*mode)))
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    Err(format!(
        "body/ may hold only regular files: {}. Replace them with regular files and ask again",
        odd.join(", ")
    ))
}

fn kind(mode: i32) -> &'static str {
    match mode {
        0o120000 => "a symbolic link",
        0o160000 => "a submodule",
        _ => "not a regular file",
    }
}

/// What a cargo test run printed, summed over its `test result:` lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestCount {
    pub passed: u64,
    pub failed: u64,
}

/// Sums every `test result: ... N passed; M failed; ...` line in `output`.
pub fn count_tests(output: &str) -> TestCount {
    let mut count = TestCount::default();
    for line in output.lines().filter(|l| l.trim_start().starts_with("test result:")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let n = pair[0].parse::<u64>().unwrap_or(0);
            match pair[1].trim_end_matches([';', ',']) {
                "passed" => count.passed += n,
                "failed" => count.failed += n,
                _ => {}
            }
        }
    }
    count
}

/// A test run counts only when it ran at least one test and none failed.
pub fn check_test_count(count: TestCount) -> Result<(), String> {
    if count.failed > 0 {
        return Err(format!("{} tests failed ({} passed)", count.failed, count.passed));
    }
    if count.passed == 0 {
        return Err("no test ran: a test run counts only when at least one test passes".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_holds_only_regular_files() {
        let ok = [
            ("body/src".to_owned(), TREE),
            ("body/a".to_owned(), 0o100644),
            ("body/b".to_owned(), 0o100755),
        ];
        assert!(check_body_entries(&ok).is_ok());
        let bad = [("body/link".to_owned(), 0o120000), ("body/sub".to_owned(), 0o160000)];
        let got = check_body_entries(&bad).err().unwrap_or_default();
        assert!(got.contains("body/link (a symbolic link), body/sub (a submodule)"), "{got}");
    }

    #[test]
    fn test_runs_are_counted_over_every_binary() {
        let out = "running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s\n\
                   test result: FAILED. 1 passed; 2 failed; 0 ignored\n   Doc-tests x\ntest result: ok. 0 passed; 0 failed;";
        assert_eq!(count_tests(out), TestCount { passed: 4, failed: 2 });
        assert!(check_test_count(count_tests(out))
            .err()
            .unwrap_or_default()
            .contains("2 tests failed"));
        let none = "test result: ok. 0 passed; 0 failed; 0 ignored";
        assert!(check_test_count(count_tests(none))
            .err()
            .unwrap_or_default()
            .contains("no test ran"));
        assert!(check_test_count(count_tests("")).is_err());
        assert!(check_test_count(TestCount { passed: 1, failed: 0 }).is_ok());
    }
}
