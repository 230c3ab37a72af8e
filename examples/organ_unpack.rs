//! Behind `scripts/bench-organs`: unpacks one `.tar.gz` the way the kernel
//! unpacks an organ (every check on, the archive hashed as it is read) into
//! a new directory, and prints the seconds it took, the seconds syncing the
//! tree to disk then took, the entries, the bytes and the archive's SHA-256.
//!
//! Usage: organ_unpack ARCHIVE DEST (DEST must not exist).

use std::time::Instant;

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [archive, dest] = args.as_slice() else { bail!("usage: organ_unpack ARCHIVE DEST") };
    std::fs::create_dir(dest).with_context(|| format!("cannot make {dest}"))?;
    let start = Instant::now();
    let file = std::fs::File::open(archive).with_context(|| format!("cannot open {archive}"))?;
    let (summary, sha) = teneral::organs::cache::unpack_file(file, dest.as_ref())?;
    let secs = start.elapsed().as_secs_f64();
    // What the kernel adds before renaming a tree into place (tar does not).
    let dir = std::fs::File::open(dest)?;
    let synced = Instant::now();
    rustix::fs::syncfs(&dir)?;
    let sync_secs = synced.elapsed().as_secs_f64();
    println!("{secs:.3} {sync_secs:.3} {} {} {sha}", summary.entries, summary.bytes);
    Ok(())
}
