//! The kernel's log: the one place that writes it.
//!
//! Under systemd (stdout or stderr is the journal's stream, as
//! `JOURNAL_STREAM` says) every line goes to journald over its native
//! protocol, with fields a query can select on: `PRIORITY` (its level),
//! `SYSLOG_IDENTIFIER=teneral`, `TENERAL_INDIVIDUAL` (the individual's
//! directory), `TENERAL_COMMIT` and `TENERAL_GENERATION` (the generation the
//! line is about: its commit and its ordinal, [`fields`]), `TENERAL_EVENT`
//! (what kind of line: `kernel`, a journal event type such as `reply` or
//! `tool.call`, `log` for a body's log line, or `output` for what a child
//! wrote), and for a child's output the unit it ran in as `USER_UNIT`, so
//! `journalctl --user-unit teneral-gen-<short>` finds it. Where stdout leads
//! into a pipe or a socket that is not the journal's and stderr to no
//! terminal or file (a container's log, which a cluster's collector reads)
//! each line is one JSON object on stdout with the same fields under short
//! names ([`Field`]: `individual`, `generation`, `commit`, `event`,
//! `priority`, `message`, and `ts`, `tag`, `unit`), so a collector selects
//! by generation without reading prose; nothing else of the kernel writes to
//! its stdout, so every line there is JSON. That is the kernel's log alone
//! ([`own_stdout`]): a command that prints its results on stdout keeps its
//! log on stderr, JSON there under the same rule applied to stderr. A
//! kernel the launcher started counts its stderr, a pipe to the launcher,
//! as leading where the launcher's does ([`STDERR_LEADS_VARIABLE`]).
//! Elsewhere (a terminal, a test
//! capturing stderr in a file) each line is `[teneral] ...` or `[tag] ...`
//! on stderr, and so is a line journald would not take.
//! `TENERAL_LOG_FORMAT` chooses ([`Format`], [`output_for`]); both forms are
//! made from one list of fields ([`fields_of`]).
//!
//! Every line is one line: text that a body, a model or a child wrote is
//! escaped ([`escape`]) before it is written, so it can neither start a line
//! of its own (a forged `[teneral] ...`) nor carry a terminal's escape
//! sequences, and journald always stores its `MESSAGE` as text.
//!
//! The datagrams are written here rather than through `tracing-journald`:
//! the format is a few lines, and the kernel has no use for the rest of a
//! tracing stack.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

pub mod fields;

use fields::Identity;

use crate::journal::EventKind;

/// journald's socket for the native protocol.
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";
/// Longest message sent as one line; longer ones are cut (with a mark).
const MAX_MESSAGE: usize = 32 * 1024;

/// syslog priorities, as journald takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Error = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
}

/// `TENERAL_LOG_FORMAT`: how the log is written where no journal takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// journald under systemd; JSON lines on stdout where stdout leads into
    /// a pipe or a socket and stderr to no terminal or file (a container's
    /// log); lines of text on stderr elsewhere.
    Auto,
    /// JSON lines on stdout, always.
    Json,
    /// journald under systemd, lines of text on stderr elsewhere.
    Text,
}

/// Where one of the kernel's outputs (stdout, stderr) leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leads {
    /// systemd's journal stream (`JOURNAL_STREAM` names it).
    Journal,
    Terminal,
    /// A regular file (`teneral run > kernel.log`), or a device that is no
    /// terminal (`/dev/null`).
    File,
    /// A pipe or a socket: a container runtime's log, a collector.
    Stream,
}

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Datagrams to journald.
    Journal,
    /// One JSON object per line on stdout.
    Json,
    /// `[tag] text` on stderr.
    Text,
}

/// The decision: what `format` means where stdout leads to `stdout` and
/// stderr to `stderr`. Under `auto` JSON lines take stdout only where it
/// is a stream and stderr is not where a person or a test reads lines of
/// text (a terminal, a file): a container gives both streams to its log.
pub fn output_for(format: Format, stdout: Leads, stderr: Leads) -> Output {
    let journal = stdout == Leads::Journal || stderr == Leads::Journal;
    let text_read = matches!(stderr, Leads::Terminal | Leads::File);
    match format {
        Format::Json => Output::Json,
        Format::Auto | Format::Text if journal => Output::Journal,
        Format::Auto if stdout == Leads::Stream && !text_read => Output::Json,
        Format::Auto | Format::Text => Output::Text,
    }
}

/// Whether stdout is the log's: only in the kernel (`teneral run`,
/// `teneral kernel`), which says so ([`own_stdout`]). Every other command
/// (`teneral offer-gates`, `teneral replay`, the stand-in model) prints its
/// own results on stdout, so its log stays on stderr and `auto` decides by
/// where stderr leads.
static STDOUT_IS_THE_LOG: AtomicBool = AtomicBool::new(false);

/// Makes stdout the log's: JSON lines go there, and `auto` decides by where
/// stdout and stderr lead. For the kernel alone, which prints nothing else.
pub fn own_stdout() {
    STDOUT_IS_THE_LOG.store(true, Ordering::Relaxed);
}

/// The format set by the settings ([`set_format`]); auto until then.
static FORMAT: AtomicU8 = AtomicU8::new(0);

/// Sets `TENERAL_LOG_FORMAT` for every following line.
pub fn set_format(format: Format) {
    let code = match format {
        Format::Auto => 0,
        Format::Json => 1,
        Format::Text => 2,
    };
    FORMAT.store(code, Ordering::Relaxed);
}

fn format() -> Format {
    match FORMAT.load(Ordering::Relaxed) {
        1 => Format::Json,
        2 => Format::Text,
        _ => Format::Auto,
    }
}

/// The variable the launcher (`teneral run`) sets for the kernel it starts:
/// where the launcher's own stderr leads (a [`Leads`] word). The kernel's
/// stderr is a pipe the launcher reads (it keeps the last lines for a
/// rollback's reason) and passes on line by line, so the kernel decides as
/// if it wrote to where the launcher's stderr leads.
pub const STDERR_LEADS_VARIABLE: &str = "TENERAL_LOG_STDERR_LEADS";

impl Leads {
    /// The word [`STDERR_LEADS_VARIABLE`] carries.
    pub fn word(self) -> &'static str {
        match self {
            Leads::Journal => "journal",
            Leads::Terminal => "terminal",
            Leads::File => "file",
            Leads::Stream => "stream",
        }
    }

    fn from_word(word: &str) -> Option<Leads> {
        [Leads::Journal, Leads::Terminal, Leads::File, Leads::Stream]
            .into_iter()
            .find(|l| l.word() == word)
    }
}

/// Where stderr counts as leading: `own`, unless it is a pipe and the
/// launcher that reads it said where it passes the lines on (`passed`, the
/// value of [`STDERR_LEADS_VARIABLE`]). An unknown word counts as unsaid.
pub fn stderr_counts_as(own: Leads, passed: Option<&str>) -> Leads {
    match (own, passed.and_then(Leads::from_word)) {
        (Leads::Stream, Some(passed)) => passed,
        (own, _) => own,
    }
}

/// Where this process's stdout and stderr lead, looked at once.
fn output_leads() -> (Leads, Leads) {
    static LEADS: OnceLock<(Leads, Leads)> = OnceLock::new();
    *LEADS.get_or_init(|| {
        let passed = std::env::var(STDERR_LEADS_VARIABLE).ok();
        let stderr = stderr_counts_as(leads(std::io::stderr().as_fd()), passed.as_deref());
        (leads(std::io::stdout().as_fd()), stderr)
    })
}

/// Where this process's stderr leads, as [`STDERR_LEADS_VARIABLE`] says it
/// to a child whose stderr is a pipe this process passes on.
pub fn stderr_word() -> &'static str {
    output_leads().1.word()
}

/// Where `fd` leads.
fn leads(fd: BorrowedFd<'_>) -> Leads {
    if is_journal_stream(fd) {
        return Leads::Journal;
    }
    if std::io::IsTerminal::is_terminal(&fd) {
        return Leads::Terminal;
    }
    match rustix::fs::fstat(fd).map(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode)) {
        Ok(rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket) => Leads::Stream,
        _ => Leads::File,
    }
}

/// One line with what journald keeps besides its text.
struct Line<'a> {
    priority: Priority,
    /// What kind of line: `kernel`, a journal event type, `output`.
    event: &'a str,
    /// How a terminal shows it: `teneral`, `reply`, `teneral-gen-abc1234`.
    tag: &'a str,
    /// The unit a child's output came from.
    unit: Option<&'a str>,
    text: &'a str,
}

/// The individual and generation the kernel is about, put on every line.
fn identity() -> &'static Mutex<Identity> {
    static IDENTITY: OnceLock<Mutex<Identity>> = OnceLock::new();
    IDENTITY.get_or_init(|| Mutex::new(Identity::default()))
}

fn with_identity<T>(f: impl FnOnce(&mut Identity) -> T) -> T {
    f(&mut identity().lock().unwrap_or_else(|p| p.into_inner()))
}

/// Sets the individual every following line carries as `TENERAL_INDIVIDUAL`.
pub fn set_individual(home: &Path) {
    with_identity(|id| id.individual = Some(home.display().to_string()));
}

/// Takes in the generations the individual's journal records, so each line
/// carries its generation's ordinal as `TENERAL_GENERATION`.
pub fn set_lineage(lineage: &crate::generations::Lineage) {
    with_identity(|id| id.learn(lineage));
}

/// Sets the commit every following line carries as `TENERAL_COMMIT`, and
/// its ordinal as `TENERAL_GENERATION`.
pub fn set_commit(hex: &str) {
    with_identity(|id| id.switch(hex));
}

/// The unit the kernel runs in (`teneral.service`, `teneral@….service`),
/// when systemd started it: for hints that name it.
pub fn own_unit() -> Option<String> {
    static UNIT: OnceLock<Option<String>> = OnceLock::new();
    UNIT.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        fields::unit_in_cgroup(&text).filter(|unit| unit.starts_with("teneral"))
    })
    .clone()
}

/// The socket to journald, when stdout or stderr is the journal's stream.
fn journal() -> Option<&'static UnixDatagram> {
    static JOURNAL: OnceLock<Option<UnixDatagram>> = OnceLock::new();
    JOURNAL
        .get_or_init(|| {
            if !journal_stream() {
                return None;
            }
            let socket = UnixDatagram::unbound().ok()?;
            socket.connect(JOURNAL_SOCKET).ok()?;
            Some(socket)
        })
        .as_ref()
}

/// Whether systemd connected `fd` to the journal: `JOURNAL_STREAM` holds
/// the device and inode of that stream, and they are `fd`'s.
fn is_journal_stream(fd: BorrowedFd<'_>) -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else { return false };
    let Ok(stat) = rustix::fs::fstat(fd) else { return false };
    dev.parse::<u64>().ok() == Some(stat.st_dev) && ino.parse::<u64>().ok() == Some(stat.st_ino)
}

/// Whether stdout or stderr is the journal's stream.
fn journal_stream() -> bool {
    let (stdout, stderr) = output_leads();
    stdout == Leads::Journal || stderr == Leads::Journal
}

/// `text` with every control character shown instead of acted on: `\n`,
/// `\r`, `\t`, `\x1b` (C0 controls, DEL and C1 controls alike), and the
/// characters that reorder text on screen or break lines as `\u{...}`.
/// Everything else, backslashes included, is kept as it is.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    let shown = |c: char| !(c.is_control() || is_invisible_format(c));
    if text.chars().all(shown) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !shown(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Characters that end a line or reorder text without being controls.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` cut to at most `max` bytes on a character, the cut said.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{} [cut: {} bytes in all]", &text[..end], text.len()))
}

/// Text and tag as they are written: cut, then escaped. Cut first, so a
/// huge text is never copied whole.
fn clean<'a>(text: &'a str, tag: &'a str) -> (String, std::borrow::Cow<'a, str>) {
    (escape(&cut(text, MAX_MESSAGE)).into_owned(), escape(tag))
}

fn write(line: Line<'_>) {
    let (text, tag) = clean(line.text, line.tag);
    let line = Line { text: &text, tag: &tag, ..line };
    let (stdout, stderr) = output_leads();
    let own = STDOUT_IS_THE_LOG.load(Ordering::Relaxed);
    let leads = if own { (stdout, stderr) } else { (stderr, stderr) };
    match output_for(format(), leads.0, leads.1) {
        Output::Journal => {
            if let Some(socket) = journal() {
                let datagram = with_identity(|id| datagram(&line, id));
                if socket.send(&datagram).is_ok() {
                    return;
                }
            }
        }
        Output::Json => {
            let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            let object = with_identity(|id| json_line(&line, id, &now));
            let _ = if own {
                writeln!(std::io::stdout().lock(), "{object}")
            } else {
                writeln!(std::io::stderr().lock(), "{object}")
            };
            return;
        }
        Output::Text => {}
    }
    let _ = writeln!(std::io::stderr().lock(), "[{}] {}", line.tag, line.text);
}

/// One field of a line: its name in journald, its name in a JSON line, and
/// its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub journald: &'static str,
    pub json: &'static str,
    pub value: Value,
}

/// A field's value: JSON lines keep numbers as numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Number(u64),
}

impl Value {
    fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Value::Text(text) => std::borrow::Cow::Borrowed(text),
            Value::Number(n) => std::borrow::Cow::Owned(n.to_string()),
        }
    }
}

/// Every field a line carries, in both forms' order: the message (`[tag]`
/// before it unless the kernel's own), its priority, the individual, the
/// generation's commit and ordinal, the kind of line, and a child's unit.
fn fields_of(line: &Line<'_>, id: &Identity) -> Vec<Field> {
    let text = cut(line.text, MAX_MESSAGE);
    let message =
        if line.tag == "teneral" { text.into_owned() } else { format!("[{}] {text}", line.tag) };
    let field = |journald, json, value| Field { journald, json, value };
    let mut fields = vec![
        field("MESSAGE", "message", Value::Text(message)),
        field("PRIORITY", "priority", Value::Number(line.priority as u64)),
        field("TENERAL_EVENT", "event", Value::Text(line.event.to_owned())),
    ];
    if let Some(individual) = &id.individual {
        fields.push(field("TENERAL_INDIVIDUAL", "individual", Value::Text(individual.clone())));
    }
    if let Some(commit) = &id.commit {
        fields.push(field("TENERAL_COMMIT", "commit", Value::Text(commit.clone())));
    }
    if let Some(ordinal) = id.ordinal {
        fields.push(field("TENERAL_GENERATION", "generation", Value::Number(ordinal)));
    }
    if let Some(unit) = line.unit {
        fields.push(field("USER_UNIT", "unit", Value::Text(unit.to_owned())));
    }
    fields
}

/// A line as one JSON object: `ts` (RFC 3339, UTC), `tag`, then
/// [`fields_of`] under their JSON names.
fn json_line(line: &Line<'_>, id: &Identity, now: &str) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    object.insert("ts".into(), now.into());
    object.insert("tag".into(), line.tag.into());
    for Field { json, value, .. } in fields_of(line, id) {
        let value = match value {
            Value::Text(text) => serde_json::Value::from(text),
            Value::Number(n) => serde_json::Value::from(n),
        };
        object.insert(json.into(), value);
    }
    serde_json::Value::Object(object)
}

/// The native protocol: `NAME=value\n`, or for a value with a newline,
/// `NAME\n`, its length as 64-bit little endian, the value and `\n`.
fn datagram(line: &Line<'_>, id: &Identity) -> Vec<u8> {
    let fields = fields_of(line, id);
    let mut named: Vec<(&str, std::borrow::Cow<'_, str>)> =
        fields.iter().map(|f| (f.journald, f.value.text())).collect();
    named.insert(2, ("SYSLOG_IDENTIFIER", std::borrow::Cow::Borrowed("teneral")));
    let mut out = Vec::with_capacity(line.text.len() + 256);
    for (name, value) in named {
        out.extend_from_slice(name.as_bytes());
        if value.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value.as_bytes());
        } else {
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// One line of the kernel's own.
pub fn info(msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line {
        priority: Priority::Info,
        event: "kernel",
        tag: "teneral",
        unit: None,
        text: &text,
    });
}

/// A line of the kernel's own at another priority (a failure, a refusal).
pub fn at(priority: Priority, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line { priority, event: "kernel", tag: "teneral", unit: None, text: &text });
}

/// A line of the kernel's own about something that went wrong but not
/// fatally (a file it could not remove, a signal it could not send).
pub fn warn(msg: impl std::fmt::Display) {
    at(Priority::Warning, msg);
}

/// A line about a journal event of type `kind` (the kernel's own events,
/// such as `generation.exited`), at the priority of its kind
/// ([`fields::event_priority`]).
pub fn event(kind: EventKind, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line {
        priority: fields::event_priority(kind),
        event: kind.name(),
        tag: "teneral",
        unit: None,
        text: &text,
    });
}

/// A line about the agent's work (`[reply] ...`, `[tool] ...`), as
/// `journalctl` and a terminal running `teneral run` show it; `kind` is the
/// journal event it comes from.
pub fn agent(tag: &str, kind: EventKind, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    let priority = fields::event_priority(kind);
    write(Line { priority, event: kind.name(), tag, unit: None, text: &text });
}

/// A body's `log` event, at the priority of its `level`
/// ([`fields::level_priority`]).
pub fn body_log(level: &str, msg: impl std::fmt::Display) {
    let text = format!("{level}: {msg}");
    let priority = fields::level_priority(level);
    let event = EventKind::Log.name();
    write(Line { priority, event, tag: "body", unit: None, text: &text });
}

/// A line a child wrote (`[teneral-gen-abc1234] ...`), with the unit it ran in.
pub fn output(tag: &str, unit: Option<&str>, msg: impl std::fmt::Display) {
    let text = msg.to_string();
    write(Line { priority: Priority::Info, event: "output", tag, unit, text: &text });
}

#[cfg(test)]
mod tests;
