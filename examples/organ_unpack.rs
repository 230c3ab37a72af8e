//! Behind `scripts/bench-organs`: unpacks one `.tar.gz` the way the kernel
//! unpacks an organ (every check on, the archive hashed as it is read) into
//! a new directory, and prints the seconds it took, the seconds syncing the
//! tree to disk then took, the entries, the bytes and the archive's SHA-256.
//!
//! Usage: organ_unpack ARCHIVE DEST (DEST must not exist): the unpacker in
//! this process. organ_unpack --caged TENERAL ARCHIVE DEST: the kernel's
//! path, `TENERAL unpack-organ` in the cage's unpack profile fed through
//! its stdin, then the kernel's check of the tree; the entries and bytes
//! are the check's count.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use teneral::organs::cache::{self, Cache};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (caged, archive, dest) = match args.as_slice() {
        [archive, dest] => (None, archive, dest),
        [flag, teneral, archive, dest] if flag == "--caged" => {
            (Some(PathBuf::from(teneral)), archive, dest)
        }
        _ => bail!("usage: organ_unpack [--caged TENERAL] ARCHIVE DEST"),
    };
    std::fs::create_dir(dest).with_context(|| format!("cannot make {dest}"))?;
    let file = std::fs::File::open(archive).with_context(|| format!("cannot open {archive}"))?;
    // The pin, for the caged path: known before a real start unpacks.
    let pin = match caged {
        Some(_) => cache::hash(std::fs::File::open(archive)?)?,
        None => String::new(),
    };
    let start = Instant::now();
    let (entries, bytes, sha) = match caged {
        None => {
            let (summary, sha) = cache::unpack_file(file, dest.as_ref())?;
            (u64::from(summary.entries), summary.bytes, sha)
        }
        Some(teneral) => caged_unpack(&teneral, &pin, &Path::new(dest).canonicalize()?, file)?,
    };
    let secs = start.elapsed().as_secs_f64();
    // What the kernel adds before renaming a tree into place (tar does not).
    let dir = std::fs::File::open(dest)?;
    let synced = Instant::now();
    rustix::fs::syncfs(&dir)?;
    let sync_secs = synced.elapsed().as_secs_f64();
    println!("{secs:.3} {sync_secs:.3} {entries} {bytes} {sha}");
    Ok(())
}

/// The kernel's path into `dest`, an empty directory of the individual
/// beside it, for an archive pinned as `pin`: the caged unpacker, then the
/// check.
fn caged_unpack(
    teneral: &Path,
    pin: &str,
    dest: &Path,
    file: std::fs::File,
) -> Result<(u64, u64, String)> {
    let sha = pin.to_owned();
    let home = dest.parent().context("DEST has a parent")?;
    let cache = Cache::new(home);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        teneral::spawn::start_reaper_of_own_children()?;
        let cage = teneral::confine::Cage::On { exe: teneral.to_owned(), pretend_missing: vec![] };
        let runner = teneral::runner::Runner::direct(cage);
        let unpacker = teneral::organs::Unpacker::new(&runner, teneral);
        let found = cache::unpack_and_check(&cache, &sha, file, &unpacker, dest, dest).await?;
        Ok((u64::from(found.entries), found.bytes, sha))
    })
}
