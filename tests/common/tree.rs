//! Trees and commits the tests make: real git repositories, through git2.

use std::path::Path;

use git2::{IndexAddOption, Repository, Signature};

/// Commits everything in the repository at `dir` (made if missing) on HEAD.
pub fn commit_all(dir: &Path, message: &str) -> Result<String, git2::Error> {
    let repo = match Repository::open(dir) {
        Ok(r) => r,
        Err(_) => Repository::init(dir)?,
    };
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("test", "test@localhost")?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<_> = parent.iter().collect();
    Ok(repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)?.to_string())
}

/// Copies a directory tree, leaving out `target/`.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}
