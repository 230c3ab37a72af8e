//! What the kernel lets go of once a body runs: memory only its start used.
//!
//! The start (the reconcile, the body's build, the cage, the model and the
//! proxies) runs code and grows a heap an idle kernel does not touch again.
//! Kept, that was about a third of an idle kernel's resident memory (whose
//! goal is 8 MB at most). So once the body is started:
//! - glibc's free heap pages go back to Linux;
//! - Linux is asked to reclaim the pages of the kernel's own executable
//!   (`MADV_PAGEOUT`, a hint that never changes what memory holds). A page
//!   the kernel runs again comes back from the file; the code of an owner
//!   line and a turn is back after the first ones.
//!
//! Both are best effort: an older Linux without `MADV_PAGEOUT` keeps the
//! pages, and nothing depends on it.

use crate::sys;
use teneral_core::log;

/// Lets go of the start's memory (see the module's doc).
pub fn let_go() {
    sys::trim_heap();
    let maps = match std::fs::read_to_string("/proc/self/maps") {
        Ok(maps) => maps,
        Err(e) => {
            log::warn(format!("cannot read /proc/self/maps: {e}"));
            return;
        }
    };
    // An address inside this program's code names its file.
    let here = let_go as fn() as usize;
    for (start, end) in mappings_of_file_at(&maps, here) {
        // EINVAL: a Linux older than 5.4; the pages just stay.
        if let Err(e) = sys::page_out(start, end - start) {
            if e.raw_os_error() != Some(libc::EINVAL) {
                log::warn(format!("cannot page out the kernel's start code: {e}"));
            }
            return;
        }
    }
}

/// The ranges of every mapping of the file mapped at `addr`, from the text
/// of `/proc/<pid>/maps`; none when `addr` is in no mapping of a file.
fn mappings_of_file_at(maps: &str, addr: usize) -> Vec<(usize, usize)> {
    let entries: Vec<(usize, usize, &str, &str)> = maps.lines().filter_map(entry).collect();
    let Some(&(_, _, dev, inode)) = entries.iter().find(|(s, e, _, _)| (*s..*e).contains(&addr))
    else {
        return Vec::new();
    };
    if inode == "0" {
        return Vec::new();
    }
    entries.iter().filter(|m| m.2 == dev && m.3 == inode).map(|m| (m.0, m.1)).collect()
}

/// One line of maps: `start-end perms offset dev inode [path]`.
fn entry(line: &str) -> Option<(usize, usize, &str, &str)> {
    let mut words = line.split_whitespace();
    let (start, end) = words.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let (_perms, _offset) = (words.next()?, words.next()?);
    let (dev, inode) = (words.next()?, words.next()?);
    (start < end).then_some((start, end, dev, inode))
}

#[cfg(test)]
mod tests {
    use super::mappings_of_file_at;

    const MAPS: &str = "\
55d000-55e000 r--p 00000000 fd:00 4242 /usr/bin/teneral
55e000-560000 r-xp 00001000 fd:00 4242 /usr/bin/teneral
560000-561000 rw-p 00003000 fd:00 4242 /usr/bin/teneral
561000-562000 rw-p 00000000 00:00 0 [heap]
7f0000-7f1000 r-xp 00000000 fd:00 77 /usr/lib/libc.so.6
7f1000-7f2000 r-xp 00000000 fd:01 4242 /other/device/same/inode
7f3000-7f4000 rw-p 00000000 00:00 0
bad line
";

    #[test]
    fn every_mapping_of_the_file_at_the_address_and_nothing_else() {
        let teneral = vec![(0x55d000, 0x55e000), (0x55e000, 0x560000), (0x560000, 0x561000)];
        let table: &[(usize, Vec<(usize, usize)>)] = &[
            (0x55e800, teneral.clone()),
            (0x55d000, teneral),
            (0x7f0010, vec![(0x7f0000, 0x7f1000)]),
            // The same inode on another device is another file.
            (0x7f1000, vec![(0x7f1000, 0x7f2000)]),
            // Anonymous memory names no file; an end is outside its mapping.
            (0x561000, vec![]),
            (0x7f3000, vec![]),
            (0x562000, vec![]),
            (0x1000, vec![]),
        ];
        for (addr, want) in table {
            assert_eq!(&mappings_of_file_at(MAPS, *addr), want, "{addr:#x}");
        }
        assert_eq!(mappings_of_file_at("", 0x55e800), vec![]);
    }
}
