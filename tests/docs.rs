//! The docs against the code they describe: the generated command reference
//! is current, and design.md's module table names the modules there are.
use std::collections::BTreeSet;
use std::path::Path;

use clap::CommandFactory;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn reference_is_current() {
    let files =
        teneralctl::reference::files(teneral::cli::Cli::command(), teneralctl::cli::Cli::command());
    let stale: Vec<&str> = files
        .iter()
        .filter(|(path, text)| {
            std::fs::read_to_string(root().join(path)).ok().as_ref() != Some(text)
        })
        .map(|(path, _)| *path)
        .collect();
    assert!(
        stale.is_empty(),
        "{} differ from the clap definitions: run scripts/gen-docs and commit the result",
        stale.join(", ")
    );
}

#[test]
fn teneralctl_man_prints_the_page_kept_in_docs() {
    let page = teneralctl::reference::man_page(teneralctl::cli::Cli::command());
    let kept = std::fs::read_to_string(root().join("docs/teneralctl.1"))
        .unwrap_or_else(|e| panic!("docs/teneralctl.1: {e}"));
    assert_eq!(page, kept, "`teneralctl man` differs from docs/teneralctl.1: run scripts/gen-docs");
}

/// The names in the first column of design.md's module table: `supervisor`
/// for a module of `src/`, `crates/core` for a package.
fn module_table_names(design: &str) -> Vec<String> {
    let section = design.split("\n## Modules\n").nth(1).unwrap_or("");
    let section = section.split("\n## ").next().unwrap_or("");
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| line.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The kernel's modules: each `src/<name>.rs` and `src/<name>/` but the crate
/// roots and the binaries; and each package in `crates/`, as `crates/<name>`.
fn modules_in_tree(root: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let entries = |dir: &Path| -> Vec<(String, bool)> {
        let listing = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        listing
            .map(|entry| entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())))
            .map(|entry| (entry.file_name().to_string_lossy().into_owned(), entry.path().is_dir()))
            .collect()
    };
    for (name, is_dir) in entries(&root.join("src")) {
        let module = match is_dir {
            true => Some(name.as_str()),
            false => name.strip_suffix(".rs"),
        };
        if let Some(module) = module.filter(|m| !matches!(*m, "lib" | "main" | "bin")) {
            names.insert(module.to_owned());
        }
    }
    for (name, is_dir) in entries(&root.join("crates")) {
        if is_dir && root.join("crates").join(&name).join("Cargo.toml").is_file() {
            names.insert(format!("crates/{name}"));
        }
    }
    names
}

/// What is wrong with a module table against the tree: each module it
/// lacks, each row naming one that is not there.
fn module_table_faults(table: &[String], tree: &BTreeSet<String>) -> Vec<String> {
    let listed: BTreeSet<&str> = table.iter().map(String::as_str).collect();
    let missing = tree.iter().filter(|m| !listed.contains(m.as_str())).map(|m| {
        format!("{m} is in the tree but not in docs/design.md's module table: add a row for it")
    });
    let gone = listed.iter().filter(|m| !tree.contains(**m)).map(|m| {
        format!("docs/design.md's module table names {m}, which the tree no longer has: remove or rename its row")
    });
    missing.chain(gone).collect()
}

#[test]
fn module_table_faults_name_what_is_missing_and_what_is_gone() {
    let tree: BTreeSet<String> = ["gate", "crates/core"].map(str::to_owned).into();
    let table = ["gate".to_owned(), "crates/core".to_owned()];
    assert!(module_table_faults(&table, &tree).is_empty());
    let faults = module_table_faults(&["gate".to_owned(), "confine".to_owned()], &tree);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("crates/core is in the tree but not"), "{faults:?}");
    assert!(faults[1].contains("names confine, which the tree no longer has"), "{faults:?}");
    let design = "# D\n\n## Modules\n\n| module | what |\n|---|---|\n\
                  | `standin`, `proxy` | the model, with `code` in the text |\n\n## Next\n\n\
                  | `other` | not the table |\n";
    assert_eq!(module_table_names(design), ["standin", "proxy"]);
}

#[test]
fn design_module_table_names_the_modules_of_the_tree() {
    let design = std::fs::read_to_string(root().join("docs/design.md"))
        .unwrap_or_else(|e| panic!("docs/design.md: {e}"));
    let faults = module_table_faults(&module_table_names(&design), &modules_in_tree(root()));
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}
