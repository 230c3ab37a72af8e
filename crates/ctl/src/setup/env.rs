//! The new `.env` text: the provider's settings put in, every other line
//! kept as it was written (comments, blank lines, order).
//!
//! Invariants: pure; a line that sets one of [`PROVIDER_NAMES`] is replaced
//! or dropped, every other line is kept byte for byte; the provider's lines
//! go where its first line was (or at the end under a comment); a value that
//! `.env` could not hold as written (empty, spaces, quotes, `#`) is refused
//! before any text is made.

/// The settings that are about the provider; everything else is kept.
pub const PROVIDER_NAMES: &[&str] =
    &["TENERAL_PROVIDER", "TENERAL_BASE_URL", "TENERAL_API_KEY", "TENERAL_MODEL"];

/// A value `.env` cannot hold as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {problem}; {fix}")]
pub struct BadValue {
    pub what: &'static str,
    pub problem: &'static str,
    pub fix: &'static str,
}

/// Checks that `value` can be written as `NAME=value` and read back as it is.
pub fn check_value(what: &'static str, value: &str) -> Result<(), BadValue> {
    let bad = |problem, fix| Err(BadValue { what, problem, fix });
    if value.is_empty() {
        return bad("is empty", "type it again");
    }
    if value.chars().any(char::is_whitespace) {
        return bad("has spaces or line breaks in it", "paste it again without them");
    }
    if value.contains('#') || value.starts_with(['"', '\'']) {
        return bad(
            "has a # or starts with a quote, which .env cannot hold as written",
            "check that you pasted the right text",
        );
    }
    Ok(())
}

/// Checks an endpoint's address as the kernel will: http or https, with a host.
pub fn check_address(value: &str) -> Result<(), BadValue> {
    check_value("the address", value)?;
    let usable = reqwest::Url::parse(value)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some());
    if usable {
        Ok(())
    } else {
        Err(BadValue {
            what: "the address",
            problem: "is not an http:// or https:// address with a host",
            fix: "give the endpoint's base address, e.g. https://host/v1",
        })
    }
}

/// Whether `line` sets `name` (`NAME=...`, maybe after `export `).
fn sets(line: &str, name: &str) -> bool {
    let line = line.trim_start();
    let line = line.strip_prefix("export ").map_or(line, str::trim_start);
    line.strip_prefix(name).is_some_and(|rest| rest.trim_start().starts_with('='))
}

fn is_provider_line(line: &str) -> bool {
    PROVIDER_NAMES.iter().any(|name| sets(line, name))
}

/// The text of the new `.env`: `existing` with its provider lines replaced by
/// `settings` (`NAME`, value) and every other line kept.
pub fn merge(existing: &str, settings: &[(&str, &str)]) -> String {
    let block: String = settings.iter().map(|(name, value)| format!("{name}={value}\n")).collect();
    let mut out = String::with_capacity(existing.len() + block.len());
    let mut placed = false;
    for line in existing.split_inclusive('\n') {
        if is_provider_line(line) {
            if !placed {
                out.push_str(&block);
                placed = true;
            }
            continue;
        }
        out.push_str(line);
    }
    if !placed {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if !out.is_empty() {
            out.push_str("\n# The model provider (written by teneralctl setup).\n");
        }
        out.push_str(&block);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = &'static [(&'static str, &'static str)];

    const OPENAI: Pairs =
        &[("TENERAL_PROVIDER", "openai"), ("TENERAL_API_KEY", "sk-1"), ("TENERAL_MODEL", "gpt-5")];

    #[test]
    fn merges() {
        let table: &[(&str, Pairs, &str)] = &[
            // Nothing yet: just the provider.
            ("", OPENAI, "TENERAL_PROVIDER=openai\nTENERAL_API_KEY=sk-1\nTENERAL_MODEL=gpt-5\n"),
            // In place of the first provider line; the others dropped, the rest kept.
            (
                "# mine\nTENERAL_HEARTBEAT_MINUTES=5\nTENERAL_PROVIDER=compatible\nTENERAL_BASE_URL=http://x/v1\n\nTENERAL_API_KEY=old\nTENERAL_MODEL=m\nTENERAL_RUNNER=direct\n",
                OPENAI,
                "# mine\nTENERAL_HEARTBEAT_MINUTES=5\nTENERAL_PROVIDER=openai\nTENERAL_API_KEY=sk-1\nTENERAL_MODEL=gpt-5\n\nTENERAL_RUNNER=direct\n",
            ),
            // Commented examples and longer names that start alike are kept.
            (
                "# TENERAL_PROVIDER=compatible\nTENERAL_MODEL_X=1\nTENERAL_PROVIDER=standin\n",
                &[("TENERAL_PROVIDER", "standin")],
                "# TENERAL_PROVIDER=compatible\nTENERAL_MODEL_X=1\nTENERAL_PROVIDER=standin\n",
            ),
            // No provider line: appended under a comment, last line ended first.
            (
                "TENERAL_CONTEXT_CHARS=9000",
                &[("TENERAL_PROVIDER", "standin")],
                "TENERAL_CONTEXT_CHARS=9000\n\n# The model provider (written by teneralctl setup).\nTENERAL_PROVIDER=standin\n",
            ),
            // `export` lines and a key for standin are provider lines too.
            (
                "export TENERAL_API_KEY=k\nTENERAL_PROVIDER = x\nTENERAL_STANDIN_SCRIPT=s.json\n",
                &[("TENERAL_PROVIDER", "standin")],
                "TENERAL_PROVIDER=standin\nTENERAL_STANDIN_SCRIPT=s.json\n",
            ),
        ];
        for (existing, settings, expected) in table {
            assert_eq!(merge(existing, settings), *expected, "{existing:?}");
        }
    }

    #[test]
    fn values_env_can_hold() {
        let table: &[(&str, bool)] = &[
            ("sk-proj-abc_DEF.123", true),
            ("https://host:8443/v1", true),
            ("", false),
            ("two words", false),
            ("key\n", false),
            ("abc#def", false),
            ("\"quoted\"", false),
            ("'quoted'", false),
        ];
        for (value, ok) in table {
            assert_eq!(check_value("the key", value).is_ok(), *ok, "{value:?}");
        }
    }

    #[test]
    fn addresses_the_kernel_takes() {
        let table: &[(&str, bool)] = &[
            ("https://api.openai.com/v1", true),
            ("http://127.0.0.1:8080/v1", true),
            ("api.openai.com/v1", false),
            ("ftp://host/v1", false),
            ("http://", false),
            ("", false),
        ];
        for (value, ok) in table {
            assert_eq!(check_address(value).is_ok(), *ok, "{value:?}");
        }
    }
}
