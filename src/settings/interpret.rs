//! Interpreting the entries of a `.env` as [`Settings`]: defaults, the
//! rules each provider has, and the refusals with what to write instead.
//!
//! Invariant: every refusal here points at the entry's line, or, for a setting
//! that is missing, says which provider needs it and why.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::{
    EvalsMode, Protocol, Provider, RunnerChoice, Secret, Settings, SettingsError, Species,
    TestKnobs, Timing,
};
use teneral_core::dotenv::{self as parse, choice, Entries, Entry};

const OPENAI_URL: &str = "https://api.openai.com/v1";
const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

pub(super) fn build(entries: &Entries<'_>) -> Result<Settings, SettingsError> {
    let written = entries.get("TENERAL_PROVIDER");
    let provider = match written.map(|e| e.value) {
        Some("standin") => Provider::Standin,
        Some("openai") => Provider::OpenAi,
        Some("chatgpt") => Provider::ChatGpt,
        _ => Provider::Compatible,
    };
    // The reference reads any other value as compatible; say so when that
    // leaves something missing, so a misspelt provider is still visible.
    let because = match written {
        Some(e) if e.value != "compatible" && provider == Provider::Compatible => format!(
            " (TENERAL_PROVIDER={} on line {} is not standin, compatible, openai or chatgpt, so it means compatible)",
            e.value, e.line
        ),
        _ => String::new(),
    };
    let absent = |name: &'static str, problem: String, fix: &str| SettingsError::Absent {
        file: entries.file.clone(),
        name,
        problem: format!("{problem}{because}"),
        fix: fix.to_owned(),
    };

    let protocol = match provider {
        Provider::Compatible => Protocol::Chat,
        Provider::OpenAi | Provider::ChatGpt => Protocol::Responses,
        Provider::Standin => choice(
            entries,
            "TENERAL_STANDIN_PROTOCOL",
            &[("chat", Protocol::Chat), ("responses", Protocol::Responses)],
        )?,
    };

    let written_url = match entries.get("TENERAL_BASE_URL") {
        Some(entry) => Some(base_url(entries, entry)?),
        None => None,
    };
    let base_url = match provider {
        Provider::Standin => None,
        Provider::ChatGpt => written_url,
        Provider::OpenAi => Some(written_url.unwrap_or_else(|| OPENAI_URL.to_owned())),
        Provider::Compatible => Some(written_url.ok_or_else(|| {
            absent(
                "TENERAL_BASE_URL",
                "the compatible provider needs the endpoint's address".to_owned(),
                "write e.g. TENERAL_BASE_URL=https://host/v1",
            )
        })?),
    };

    let key = entries.get(parse::SECRET_NAME);
    let api_key = match (provider, key) {
        (Provider::ChatGpt, Some(entry)) => {
            return Err(entries.refuse(
                parse::SECRET_NAME,
                entry,
                "the chatgpt provider signs in instead and must not have a key",
                "delete this line, or write TENERAL_PROVIDER=openai to use the key",
            ))
        }
        (Provider::Compatible | Provider::OpenAi, None) => {
            return Err(absent(
                parse::SECRET_NAME,
                format!("the {provider} provider needs its key"),
                "write TENERAL_API_KEY=<your key>, or run `teneralctl setup`",
            ))
        }
        (_, key) => key.map(|entry| Secret(entry.value.to_owned())),
    };

    let model = match (provider, entries.get("TENERAL_MODEL")) {
        (_, Some(entry)) => entry.value.to_owned(),
        (Provider::Standin, None) => "standin".to_owned(),
        (_, None) => {
            return Err(absent(
                "TENERAL_MODEL",
                format!("the {provider} provider needs the model's name"),
                "write e.g. TENERAL_MODEL=<a model that supports tool calls>",
            ))
        }
    };

    let reasoning_effort = match entries.get("TENERAL_REASONING_EFFORT") {
        Some(entry) if EFFORTS.contains(&entry.value) => Some(entry.value.to_owned()),
        Some(entry) => {
            return Err(entries.refuse(
                "TENERAL_REASONING_EFFORT",
                entry,
                "not a reasoning effort",
                "write one of none, minimal, low, medium, high, xhigh, or leave the line out",
            ))
        }
        None => None,
    };

    let species_choices = [("ask", Species::Ask), ("auto", Species::Auto), ("off", Species::Off)];
    Ok(Settings {
        provider,
        protocol,
        base_url,
        api_key,
        model,
        reasoning_effort,
        heartbeat_minutes: number(
            entries,
            "TENERAL_HEARTBEAT_MINUTES",
            0,
            &example("TENERAL_HEARTBEAT_MINUTES", ", or 0 to turn the clock off"),
        )?,
        context_chars: number(
            entries,
            "TENERAL_CONTEXT_CHARS",
            1000,
            &example("TENERAL_CONTEXT_CHARS", " (at least 1000)"),
        )?,
        check_minutes: number(
            entries,
            "TENERAL_CHECK_MINUTES",
            0,
            &example("TENERAL_CHECK_MINUTES", ", or 0 for no limit"),
        )?,
        smoke_seconds: number(
            entries,
            "TENERAL_SMOKE_SECONDS",
            0,
            &example("TENERAL_SMOKE_SECONDS", ", or 0 for no limit"),
        )?,
        evals: choice(
            entries,
            "TENERAL_EVALS",
            &[("off", EvalsMode::Off), ("report", EvalsMode::Report), ("gate", EvalsMode::Gate)],
        )?,
        upstream: entries.get("TENERAL_UPSTREAM").map(|e| e.value.to_owned()),
        species: choice(entries, "TENERAL_SPECIES", &species_choices)?,
        publish: choice(entries, "TENERAL_PUBLISH", &species_choices)?,
        standin_script: entries.get("TENERAL_STANDIN_SCRIPT").map(|e| PathBuf::from(e.value)),
        standin_log: entries.get("TENERAL_STANDIN_LOG").map(|e| PathBuf::from(e.value)),
        runner: choice(
            entries,
            "TENERAL_RUNNER",
            &[
                ("auto", RunnerChoice::Auto),
                ("systemd", RunnerChoice::Systemd),
                ("direct", RunnerChoice::Direct),
            ],
        )?,
        quota: super::limits::limits(entries)?,
        unsafe_unconfined: choice(
            entries,
            "TENERAL_UNSAFE_UNCONFINED",
            &[("1", true), ("0", false)],
        )?,
        warm_gate: choice(entries, "TENERAL_WARM_GATE", &[("on", true), ("off", false)])?,
        cage_zygote: choice(entries, "TENERAL_CAGE_ZYGOTE", &[("on", true), ("off", false)])?,
        log_format: choice(
            entries,
            "TENERAL_LOG_FORMAT",
            &[
                ("auto", teneral_core::log::Format::Auto),
                ("json", teneral_core::log::Format::Json),
                ("text", teneral_core::log::Format::Text),
            ],
        )?,
        egress: egress(entries)?,
        test: TestKnobs {
            timing: timing(entries)?,
            pretend_missing: pretend_missing(entries)?,
            egress_resolve: egress_resolve(entries)?,
        },
    })
}

fn timing(entries: &Entries<'_>) -> Result<Timing, SettingsError> {
    let seconds = |name: &'static str, least: u64| {
        let fix = format!(
            "write a whole number of seconds, at least {least}, or leave out this knob for tests"
        );
        number(entries, name, least, &fix).map(Duration::from_secs)
    };
    Ok(Timing {
        ready: seconds("TENERAL_TEST_READY_SECONDS", 1)?,
        first_reply: seconds("TENERAL_TEST_REPLY_SECONDS", 1)?,
        stop_grace: seconds("TENERAL_TEST_STOP_GRACE_SECONDS", 0)?,
        backoff_unit: number(
            entries,
            "TENERAL_TEST_BACKOFF_MS",
            0,
            "write a whole number of milliseconds, or leave out this knob for tests",
        )
        .map(Duration::from_millis)?,
        long_run: seconds("TENERAL_TEST_LONG_RUN_SECONDS", 1)?,
        check_limit: match entries.get("TENERAL_TEST_CHECK_SECONDS") {
            None => None,
            Some(_) => Some(seconds("TENERAL_TEST_CHECK_SECONDS", 1)?),
        },
    })
}

/// The confinement features a test pretends the running Linux lacks.
fn pretend_missing(entries: &Entries<'_>) -> Result<Vec<String>, SettingsError> {
    const NAME: &str = "TENERAL_TEST_PRETEND_MISSING";
    let Some(entry) = entries.get(NAME) else { return Ok(Vec::new()) };
    let words: Vec<String> = entry.value.split(',').map(|w| w.trim().to_owned()).collect();
    if let Some(bad) = words.iter().find(|w| !PRETENDABLE.contains(&w.as_str())) {
        return Err(entries.refuse(
            NAME,
            entry,
            &format!("{bad:?} is not a confinement feature"),
            "write a comma-separated list of landlock, seccomp, namespaces, or leave out this knob for tests",
        ));
    }
    Ok(words)
}

/// `TENERAL_EGRESS`: `public` (the default), `off`, or a list of names.
fn egress(entries: &Entries<'_>) -> Result<crate::egress::Policy, SettingsError> {
    const NAME: &str = "TENERAL_EGRESS";
    let Some(entry) = entries.get_or_default(NAME) else {
        return Ok(crate::egress::Policy::Public);
    };
    crate::egress::Policy::parse(entry.value).map_err(|problem| {
        entries.refuse(
            NAME,
            entry,
            &problem,
            "write public, off, or host names separated by commas (e.g. crates.io,github.com)",
        )
    })
}

/// `TENERAL_TEST_EGRESS_RESOLVE`: `name=address:port,...`, the egress
/// proxy's test hook.
fn egress_resolve(
    entries: &Entries<'_>,
) -> Result<Vec<(String, std::net::SocketAddr)>, SettingsError> {
    const NAME: &str = "TENERAL_TEST_EGRESS_RESOLVE";
    let Some(entry) = entries.get(NAME) else { return Ok(Vec::new()) };
    let mut map = Vec::new();
    for pair in entry.value.split(',') {
        let parsed = pair
            .split_once('=')
            .and_then(|(name, addr)| Some((name.trim(), addr.trim().parse().ok()?)))
            .filter(|(name, _)| !name.is_empty());
        let Some((name, addr)) = parsed else {
            return Err(entries.refuse(
                NAME,
                entry,
                &format!("{pair:?} is not name=address:port"),
                "write e.g. allowed.test=127.0.0.1:8080, or leave out this knob for tests",
            ));
        };
        map.push((name.to_ascii_lowercase(), addr));
    }
    Ok(map)
}

/// What `TENERAL_TEST_PRETEND_MISSING` may name.
pub const PRETENDABLE: &[&str] = &["landlock", "seccomp", "namespaces"];

/// What to write for `name`: its default from the table, then `rest`.
fn example(name: &str, rest: &str) -> String {
    format!("write e.g. {name}={}{rest}", teneral_core::setting::default(name))
}

/// A whole number no smaller than `least`, or the table's default when
/// unset.
fn number<T>(
    entries: &Entries<'_>,
    name: &'static str,
    least: T,
    fix: &str,
) -> Result<T, SettingsError>
where
    T: FromStr + PartialOrd + fmt::Display,
{
    let Some(entry) = entries.get_or_default(name) else {
        return Err(SettingsError::Absent {
            file: entries.file.clone(),
            name,
            problem: "it has no default".to_owned(),
            fix: fix.to_owned(),
        });
    };
    let unit = unit_of(name);
    match entry.value.parse::<T>() {
        Ok(n) if n >= least => Ok(n),
        Ok(_) => {
            Err(entries.refuse(name, entry, &format!("less than {least}, the least allowed"), fix))
        }
        Err(_) => Err(entries.refuse(name, entry, &format!("not a whole number of {unit}"), fix)),
    }
}

fn unit_of(name: &str) -> &'static str {
    if name.ends_with("_MINUTES") {
        "minutes"
    } else if name.ends_with("_SECONDS") {
        "seconds"
    } else if name.ends_with("_MS") {
        "milliseconds"
    } else {
        "characters"
    }
}

/// An `http://` or `https://` address with a host, without trailing slashes.
fn base_url(entries: &Entries<'_>, entry: Entry<'_>) -> Result<String, SettingsError> {
    let fix = "write the endpoint's base address, e.g. TENERAL_BASE_URL=https://host/v1";
    let parsed = reqwest::Url::parse(entry.value).map_err(|e| {
        entries.refuse("TENERAL_BASE_URL", entry, &format!("not an address ({e})"), fix)
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(entries.refuse(
            "TENERAL_BASE_URL",
            entry,
            "not an http:// or https:// address with a host",
            fix,
        ));
    }
    Ok(entry.value.trim_end_matches('/').to_owned())
}
