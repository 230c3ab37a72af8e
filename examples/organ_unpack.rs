//! Behind `scripts/bench-organs`: unpacks one `.tar.gz` into a new
//! directory, one of three ways, and prints one line of `name=value`
//! figures (seconds; CPU is user plus system time):
//!
//! - `organ_unpack --tar ARCHIVE DEST`: GNU `tar -xzf`; `secs`, and `cpu`
//!   of tar and the gzip it runs.
//! - `organ_unpack ARCHIVE DEST`: the unpacker in this process (every check
//!   on, the archive hashed as it is read); `secs` and `cpu` of the unpack,
//!   then `sync`, the seconds syncing the tree to disk took, and `entries`,
//!   `bytes`, `sha256`.
//! - `organ_unpack --caged TENERAL ARCHIVE DEST`: the kernel's path at a
//!   start, `cache::make_tree` (`TENERAL unpack-organ` in the cage's unpack
//!   profile fed the archive as its stdin, the kernel hashing it beside,
//!   then the kernel's check of the tree, syncing it and renaming it into
//!   place) with DEST as the individual's directory. `secs` and `cpu` to
//!   the checked tree, what tar's figures compare with; `sync` to the tree
//!   in place; and the split from the step marks (`organs::steps`):
//!   `start` (the launch to the unpacker's first byte read), `unpack` (to
//!   its last byte written), `ended` (to the kernel seeing it end),
//!   `check`, `syncfs`, `rename`, each with its `_cpu`: the unpacker's for
//!   `start` and `unpack`, the kernel's process for the rest (`ended_cpu`
//!   is the kernel's from the launch, its hash of the archive included);
//!   `hash`, when the kernel's hash ended from the launch.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use teneral::organs::cache::{self, Cache};
use teneral::organs::steps::{self, Mark, Whose};
use teneral::sys::cpu_us;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, archive, dest] if flag == "--tar" => tar(archive, dest),
        [archive, dest] => in_process(archive, dest),
        [flag, teneral, archive, dest] if flag == "--caged" => {
            caged(&PathBuf::from(teneral), archive, dest)
        }
        _ => bail!("usage: organ_unpack [--tar | --caged TENERAL] ARCHIVE DEST"),
    }
}

/// CPU seconds, user plus system, from microseconds.
fn cpu(from: (u64, u64), to: (u64, u64)) -> f64 {
    (to.0 + to.1).saturating_sub(from.0 + from.1) as f64 / 1e6
}

fn tar(archive: &str, dest: &str) -> Result<()> {
    std::fs::create_dir(dest).with_context(|| format!("cannot make {dest}"))?;
    let before = cpu_us(true);
    let start = Instant::now();
    let status = std::process::Command::new("tar").args(["-xzf", archive, "-C", dest]).status()?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("tar: {status}");
    }
    println!("secs={secs:.3} cpu={:.3}", cpu(before, cpu_us(true)));
    Ok(())
}

fn in_process(archive: &str, dest: &str) -> Result<()> {
    std::fs::create_dir(dest).with_context(|| format!("cannot make {dest}"))?;
    let file = std::fs::File::open(archive).with_context(|| format!("cannot open {archive}"))?;
    let before = cpu_us(false);
    let start = Instant::now();
    let (summary, sha) = cache::unpack_file(file, dest.as_ref())?;
    let secs = start.elapsed().as_secs_f64();
    let after = cpu_us(false);
    let used = cpu(before, after);
    let (user, sys) = ((after.0 - before.0) as f64 / 1e6, (after.1 - before.1) as f64 / 1e6);
    // What the kernel adds before renaming a tree into place (tar does not).
    let dir = std::fs::File::open(dest)?;
    let synced = Instant::now();
    rustix::fs::syncfs(&dir)?;
    let sync = synced.elapsed().as_secs_f64();
    println!(
        "secs={secs:.3} cpu={used:.3} user={user:.3} sys={sys:.3} sync={sync:.3} entries={} \
         bytes={} sha256={sha}",
        summary.entries, summary.bytes
    );
    Ok(())
}

fn caged(teneral: &std::path::Path, archive: &str, dest: &str) -> Result<()> {
    std::fs::create_dir(dest).with_context(|| format!("cannot make {dest}"))?;
    let home = PathBuf::from(dest).canonicalize()?;
    // The pin: known before a real start unpacks.
    let sha = cache::hash(std::fs::File::open(archive)?)?;
    let file = cache::open_archive(archive.as_ref())
        .map_err(|e| anyhow::anyhow!("cannot open {archive}: {e}"))?;
    let cache = Cache::new(&home);
    steps::record();
    let start = (steps::now_ns(), cpu_us(false));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let tree = rt.block_on(async {
        teneral::spawn::start_reaper_of_own_children()?;
        let cage = teneral::confine::Cage::On { exe: teneral.to_owned(), pretend_missing: vec![] };
        let runner = teneral::runner::Runner::direct(cage);
        let unpacker = teneral::organs::Unpacker::new(&runner, teneral);
        anyhow::Ok(cache::make_tree(&cache, &sha, file, &unpacker).await?)
    })?;
    let marks = steps::take();
    let find = |step: &str, whose: Whose| -> Result<&Mark> {
        marks
            .iter()
            .find(|m| m.step == step && m.whose == whose)
            .with_context(|| format!("no step mark \"{step}\""))
    };
    let launch = find("cage starting", Whose::Kernel)?;
    let first = find("first byte read", Whose::Unpacker)?;
    let unpacked = find("unpacked", Whose::Unpacker)?;
    let ended = find("unpacker ended", Whose::Kernel)?;
    let hashed = find("the kernel's hash", Whose::Kernel)?;
    let checked = find("checked", Whose::Kernel)?;
    let synced = find("synced", Whose::Kernel)?;
    let renamed = find("renamed", Whose::Kernel)?;
    let secs = |from: i128, to: i128| (to - from) as f64 / 1e9;
    let used = |from: &Mark, to: &Mark| cpu((from.user_us, from.sys_us), (to.user_us, to.sys_us));
    let kernel_cpu = cpu(start.1, (checked.user_us, checked.sys_us));
    let unpacker_cpu = cpu((0, 0), (unpacked.user_us, unpacked.sys_us));
    let found = std::fs::read_dir(&tree)?.count();
    println!(
        "secs={:.3} cpu={:.3} sync={:.3} start={:.3} start_cpu={:.3} unpack={:.3} \
         unpack_cpu={:.3} unpack_user={:.3} unpack_sys={:.3} ended={:.3} ended_cpu={:.3} hash={:.3} check={:.3} check_cpu={:.3} \
         syncfs={:.3} syncfs_cpu={:.3} rename={:.3} rename_cpu={:.3} top={found} sha256={sha}",
        secs(start.0, checked.at_ns),
        kernel_cpu + unpacker_cpu,
        secs(start.0, renamed.at_ns),
        secs(launch.at_ns, first.at_ns),
        cpu((0, 0), (first.user_us, first.sys_us)),
        secs(first.at_ns, unpacked.at_ns),
        used(first, unpacked),
        (unpacked.user_us - first.user_us) as f64 / 1e6,
        (unpacked.sys_us - first.sys_us) as f64 / 1e6,
        secs(unpacked.at_ns, ended.at_ns),
        used(launch, ended),
        secs(launch.at_ns, hashed.at_ns),
        secs(ended.at_ns.max(hashed.at_ns), checked.at_ns),
        used(ended, checked),
        secs(checked.at_ns, synced.at_ns),
        used(checked, synced),
        secs(synced.at_ns, renamed.at_ns),
        used(synced, renamed),
    );
    Ok(())
}
