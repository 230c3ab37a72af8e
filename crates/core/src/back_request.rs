//! The owner's request to go back, as the kernel takes it: `teneralctl
//! back` leaves `{"to": commit}` at [`BACK_REQUEST`] and signals the kernel,
//! which claims the file with [`read_request`]; and the lineage both read
//! from the journal ([`lineage`]).

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::generations::Lineage;
use crate::journal::{parse_line, JOURNAL_PATH};

/// Where `back` leaves its request for a running kernel: `{"to": commit}`.
pub const BACK_REQUEST: &str = ".teneral/requests/back.json";

#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot {what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: io::Error },
    #[error("ignored the send-back request {path}: {why}; `teneralctl back` writes it")]
    BadRequest { path: PathBuf, why: String },
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> RequestError {
    let path = path.to_owned();
    move |source| RequestError::Io { what, path, source }
}

/// The generations of the journal of `home`, read line by line.
pub fn lineage(home: &Path) -> Result<Lineage, RequestError> {
    let path = home.join(JOURNAL_PATH);
    let mut lineage = Lineage::new();
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(lineage),
        Err(e) => return Err(io_err("read the journal", &path)(e)),
    };
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_err("read the journal", &path))?;
        if n == 0 {
            return Ok(lineage);
        }
        if let Some(event) = parse_line(&line) {
            lineage.take(&event);
        }
    }
}

/// For the kernel: the commit the owner's request asks for, if one waits.
/// The request is claimed (renamed) first and then removed, so `back`
/// cannot withdraw it half read. The commit is 40 hex digits; whether it may
/// be gone to is for the kernel to check ([`Lineage::choose`]).
pub fn read_request(home: &Path) -> Result<Option<String>, RequestError> {
    let path = home.join(BACK_REQUEST);
    let taken = crate::fsutil::temp_path(&path.with_extension("taken"));
    match fs::rename(&path, &taken) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("take", &path)(e)),
    }
    let bytes = fs::read(&taken).map_err(io_err("read", &taken));
    let _ = fs::remove_file(&taken);
    let bad = |why: &str| RequestError::BadRequest { path: path.clone(), why: why.to_owned() };
    let value: Value = serde_json::from_slice(&bytes?).map_err(|e| bad(&e.to_string()))?;
    let to = value.get("to").and_then(Value::as_str).unwrap_or_default();
    match crate::commit::Commit::parse(to) {
        Ok(commit) => Ok(Some(commit.to_string())),
        Err(_) => Err(bad("\"to\" is not a full commit id (40 hex digits)")),
    }
}
