//! The install is the owner's: the units, the `Containerfile`, `SIGNERS` and
//! the launcher come from the owner's checkout (HEAD of the individual's
//! directory), whatever a generation's commit holds. When a generation's
//! copies of [`INSTALL_PATHS`] differ from the install's, the kernel says so
//! once per generation: one log line and one `kernel.notice` holding
//! `install_differs` (the paths), which `teneralctl talk` shows like every
//! notice. The generation it was said for is kept in [`SAID_FILE`], so a
//! restart does not say it again.

use std::path::Path;

use git2::{Oid, Repository};

use teneral_core::fsutil;

/// The top-level paths of a tree that are the install's, not a generation's.
pub const INSTALL_PATHS: &[&str] = &["units", "Containerfile", "SIGNERS"];
/// The generation the difference was last said for.
pub const SAID_FILE: &str = ".teneral/install-differs";

/// The pure rule: of `(path, generation's object, install's object)`, the
/// paths whose objects differ (present in one tree only counts).
pub fn differing(entries: &[(&str, Option<Oid>, Option<Oid>)]) -> Vec<String> {
    entries.iter().filter(|(_, g, i)| g != i).map(|(p, _, _)| (*p).to_owned()).collect()
}

/// Which of [`INSTALL_PATHS`] differ between the trees of `generation` and
/// `install`.
pub fn differs(
    repo: &Repository,
    generation: Oid,
    install: Oid,
) -> Result<Vec<String>, git2::Error> {
    let generation = repo.find_commit(generation)?.tree()?;
    let install = repo.find_commit(install)?.tree()?;
    let entries: Vec<_> = INSTALL_PATHS
        .iter()
        .map(|p| (*p, generation.get_name(p).map(|e| e.id()), install.get_name(p).map(|e| e.id())))
        .collect();
    Ok(differing(&entries))
}

/// The line the kernel logs and journals.
pub fn words(generation: &str, paths: &[String]) -> String {
    format!(
        "generation {} holds other {} than the install: the install's are in effect; compare them \
         with `git diff HEAD {} -- {}` in the owner's checkout and take them with git pull there, \
         or not",
        teneral_core::commit::short(generation),
        paths.join(", "),
        generation,
        paths.join(" ")
    )
}

/// Whether the difference was said already for `generation`.
pub fn said_for(home: &Path, generation: &str) -> bool {
    std::fs::read_to_string(home.join(SAID_FILE)).is_ok_and(|s| s.trim() == generation)
}

/// Notes that it was said for `generation`.
pub fn mark_said(home: &Path, generation: &str) -> std::io::Result<()> {
    fsutil::write_atomic(&home.join(SAID_FILE), format!("{generation}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_paths_differ() {
        let a = Oid::from_str(&"a".repeat(40)).ok();
        let b = Oid::from_str(&"b".repeat(40)).ok();
        type Entry = (&'static str, Option<Oid>, Option<Oid>);
        let table: &[(&[Entry], &[&str])] = &[
            (&[("units", a, a), ("Containerfile", None, None), ("SIGNERS", b, b)], &[]),
            (&[("units", a, b), ("Containerfile", a, a), ("SIGNERS", None, None)], &["units"]),
            (
                &[("units", a, a), ("Containerfile", None, a), ("SIGNERS", b, None)],
                &["Containerfile", "SIGNERS"],
            ),
        ];
        for (entries, want) in table {
            assert_eq!(differing(entries), *want, "{entries:?}");
        }
    }

    #[test]
    fn the_words_say_what_to_do() {
        let text = words(&"c".repeat(40), &["units".into(), "SIGNERS".into()]);
        assert!(text.contains("other units, SIGNERS than the install"), "{text}");
        assert!(text.starts_with("generation ccccccc holds"), "{text}");
        let diff = format!("git diff HEAD {} -- units SIGNERS", "c".repeat(40));
        assert!(text.contains(&diff), "{text}");
    }
}
