//! Writes docs/commands.md, docs/teneral.1 and docs/teneralctl.1 from the
//! clap definitions of both programs (`teneral::cli`, `teneralctl::cli`);
//! `scripts/gen-docs` runs it, and `tests/docs.rs` fails while they differ.
//!
//! An example of the kernel's package, not a command of either program: only
//! the repository needs it, and this is the one dev-only place that reaches
//! both definitions (the kernel's library, and `teneralctl` as a
//! dev-dependency).
use std::process::ExitCode;

use clap::CommandFactory;

fn main() -> ExitCode {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files =
        teneralctl::reference::files(teneral::cli::Cli::command(), teneralctl::cli::Cli::command());
    for (path, text) in files {
        let path = root.join(path);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("gen_docs: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
