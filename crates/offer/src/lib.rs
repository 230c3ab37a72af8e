//! Offering a change to the species: the scan, the
//! individual's key and the check, shared by the kernel and `teneralctl`.
//!
//! A check reads an `offer/<name>` branch since the species' head
//! ([`read`]), scans every path, added line and message of it ([`scan`]),
//! verifies that each commit is signed by the individual's key and that the
//! last message is complete ([`verdict`]), prints the report and keeps it
//! in `.teneral/offers/<commit>.json`. It passes only when all of that does.

pub mod approve;
pub mod forge;
pub mod gates;
pub mod git;
pub mod key;
pub mod publish;
pub mod read;
pub mod scan;
pub mod secrets;
pub mod sign;
pub mod token;
pub mod verdict;
pub mod witness;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use scan::{Finding, ScanReport, Scanner};
use teneral_core::commit::Commit;

/// Where check reports are kept.
pub const OFFERS_DIR: &str = ".teneral/offers";

/// The paths an offer is expected to change: the body and the backlog.
pub fn is_mutable(path: &str) -> bool {
    path.starts_with("body/") || path == "BACKLOG.md"
}

#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error(transparent)]
    Read(#[from] read::ReadError),
    #[error(
        "no species head to check against: pass --base <ref>, or set TENERAL_UPSTREAM in .env"
    )]
    NoBase,
    #[error("cannot keep the report in {path}: {source}; the directory must be the individual's, writable by you")]
    Keep { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Settings(#[from] teneral_core::dotenv::SettingsError),
}

/// The outcome of a check.
pub struct CheckReport {
    pub branch: String,
    pub head: Commit,
    pub base: Commit,
    pub descends: bool,
    pub commits: Vec<(Commit, String)>,
    pub files: Vec<(String, Option<u64>)>,
    pub outside: Vec<String>,
    pub scan: ScanReport,
    pub signatures: Vec<(Commit, Result<(), String>)>,
    pub message: Vec<String>,
    pub key_fingerprint: String,
    /// How long reading the branch and scanning it took.
    pub read_time: Duration,
    pub scan_time: Duration,
    /// The mutation gate's checks on the offer's tree (`None`: not run,
    /// which the report and the pull request say).
    pub gates: Option<gates::Gates>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.descends
            && !self.commits.is_empty()
            && self.scan.findings.is_empty()
            && self.signatures.iter().all(|(_, r)| r.is_ok())
            && self.message.is_empty()
            && self.gates.as_ref().is_none_or(gates::Gates::passed)
    }

    /// Whether everything but the gates passed: only then are they run.
    pub fn passed_before_gates(&self) -> bool {
        self.descends
            && !self.commits.is_empty()
            && self.scan.findings.is_empty()
            && self.signatures.iter().all(|(_, r)| r.is_ok())
            && self.message.is_empty()
    }
}

/// The species' head: `--base`, else `TENERAL_UPSTREAM` of `.env`.
pub fn base_ref(home: &Path, base: Option<&str>) -> Result<String, OfferError> {
    if let Some(base) = base {
        return Ok(base.to_owned());
    }
    teneral_core::dotenv::value_in(home, "TENERAL_UPSTREAM")?.ok_or(OfferError::NoBase)
}

/// Checks the offer `branch` of the individual at `home` against `base`.
pub fn check(home: &Path, branch: &str, base: Option<&str>) -> Result<CheckReport, OfferError> {
    let base = base_ref(home, base)?;
    let key = key::ensure(home)?;
    let started = Instant::now();
    let offer = read::read(home, branch, &base)?;
    let read_time = started.elapsed();
    let secrets = secrets::collect(home, std::env::vars());
    let started = Instant::now();
    let scan = Scanner::new(&secrets, &offer.known_top).scan(&offer.commits);
    let scan_time = started.elapsed();
    let signatures = offer
        .commits
        .iter()
        .zip(&offer.signatures)
        .map(|(c, s)| {
            let found = s.as_ref().map(|(sig, data)| (sig.as_slice(), data.as_slice()));
            (c.commit.clone(), verdict::signature(key.public_key(), found))
        })
        .collect();
    let message = match offer.commits.last() {
        Some(last) => verdict::message(&last.message),
        None => vec!["a commit: the branch holds nothing since the species' head".to_owned()],
    };
    let outside = offer.files.iter().map(|(p, _)| p).filter(|p| !is_mutable(p)).cloned().collect();
    Ok(CheckReport {
        branch: offer.branch,
        head: offer.head,
        base: offer.base,
        descends: offer.descends,
        commits: offer
            .commits
            .iter()
            .map(|c| (c.commit.clone(), c.message.lines().next().unwrap_or("").to_owned()))
            .collect(),
        files: offer.files,
        outside,
        scan,
        signatures,
        message,
        key_fingerprint: key::fingerprint(key.public_key()),
        read_time,
        scan_time,
        gates: None,
    })
}

fn finding_json(f: &Finding) -> serde_json::Value {
    json!({"commit": f.commit.as_str(), "path": f.path, "line": f.line,
           "rule": f.rule.as_str(), "found": f.masked})
}

/// The report as kept in `.teneral/offers/<commit>.json`.
pub fn to_json(r: &CheckReport) -> serde_json::Value {
    json!({
        "branch": r.branch,
        "commit": r.head.as_str(),
        "base": r.base.as_str(),
        "passed": r.passed(),
        "descends": r.descends,
        "key": r.key_fingerprint,
        "commits": r.commits.iter().map(|(c, t)| json!({"commit": c.as_str(), "title": t})).collect::<Vec<_>>(),
        "files": r.files.iter().map(|(p, s)| json!({"path": p, "size": s})).collect::<Vec<_>>(),
        "outside": r.outside,
        "findings": r.scan.findings.iter().map(finding_json).collect::<Vec<_>>(),
        "binaries": r.scan.binaries.iter().map(|(c, p)| json!({"commit": c.as_str(), "path": p})).collect::<Vec<_>>(),
        "signatures": r.signatures.iter().map(|(c, s)| json!({"commit": c.as_str(), "ok": s.is_ok(), "why": s.as_ref().err()})).collect::<Vec<_>>(),
        "message": {"ok": r.message.is_empty(), "missing": r.message},
        "gates": r.gates.as_ref().map(gates::Gates::to_json),
    })
}

/// Keeps the report; returns where.
pub fn keep(home: &Path, r: &CheckReport) -> Result<PathBuf, OfferError> {
    let dir = home.join(OFFERS_DIR);
    let path = dir.join(format!("{}.json", r.head.as_str()));
    let keep_err = |source| OfferError::Keep { path: path.clone(), source };
    std::fs::create_dir_all(&dir).map_err(keep_err)?;
    let text = format!("{:#}\n", to_json(r));
    teneral_core::fsutil::write_atomic(&path, text.as_bytes()).map_err(keep_err)?;
    Ok(path)
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "ok  "
    } else {
        "FAIL"
    }
}

/// The report as printed.
pub fn to_text(r: &CheckReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ =
        writeln!(s, "offer {} at {} (species' head {})", r.branch, r.head.short(), r.base.short());
    let _ = writeln!(s, "\ncommits ({}):", r.commits.len());
    for (c, title) in &r.commits {
        let _ = writeln!(s, "  {} {title}", c.short());
    }
    let _ = writeln!(s, "\nfiles ({}):", r.files.len());
    for (path, size) in &r.files {
        let size = size.map_or("deleted".to_owned(), |n| format!("{n} bytes"));
        let _ = writeln!(s, "  {path} ({size})");
    }
    if !r.outside.is_empty() {
        let _ = writeln!(s, "\noutside body/ and BACKLOG.md: {}", r.outside.join(", "));
    }
    for (c, p) in &r.scan.binaries {
        let _ = writeln!(s, "binary, not read: {p} in {}", c.short());
    }
    let _ = writeln!(s, "\n{} descends from the species' head", mark(r.descends));
    if !r.descends {
        let _ = writeln!(s, "     rebase it onto {} and check again", r.base.short());
    }
    let _ = writeln!(
        s,
        "{} scan: {} finding(s)",
        mark(r.scan.findings.is_empty()),
        r.scan.findings.len()
    );
    for f in &r.scan.findings {
        let at = match (&f.path, f.line) {
            (Some(p), Some(n)) => format!("{p}:{n}"),
            (Some(p), None) => format!("{p} (its name)"),
            (None, n) => format!("message line {}", n.unwrap_or(0)),
        };
        let _ = writeln!(s, "     {} {at}: {}: {}", f.commit.short(), f.rule.as_str(), f.masked);
    }
    let signed = r.signatures.iter().all(|(_, v)| v.is_ok());
    let _ = writeln!(s, "{} signed by the individual's key ({})", mark(signed), r.key_fingerprint);
    for (c, v) in &r.signatures {
        if let Err(why) = v {
            let _ = writeln!(s, "     {}: {why}", c.short());
        }
    }
    let _ = writeln!(s, "{} last message complete", mark(r.message.is_empty()));
    for m in &r.message {
        let _ = writeln!(s, "     it lacks {m}");
    }
    match &r.gates {
        Some(g) => {
            for line in g.lines() {
                let _ = writeln!(s, "{line}");
            }
        }
        None if r.passed_before_gates() => {
            let _ = writeln!(s, "--   gates not run: the mutation gate's checks (organs, type check, tests, smoke) are run by `teneralctl offer check` without --no-gates");
        }
        None => {
            let _ = writeln!(s, "--   gates not run: put the marked items right first");
        }
    }
    let verdict =
        if r.passed() { "passed" } else { "FAILED: put the marked items right and check again" };
    let _ = writeln!(s, "\n{verdict}");
    s
}

/// How long the check's parts took: one line on reading and the scan (with
/// its throughput), then, when the gates ran, one on them and each step.
pub fn timings(r: &CheckReport) -> String {
    let secs = r.scan_time.as_secs_f64().max(1e-9);
    let mb = r.scan.bytes as f64 / 1e6;
    let mut text = format!(
        "read {} commits in {:.2} s; scanned {mb:.1} MB of paths, added lines and messages in {:.3} s: {:.0} MB/s",
        r.commits.len(),
        r.read_time.as_secs_f64(),
        r.scan_time.as_secs_f64(),
        mb / secs
    );
    match &r.gates {
        Some(g) => {
            let steps: Vec<String> = g
                .steps
                .iter()
                .map(|s| format!("{} {:.1} s ({})", s.name, s.seconds, s.result.as_str()))
                .collect();
            text.push_str(&format!("\ngates {:.1} s in all: {}", g.seconds, steps.join(", ")));
        }
        None => text.push_str("\ngates not run"),
    }
    text
}
