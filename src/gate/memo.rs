//! Verdicts of checks that passed, by the tree they read.
//!
//! A check's verdict depends only on the tree of the paths it reads and on
//! the toolchain, so a key made of the check's name, that tree's id and the
//! toolchain's version names the verdict exactly. Only passes are kept: a
//! failure is always checked again. The file is `.teneral/gate/memo.json`,
//! written atomically.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const MEMO_PATH: &str = ".teneral/gate/memo.json";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Memo {
    passed: BTreeSet<String>,
    #[serde(skip)]
    path: PathBuf,
}

/// The key of a check's verdict.
pub fn key(check: &str, tree: &str, toolchain: &str) -> String {
    format!("{check} {tree} {toolchain}")
}

impl Memo {
    /// Reads the memo; a missing or damaged one is empty (it only saves time).
    pub fn load(home: &Path) -> Memo {
        let path = home.join(MEMO_PATH);
        let mut memo: Memo = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        memo.path = path;
        memo
    }

    pub fn passed(&self, key: &str) -> bool {
        self.passed.contains(key)
    }

    /// Records a pass; a failure to write only costs a check next time.
    pub fn record(&mut self, key: String) {
        self.passed.insert(key);
        if let Ok(bytes) = serde_json::to_vec(self) {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = teneral_core::fsutil::write_atomic(&self.path, &bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_passes_across_loads() {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let k = key("kernel-tests", "abc", "rustc 1.95.0");
        let mut memo = Memo::load(dir.path());
        assert!(!memo.passed(&k));
        memo.record(k.clone());
        assert!(Memo::load(dir.path()).passed(&k));
        assert!(!Memo::load(dir.path()).passed(&key("kernel-tests", "abd", "rustc 1.95.0")));
        assert!(!Memo::load(dir.path()).passed(&key("kernel-tests", "abc", "rustc 1.96.0")));
    }
}
