//! Whether a lockfile's crates are all in cargo's cache already, so that the
//! gate's uncaged `cargo fetch` before the checks can be left out: a check
//! runs `--offline` in the cage, where cargo finds a crate only when its
//! index entry, its `.crate` file and its unpacked sources are all there.
//!
//! The decision is pure ([`missing`]: a lockfile and a question about one
//! file); [`all_cached`] asks the question of the cargo home. Anything it
//! cannot vouch for (a git or a path source it cannot see, another
//! registry, a lockfile it cannot read) means "fetch".

use std::path::{Path, PathBuf};

/// The crates.io index, as a lockfile names it.
const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";
const CRATES_IO_SPARSE: &str = "sparse+https://index.crates.io/";

/// One package of a lockfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// `None`: a path dependency (the workspace's own crates).
    pub source: Option<String>,
}

/// The packages of a `Cargo.lock`; `None` when it is not one this reads.
pub fn packages(lock: &str) -> Option<Vec<Package>> {
    let mut all = Vec::new();
    let mut this: Option<Package> = None;
    for line in lock.lines().map(str::trim) {
        if line == "[[package]]" {
            all.extend(this.take());
            this = Some(Package { name: String::new(), version: String::new(), source: None });
            continue;
        }
        if line.starts_with('[') {
            all.extend(this.take());
            continue;
        }
        let Some(package) = this.as_mut() else { continue };
        let Some((key, value)) = line.split_once(" = ") else { continue };
        let value = || value.strip_prefix('"')?.strip_suffix('"').map(str::to_owned);
        match key {
            "name" => package.name = value()?,
            "version" => package.version = value()?,
            "source" => package.source = Some(value()?),
            _ => {}
        }
    }
    all.extend(this);
    if all.iter().any(|p| p.name.is_empty() || p.version.is_empty()) {
        return None;
    }
    Some(all)
}

/// The files, relative to one index's directories of the cargo home, that an
/// offline build of `package` (from crates.io) reads: its index entry (in
/// `registry/index/<index>/.cache/`), its `.crate` (in
/// `registry/cache/<index>/`) and the mark of its unpacked sources (in
/// `registry/src/<index>/`).
pub fn needed_files(package: &Package) -> [(Part, String); 3] {
    let name = package.name.to_lowercase();
    let prefix = match name.len() {
        1 => "1".to_owned(),
        2 => "2".to_owned(),
        3 => format!("3/{}", &name[..1]),
        _ => format!("{}/{}", &name[..2], &name[2..4]),
    };
    let crate_dir = format!("{}-{}", package.name, package.version);
    [
        (Part::Index, format!(".cache/{prefix}/{name}")),
        (Part::Cache, format!("{crate_dir}.crate")),
        (Part::Src, format!("{crate_dir}/.cargo-ok")),
    ]
}

/// The three places of one registry index in the cargo home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Index,
    Cache,
    Src,
}

impl Part {
    fn dir(self) -> &'static str {
        match self {
            Part::Index => "registry/index",
            Part::Cache => "registry/cache",
            Part::Src => "registry/src",
        }
    }
}

/// The first package of `lock` an offline build could not find, as words;
/// `None`: every one is there. `has(part, file)` says whether the file is in
/// that part of the crates.io index's directories.
pub fn missing(lock: &str, has: impl Fn(Part, &str) -> bool) -> Option<String> {
    let Some(packages) = packages(lock) else {
        return Some("a lockfile this cannot read".to_owned());
    };
    for package in &packages {
        match package.source.as_deref() {
            None => continue,
            Some(CRATES_IO | CRATES_IO_SPARSE) => {}
            Some(other) => return Some(format!("{} from {other}", package.name)),
        }
        if let Some((_, file)) = needed_files(package).into_iter().find(|(p, f)| !has(*p, f)) {
            return Some(format!("{} {} ({file})", package.name, package.version));
        }
    }
    None
}

/// Whether every crate of the lockfile at `lock` is in the cargo home's
/// cache for crates.io, under one index directory.
pub fn all_cached(lock: &Path) -> bool {
    let (Ok(text), Some(home)) = (std::fs::read_to_string(lock), cargo_home()) else {
        return false;
    };
    // The index's directory name (`index.crates.io-<hash>`) is cargo's own:
    // any one that holds every file will do.
    let Ok(indexes) = std::fs::read_dir(home.join(Part::Src.dir())) else { return false };
    indexes.flatten().any(|index| {
        let index = index.file_name();
        let has = |part: Part, file: &str| {
            std::fs::symlink_metadata(home.join(part.dir()).join(&index).join(file)).is_ok()
        };
        missing(&text, has).is_none()
    })
}

fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"# This file is automatically @generated by Cargo.
version = 4

[[package]]
name = "serde"
version = "1.0.228"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "abc"
dependencies = [
 "serde_derive",
]

[[package]]
name = "teneral-body"
version = "0.1.0"

[[package]]
name = "cc"
version = "1.2.0"
source = "sparse+https://index.crates.io/"
"#;

    #[test]
    fn what_an_offline_build_needs_of_the_cache() {
        let all = |_: Part, _: &str| true;
        let without = |gone: &'static str| move |_: Part, f: &str| f != gone;
        let git = LOCK.replace("sparse+https://index.crates.io/", "git+https://example.org/cc#1");
        type Has = Box<dyn Fn(Part, &str) -> bool>;
        let cases: Vec<(&str, String, Has, Option<&str>)> = vec![
            ("everything is there", LOCK.into(), Box::new(all), None),
            (
                "an index entry is gone",
                LOCK.into(),
                Box::new(without(".cache/se/rd/serde")),
                Some("serde 1.0.228 (.cache/se/rd/serde)"),
            ),
            (
                "a .crate is gone",
                LOCK.into(),
                Box::new(without("cc-1.2.0.crate")),
                Some("cc 1.2.0 (cc-1.2.0.crate)"),
            ),
            (
                "sources not unpacked",
                LOCK.into(),
                Box::new(without("serde-1.0.228/.cargo-ok")),
                Some("serde 1.0.228 (serde-1.0.228/.cargo-ok)"),
            ),
            (
                "a git source is always fetched",
                git,
                Box::new(all),
                Some("cc from git+https://example.org/cc#1"),
            ),
            (
                "a lockfile with a package without a version",
                "[[package]]\nname = \"x\"\n".into(),
                Box::new(all),
                Some("a lockfile this cannot read"),
            ),
        ];
        for (what, lock, has, want) in cases {
            assert_eq!(missing(&lock, has).as_deref(), want, "{what}");
        }
    }

    #[test]
    fn index_entries_are_where_cargo_puts_them() {
        let at = |name: &str| {
            let p = Package { name: name.into(), version: "1.0.0".into(), source: None };
            needed_files(&p)[0].1.clone()
        };
        assert_eq!(at("a"), ".cache/1/a");
        assert_eq!(at("cc"), ".cache/2/cc");
        assert_eq!(at("syn"), ".cache/3/s/syn");
        assert_eq!(at("Inflector"), ".cache/in/fl/inflector");
    }
}
