//! Compiles the seccomp profile (`seccomp/teneral.json`) to BPF for the
//! machine teneral is built on, so that the cage's helper loads the filter
//! instead of compiling it at every start (see `helper`). When the target
//! is not this machine, or libseccomp cannot compile it here, the file
//! written is empty and the helper compiles the profile itself.

#[path = "src/filter.rs"]
#[allow(dead_code)]
mod filter;

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// What the cage is built from, relative to this crate: its sources, the
/// seccomp profile and the workspace's lock (which pins its dependencies).
const SOURCES: [&str; 3] = ["src", "../../seccomp", "../../Cargo.lock"];

fn main() {
    for source in SOURCES {
        println!("cargo:rerun-if-changed={source}");
    }
    source_id();
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=no OUT_DIR; the seccomp profile is compiled at run time");
        return;
    };
    let path = out.join("teneral.bpf");
    let native = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    let compiled = if native {
        filter::compile(filter::PROFILE_JSON, &path)
    } else {
        Err("the target is another machine".into())
    };
    if let Err(e) = compiled {
        println!("cargo:warning=the seccomp profile is compiled at run time: {e}");
        if let Err(e) = std::fs::write(&path, b"") {
            println!("cargo:warning=cannot write {}: {e}", path.display());
        }
    }
}

/// `TENERAL_SOURCE_ID`: a hash of the sources the cage is built from. The
/// kernel hands it to `teneral-confine`, which refuses to confine anything
/// for a kernel whose cage is of other sources (a helper left behind by
/// `cargo build --bin teneral` would otherwise run a cage older than the
/// kernel asks for). The kernel's own sources are not in it: what the
/// kernel decides reaches the helper as a plan, whose encoding is here.
fn source_id() {
    let mut files = Vec::new();
    for root in SOURCES {
        collect(Path::new(root), &mut files);
    }
    files.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in &files {
        file.hash(&mut hasher);
        std::fs::read(file).unwrap_or_default().hash(&mut hasher);
    }
    println!("cargo:rustc-env=TENERAL_SOURCE_ID={:016x}", hasher.finish());
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    match std::fs::read_dir(path) {
        Ok(entries) => {
            for entry in entries.flatten() {
                collect(&entry.path(), files);
            }
        }
        Err(_) if path.is_file() => files.push(path.to_owned()),
        Err(_) => {}
    }
}
