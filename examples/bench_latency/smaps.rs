//! Where a process's memory goes, and which processes to measure: the body
//! under the cage's helper, the stand-in model beside it.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

pub fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// A process's memory from `/proc/<pid>/smaps`, in kB: totals and, for each
/// mapped file or kind of anonymous mapping, its resident and private
/// (copied on write: anonymous) pages.
pub struct Smaps {
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
    parts: BTreeMap<String, (u64, u64)>,
}

impl Smaps {
    pub fn read(pid: u32) -> Result<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
        let mut m = Smaps { rss: 0, pss: 0, anon: 0, parts: Default::default() };
        let mut part = String::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if !first.ends_with(':') {
                // A mapping's head: address perms offset dev inode [path].
                let path = words.nth(4).unwrap_or("");
                part = match path.rsplit_once('/') {
                    Some((_, name)) => name.to_owned(),
                    None if path.is_empty() => "[anonymous]".to_owned(),
                    None => path.to_owned(),
                };
                continue;
            }
            let kb: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let entry = m.parts.entry(part.clone()).or_default();
            match first {
                "Rss:" => {
                    m.rss += kb;
                    entry.0 += kb;
                }
                "Pss:" => m.pss += kb,
                "Anonymous:" => {
                    m.anon += kb;
                    entry.1 += kb;
                }
                _ => {}
            }
        }
        Ok(m)
    }

    /// The largest parts, biggest first: `name rss (anon)` in MB.
    pub fn parts(&self) -> String {
        let mut parts: Vec<_> = self.parts.iter().filter(|(_, (rss, _))| *rss >= 64).collect();
        parts.sort_by_key(|(_, (rss, _))| std::cmp::Reverse(*rss));
        let text: Vec<String> = parts
            .iter()
            .take(8)
            .map(|(name, (rss, anon))| format!("{name} {:.2} ({:.2} anon)", mb(*rss), mb(*anon)))
            .collect();
        text.join(", ")
    }
}

/// The body itself: the journal names the process the kernel started,
/// which may be the cage's helper with the body its descendant.
pub fn body_process(started: u32) -> u32 {
    let comm = std::fs::read_to_string(format!("/proc/{started}/comm")).unwrap_or_default();
    if comm.trim() == "teneral-body" {
        return started;
    }
    descendant_named(started, "teneral-body").unwrap_or(started)
}

/// A descendant of `pid` whose command name is `name`.
fn descendant_named(pid: u32, name: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).find_map(|c| {
        let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).ok()?;
        if comm.trim() == name {
            Some(c)
        } else {
            descendant_named(c, name)
        }
    })
}

/// A descendant of `pid` running the command `word` (its first argument;
/// the cage's helper, which names it after `--`, is looked through).
pub fn child_running(pid: u32, word: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).find_map(|c| {
        let cmd = std::fs::read(format!("/proc/{c}/cmdline")).ok()?;
        if cmd.split(|b| *b == 0).nth(1) == Some(word.as_bytes()) {
            Some(c)
        } else {
            child_running(c, word)
        }
    })
}

pub fn rss_mb(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<f64>().ok())
        .context("no VmRSS")?;
    Ok(kb / 1024.0)
}
