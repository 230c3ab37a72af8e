//! Names systemd gives things: a unit's D-Bus object path, and the
//! escaping `teneral@.service` instances use for an individual's directory.
//!
//! Pure functions, the same as systemd's own (`bus_label_escape`,
//! `systemd-escape --path`), so a name made here is the name systemd uses.

use std::path::Path;

use teneral_core::commit::Commit;

/// The object path of unit `name` on the manager's bus.
pub fn unit_path(name: &str) -> String {
    let mut out = String::from("/org/freedesktop/systemd1/unit/");
    for (i, b) in name.bytes().enumerate() {
        if b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// The instance name of `teneral@.service` for directory `dir` (an absolute
/// path), as `systemd-escape --path` writes it: `/home/me/agent` is
/// `home-me-agent`, and the unit's `%f` gives the path back.
pub fn instance_for(dir: &Path) -> String {
    let text = dir.to_string_lossy();
    let trimmed = text.trim_matches('/');
    if trimmed.is_empty() {
        return "-".to_owned();
    }
    let mut out = String::new();
    for (i, b) in trimmed.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b':' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// The unit a generation's body runs in: `teneral-gen-<short>.service`.
pub fn generation_unit(commit: &Commit) -> String {
    format!("teneral-gen-{}.service", commit.short())
}

/// The unit a step of building a body runs in:
/// `teneral-build-<short>-<step>-<place>.service`, where `place` tells
/// apart the target directories of individuals that build the same commit.
pub fn build_unit(commit: &Commit, step: &str, place: &str) -> String {
    build_unit_of(commit.short(), step, place)
}

/// The unit of a build step named by `tag` rather than a commit (a
/// kernel's key): `teneral-build-<tag>-<step>-<place>.service`.
pub fn build_unit_of(tag: &str, step: &str, place: &str) -> String {
    let tag = teneral_core::commit::short(tag);
    format!("teneral-build-{tag}-{step}-{place}.service")
}

/// The unit one gate check runs in: `teneral-gate-<short>-<check>.service`,
/// the check's name reduced to `a-z 0-9 -`.
pub fn gate_unit(candidate: &Commit, check: &str) -> String {
    check_unit(candidate.short(), check)
}

/// The unit of a check of something that is not a commit yet (`tag`, e.g.
/// `workspace`): `teneral-gate-<tag>-<check>.service`, both reduced to
/// `a-z 0-9 -`.
pub fn check_unit(tag: &str, check: &str) -> String {
    let plain = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect()
    };
    format!("teneral-gate-{}-{}.service", plain(tag), plain(check))
}

/// What a unit's `Description=` says: its name, and the individual (its
/// directory) it was started for, when there is one.
pub fn description(unit: &str, individual: Option<&str>) -> String {
    match individual {
        Some(home) => format!("teneral: {unit} for {home}"),
        None => format!("teneral: {unit}"),
    }
}

/// Of the units listed as (name, description, active state), those still
/// running (or starting, or stopping) that were started for `individual`:
/// the description must be exactly the one [`description`] gives.
pub fn leftovers(listed: &[(String, String, String)], individual: &str) -> Vec<String> {
    listed
        .iter()
        .filter(|(name, desc, _)| *desc == description(name, Some(individual)))
        .filter(|(_, _, state)| {
            matches!(state.as_str(), "active" | "activating" | "reloading" | "deactivating")
        })
        .map(|(name, _, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_individuals_running_units_are_leftovers() {
        let unit = |name: &str, home: Option<&str>, state: &str| {
            (name.to_owned(), description(name, home), state.to_owned())
        };
        let table = [
            (unit("teneral-gate-abc-clippy.service", Some("/a/me"), "active"), true),
            (unit("teneral-build-abc-cargo-x.service", Some("/a/me"), "activating"), true),
            (unit("teneral-gen-abc.service", Some("/a/me"), "deactivating"), true),
            (unit("teneral-gen-abc.service", Some("/a/me"), "failed"), false),
            (unit("teneral-gen-abc.service", Some("/a/me"), "inactive"), false),
            (unit("teneral-gen-abc.service", Some("/a/other"), "active"), false),
            (unit("teneral-gen-abc.service", Some("/b/a/me"), "active"), false),
            (unit("teneral-gen-abc.service", Some("/a/me/sub"), "active"), false),
            (unit("teneral-gen-abc.service", None, "active"), false),
            // A description made for another unit's name does not count.
            (
                (
                    "teneral-gen-abc.service".to_owned(),
                    description("teneral-gen-xyz.service", Some("/a/me")),
                    "active".to_owned(),
                ),
                false,
            ),
        ];
        for (row, want) in table {
            let got = leftovers(std::slice::from_ref(&row), "/a/me");
            assert_eq!(got.len() == 1, want, "{row:?}");
        }
    }

    #[test]
    fn object_paths_as_systemd_makes_them() {
        let table = [
            ("teneral-gen-abc1234.service", "teneral_2dgen_2dabc1234_2eservice"),
            ("dbus.socket", "dbus_2esocket"),
            ("1a.service", "_31a_2eservice"),
            ("a_b.service", "a_5fb_2eservice"),
        ];
        for (name, want) in table {
            assert_eq!(unit_path(name), format!("/org/freedesktop/systemd1/unit/{want}"));
        }
    }

    #[test]
    fn instances_as_systemd_escape_path_writes_them() {
        let table = [
            ("/home/me/agent", "home-me-agent"),
            ("/srv/my agent/", "srv-my\\x20agent"),
            ("/tmp/a-b", "tmp-a\\x2db"),
            ("/.hidden/x", "\\x2ehidden-x"),
            ("/", "-"),
        ];
        for (dir, want) in table {
            assert_eq!(instance_for(Path::new(dir)), want, "{dir}");
        }
    }

    #[test]
    fn unit_names() {
        let c = &Commit::parse("0123456789abcdef0123456789abcdef01234567").expect("a full id");
        assert_eq!(generation_unit(c), "teneral-gen-0123456.service");
        assert_eq!(gate_unit(c, "Kernel tests"), "teneral-gate-0123456-kernel-tests.service");
    }
}
