//! Compiles the seccomp profile (`seccomp/teneral.json`) to BPF for the
//! machine teneral is built on, so that the cage's helper loads the filter
//! instead of compiling it at every start (see `confine::helper`). When the
//! target is not this machine, or libseccomp cannot compile it here, the
//! file written is empty and the helper compiles the profile itself.

#[path = "src/confine/filter.rs"]
#[allow(dead_code)]
mod filter;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=seccomp/teneral.json");
    println!("cargo:rerun-if-changed=src/confine/filter.rs");
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
