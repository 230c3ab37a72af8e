//! The scan of an offer: does anything private leave with it?
//!
//! Pure: the caller reads git and the install's secrets and hands over, per
//! commit, its message and the files it touched with their added lines. The
//! scan looks at every path touched, every added line and every message of
//! every commit, so a secret added in one commit and removed in a later one
//! is still found (the history is what is published, not only its end).
//! Binary files are named, never read.
//!
//! What it reports, by [`Rule`]: private paths (`soul/`, `memory/`,
//! `inbox/`, `.teneral`, `.env`), key-shaped file names, new top-level
//! names, this install's own secrets literally, and credential shapes
//! (see `shapes`). What it found is shown masked: never the secret itself.

mod shapes;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use teneral_core::commit::Commit;

pub use shapes::secret_name;

/// Why something was reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    PrivatePath,
    KeyFileName,
    NewTopLevel,
    InstallSecret,
    PrivateKeyHeader,
    GithubToken,
    OpenAiKey,
    AwsKeyId,
    SlackToken,
    Jwt,
    UrlPassword,
    SecretAssignment,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::PrivatePath => "private path",
            Rule::KeyFileName => "key-shaped file name",
            Rule::NewTopLevel => "new top-level name",
            Rule::InstallSecret => "this install's secret",
            Rule::PrivateKeyHeader => "private key",
            Rule::GithubToken => "GitHub token",
            Rule::OpenAiKey => "sk- key",
            Rule::AwsKeyId => "AWS access key id",
            Rule::SlackToken => "Slack token",
            Rule::Jwt => "JWT",
            Rule::UrlPassword => "URL with a password",
            Rule::SecretAssignment => "literal assigned to a secret-sounding name",
        }
    }
}

/// One file a commit touched.
#[derive(Debug, Clone, Default)]
pub struct FileChange {
    pub path: String,
    /// Binary content is named in the report and never read.
    pub binary: bool,
    /// The lines this commit added, with their line numbers in the new file.
    pub added: Vec<(u32, String)>,
}

/// One commit of the offer, as the caller read it.
#[derive(Debug, Clone)]
pub struct CommitChange {
    pub commit: Commit,
    pub message: String,
    pub files: Vec<FileChange>,
}

/// One of this install's secrets: where it comes from (a name, shown) and
/// its value (never shown).
#[derive(Debug, Clone)]
pub struct Secret {
    pub name: String,
    pub value: String,
}

/// Values shorter than this are not looked for: too many innocent matches.
pub const MIN_SECRET_LEN: usize = 6;

/// Something private found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub commit: Commit,
    /// The file, or `None` for the commit's message.
    pub path: Option<String>,
    /// The line (of the added file content or of the message); `None` for
    /// a finding in the path itself.
    pub line: Option<u32>,
    pub rule: Rule,
    /// What was found, masked.
    pub masked: String,
}

/// What the scan found, and the binary files it did not read.
#[derive(Debug, Clone, Default)]
pub struct ScanReport {
    pub findings: Vec<Finding>,
    /// (commit, path) of every binary file touched.
    pub binaries: Vec<(Commit, String)>,
    /// Bytes of paths, added lines and messages looked at.
    pub bytes: u64,
}

/// `text` masked: its first four characters when it is long enough that
/// they give little away, then its length.
pub fn mask(text: &str) -> String {
    let n = text.chars().count();
    if n >= 16 {
        format!("{}…[{n} chars]", text.chars().take(4).collect::<String>())
    } else {
        format!("…[{n} chars]")
    }
}

/// Top-level names private to an individual.
const PRIVATE_TOP: [&str; 3] = ["soul", "memory", "inbox"];

/// The rule a path breaks by its name, if any.
pub fn path_rule(path: &str, known_top: &BTreeSet<String>) -> Option<Rule> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let top = parts.first().copied().unwrap_or("");
    let env = |p: &&str| *p == ".env" || p.starts_with(".env.");
    if PRIVATE_TOP.contains(&top) || parts.iter().any(|p| *p == ".teneral" || env(p)) {
        return Some(Rule::PrivatePath);
    }
    if parts.last().is_some_and(|name| key_shaped(name)) {
        return Some(Rule::KeyFileName);
    }
    if !known_top.contains(top) {
        return Some(Rule::NewTopLevel);
    }
    None
}

/// Whether a file name is one keys are kept under.
fn key_shaped(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let ssh = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]
        .iter()
        .any(|k| lower.starts_with(k) && !lower.ends_with(".pub"));
    let ext = [".pem", ".key", ".p12", ".pfx", ".ppk", ".jks", ".keystore", ".kdbx"];
    ssh || ext.iter().any(|e| lower.ends_with(e)) || lower == "offer-key"
}

/// The scanner: the install's secrets and the top-level names of the
/// species' head, ready to look at many commits.
pub struct Scanner<'a> {
    secrets: Vec<&'a Secret>,
    known_top: &'a BTreeSet<String>,
}

impl<'a> Scanner<'a> {
    pub fn new(secrets: &'a [Secret], known_top: &'a BTreeSet<String>) -> Scanner<'a> {
        let secrets = secrets.iter().filter(|s| s.value.len() >= MIN_SECRET_LEN).collect();
        Scanner { secrets, known_top }
    }

    /// The first finding in one piece of text (a path, a line, a message
    /// line): this install's secrets first, then the shapes.
    pub fn text(&self, text: &str) -> Option<(Rule, String)> {
        if let Some(s) = self.secrets.iter().find(|s| text.contains(s.value.as_str())) {
            return Some((Rule::InstallSecret, format!("the value of {}", s.name)));
        }
        shapes::find(text).map(|(rule, found)| (rule, mask(found)))
    }

    /// Scans every commit of an offer.
    pub fn scan(&self, commits: &[CommitChange]) -> ScanReport {
        let mut report = ScanReport::default();
        for c in commits {
            self.commit(c, &mut report);
        }
        report
    }

    fn commit(&self, c: &CommitChange, report: &mut ScanReport) {
        let mut found = |path: Option<&str>, line: Option<u32>, rule: Rule, masked: String| {
            report.findings.push(Finding {
                commit: c.commit.clone(),
                path: path.map(str::to_owned),
                line,
                rule,
                masked,
            })
        };
        for (n, line) in c.message.lines().enumerate() {
            if let Some((rule, masked)) = self.text(line) {
                found(None, Some(line_number(n)), rule, masked);
            }
        }
        let mut bytes = c.message.len();
        let mut binaries = Vec::new();
        for f in &c.files {
            bytes += f.path.len();
            if let Some(rule) = path_rule(&f.path, self.known_top) {
                found(Some(&f.path), None, rule, f.path.clone());
            }
            if let Some((rule, masked)) = self.text(&f.path) {
                found(Some(&f.path), None, rule, masked);
            }
            if f.binary {
                binaries.push((c.commit.clone(), f.path.clone()));
                continue;
            }
            for (n, line) in &f.added {
                bytes += line.len() + 1;
                if let Some((rule, masked)) = self.text(line) {
                    found(Some(&f.path), Some(*n), rule, masked);
                }
            }
        }
        report.binaries.extend(binaries);
        report.bytes += bytes as u64;
    }
}

fn line_number(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}
