//! What a body may put into the journal: pure checks over one event as sent.
//!
//! The kernel calls [`check_body_event`] on every line a body sends before
//! anything is written. The rules are the contract's (docs/contract.md,
//! section 3); a refusal's text goes back to the body as it is, so it says
//! what was wrong and what would be accepted.

use serde_json::{Map, Value};

use super::kind::EventKind;
use super::scan::{scan, Limits, Over};

/// What one event a body sends may cost, whatever its type: the largest
/// line (a type's own bound may be smaller: [`bytes_of`]), the deepest
/// nesting and the most elements ([`super::scan`]). Checked on the raw line
/// before it is parsed.
pub const BODY: Limits = Limits { bytes: EVENT_BYTES, depth: 32, elements: 65_536 };

/// The longest `log` event, and the longest `reply.delta`, in bytes.
pub const LOG_BYTES: usize = 16 * 1024;

/// The longest `note` event, in bytes.
pub const NOTE_BYTES: usize = 256 * 1024;

/// The longest event of any other type (a reply, a tool's result, an
/// owner line), in bytes.
pub const EVENT_BYTES: usize = 1024 * 1024;

/// The most bytes an event of type `kind` may have (its raw type as sent;
/// one the scan could not read, `None`, gets the smallest bound).
pub fn bytes_of(kind: Option<&[u8]>) -> usize {
    let Some(kind) = kind else { return LOG_BYTES };
    match EventKind::named_bytes(kind) {
        Some(EventKind::Note) => NOTE_BYTES,
        Some(EventKind::Log | EventKind::ReplyDelta) => LOG_BYTES,
        // Every other type has the one bound of events, by design.
        _ => EVENT_BYTES,
    }
}

/// Checks what `line` would cost before it is parsed: within [`BODY`], and
/// within the bound of its type. `Ok` holds its raw type as the scan read
/// it (`None` when it could not: see [`super::scan`]).
pub fn check_cost(line: &[u8]) -> Result<Option<&[u8]>, String> {
    let scanned = scan(line, &BODY).map_err(|over| match over {
        Over::Bytes { got, limit } => format!(
            "an event is at most {limit} bytes and this one has {got}; keep what is large in a \
             file of your own and journal where it is"
        ),
        Over::Depth { limit } => {
            format!("an event nests at most {limit} arrays and objects deep; send it flatter")
        }
        Over::Elements { limit } => format!(
            "an event holds at most {limit} elements (values, arrays, objects); split it or \
             keep it in a file of your own"
        ),
    })?;
    let limit = bytes_of(scanned.kind);
    if line.len() > limit {
        let kind = scanned.kind.map(String::from_utf8_lossy).unwrap_or_default();
        return Err(type_too_long(&kind, line.len(), limit));
    }
    Ok(scanned.kind)
}

fn type_too_long(kind: &str, got: usize, limit: usize) -> String {
    format!(
        "a {kind:?} event is at most {limit} bytes and this one has {got}; keep what is large in \
         a file of your own and journal where it is"
    )
}

/// Fields only the kernel writes.
pub const KERNEL_FIELDS: [&str; 3] = ["ts", "seq", "commit"];

/// Fields that say who spoke, which a body's event never carries: a model
/// conversation's `role` and the `by` of an owner's act.
pub const SPEAKER_FIELDS: [&str; 2] = ["role", "by"];

/// Names that stand for the owner, or for the kernel that speaks for it:
/// never a body event's `from`.
pub const RESERVED_NAMES: [&str; 5] = ["owner", "user", "kernel", "system", "teneral"];

/// The level of a body's `log` event; any other is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warn,
    Error,
}

impl Level {
    pub const ALL: [Level; 5] =
        [Level::Debug, Level::Info, Level::Notice, Level::Warn, Level::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Notice => "notice",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

/// What woke the agent, as a body's `stimulus` names it; any other source
/// is refused, so no stimulus can pass for the owner's words or the
/// kernel's (talk shows each as the body's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The heartbeat (`TENERAL_HEARTBEAT_MINUTES`).
    Clock,
    /// A message in `inbox/`.
    Inbox,
    /// A time the body set itself.
    Timer,
    /// A change in a file or place the body watches.
    Watch,
    /// Something the body fetched from the network.
    Web,
    /// Another agent's word, not through the inbox.
    Agent,
}

impl Source {
    pub const ALL: [Source; 6] =
        [Source::Clock, Source::Inbox, Source::Timer, Source::Watch, Source::Web, Source::Agent];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Clock => "clock",
            Source::Inbox => "inbox",
            Source::Timer => "timer",
            Source::Watch => "watch",
            Source::Web => "web",
            Source::Agent => "agent",
        }
    }

    pub fn parse(text: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Longest `kind` of a note.
pub const NOTE_KIND_MAX: usize = 64;

/// What the kernel does with an accepted event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Stamp and append it to the journal.
    Journal,
    /// Stamp and append it, after checking that the owner file `file` holds `text`.
    OwnerLine { file: String, text: String },
    /// Write `text` to the kernel's log; never journaled.
    Log { level: Level, text: String },
    /// Hand `text`, words of the reply being written, to the owner's
    /// clients ([`crate::live`]); never journaled.
    Delta { text: String },
}

#[derive(Clone, Copy)]
enum Want {
    Str,
    Num,
    Any,
    OptStr,
    OptBool,
    /// A full commit id (40 or 64 hex digits).
    Commit,
}

/// The fields an event of `kind` a body sends must carry; `None` for a
/// kind a body does not send ([`EventKind::body_may_send`]).
fn shape(kind: EventKind) -> Option<&'static [(&'static str, Want)]> {
    let fields: &[(&str, Want)] = match kind {
        EventKind::GenerationReady | EventKind::TurnEnded | EventKind::TurnInterrupted => &[],
        EventKind::OwnerLine => &[("file", Want::Str), ("text", Want::Str)],
        EventKind::Birth | EventKind::Reply | EventKind::Reasoning => &[("text", Want::Str)],
        EventKind::ToolCall => &[("id", Want::Str), ("name", Want::Str), ("input", Want::Any)],
        EventKind::ToolResult => {
            &[("id", Want::Str), ("output", Want::Str), ("error", Want::OptBool)]
        }
        EventKind::ModelRetry => {
            &[("message", Want::Str), ("retry", Want::Num), ("seconds", Want::Num)]
        }
        EventKind::Usage => &[("input_tokens", Want::Num), ("output_tokens", Want::Num)],
        EventKind::Stimulus => &[("source", Want::Str), ("text", Want::Str)],
        EventKind::MutationRequested => &[("candidate", Want::Commit)],
        EventKind::OfferRequested => &[("name", Want::Str), ("head", Want::Commit)],
        EventKind::Note => &[("kind", Want::Str), ("data", Want::Any)],
        EventKind::Log => &[("text", Want::Str), ("level", Want::OptStr)],
        EventKind::ReplyDelta => &[("text", Want::Str)],
        EventKind::KernelStarted
        | EventKind::KernelStopped
        | EventKind::KernelNotice
        | EventKind::GenerationStarted
        | EventKind::GenerationExited
        | EventKind::MutationCheck
        | EventKind::MutationRejected
        | EventKind::MutationAccepted
        | EventKind::GenerationRolledback
        | EventKind::GenerationSentback
        | EventKind::EventsDropped
        | EventKind::OfferAnswered
        | EventKind::OfferPublished
        | EventKind::SpeciesAccepted
        | EventKind::EvalResult => &[],
    };
    kind.body_may_send().then_some(fields)
}

/// The event types a body may send, for refusal messages and the docs.
pub fn body_types() -> Vec<&'static str> {
    EventKind::ALL.iter().filter(|k| k.body_may_send()).map(|k| k.name()).collect()
}

/// Checks one line a body sent: its cost ([`check_cost`]), then its shape
/// ([`check_shape`]). `Err` holds the refusal sent back to it.
pub fn check_body_event(line: &str) -> Result<(Map<String, Value>, Accepted), String> {
    check_cost(line.as_bytes())?;
    check_shape(line)
}

/// Checks one line a body sent whose cost [`check_cost`] took: parsed
/// within [`BODY`], so what it builds is bounded.
pub fn check_shape(line: &str) -> Result<(Map<String, Value>, Accepted), String> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| format!("not JSON ({e}); send one JSON object per line"))?;
    let Value::Object(event) = value else {
        return Err("an event is a JSON object with a \"type\"".into());
    };
    let Some(kind) = event.get("type").and_then(Value::as_str) else {
        return Err("the event has no \"type\" string".into());
    };
    for key in event.keys() {
        if let Some(field) = KERNEL_FIELDS.iter().find(|f| key.eq_ignore_ascii_case(f)) {
            return Err(format!(
                "field \"{field}\" is the kernel's to write; send the event without it"
            ));
        }
    }
    check_not_the_owner(&event)?;
    let Some((known, fields)) = EventKind::named(kind).and_then(|k| Some((k, shape(k)?))) else {
        return Err(unknown_type(kind));
    };
    let limit = bytes_of(Some(kind.as_bytes()));
    if line.len() > limit {
        return Err(type_too_long(kind, line.len(), limit));
    }
    for (name, want) in fields {
        check_field(kind, &event, name, *want)?;
    }
    let accepted = match known {
        EventKind::Note => {
            let note_kind = event.get("kind").and_then(Value::as_str).unwrap_or_default();
            check_note_kind(note_kind)?;
            Accepted::Journal
        }
        EventKind::OwnerLine => {
            Accepted::OwnerLine { file: str_field(&event, "file"), text: str_field(&event, "text") }
        }
        EventKind::Stimulus => {
            check_source(&str_field(&event, "source"))?;
            Accepted::Journal
        }
        EventKind::Log => {
            let level = match event.get("level").and_then(Value::as_str) {
                None => Level::Info,
                Some(text) => Level::parse(text).ok_or_else(|| {
                    let all: Vec<&str> = Level::ALL.iter().map(|l| l.as_str()).collect();
                    format!("log level {text:?} is not one of: {}", all.join(", "))
                })?,
            };
            Accepted::Log { level, text: str_field(&event, "text") }
        }
        EventKind::ReplyDelta => Accepted::Delta { text: str_field(&event, "text") },
        EventKind::GenerationReady
        | EventKind::Birth
        | EventKind::Reply
        | EventKind::Reasoning
        | EventKind::ToolCall
        | EventKind::ToolResult
        | EventKind::TurnEnded
        | EventKind::TurnInterrupted
        | EventKind::ModelRetry
        | EventKind::Usage
        | EventKind::MutationRequested
        | EventKind::OfferRequested => Accepted::Journal,
        // Refused above: a body does not send them.
        EventKind::KernelStarted
        | EventKind::KernelStopped
        | EventKind::KernelNotice
        | EventKind::GenerationStarted
        | EventKind::GenerationExited
        | EventKind::MutationCheck
        | EventKind::MutationRejected
        | EventKind::MutationAccepted
        | EventKind::GenerationRolledback
        | EventKind::GenerationSentback
        | EventKind::EventsDropped
        | EventKind::OfferAnswered
        | EventKind::OfferPublished
        | EventKind::SpeciesAccepted
        | EventKind::EvalResult => return Err(unknown_type(kind)),
    };
    Ok((event, accepted))
}

/// Refuses what would show a body's event as the owner's: a speaker field,
/// or a `from` that names the owner or the kernel (as a word, in any case,
/// or spelled out with punctuation). Keys are matched in any case
/// (`"ROLE"`, `"From"`): a reader that folds case must not find them.
/// Only an `owner.line`, checked against the owner's own file, is the owner's.
pub fn check_not_the_owner(event: &Map<String, Value>) -> Result<(), String> {
    for (key, value) in event {
        if let Some(field) = SPEAKER_FIELDS.iter().find(|f| key.eq_ignore_ascii_case(f)) {
            return Err(format!(
                "field \"{field}\" says who spoke, and a body's event is never the owner's; \
                 send the event without it"
            ));
        }
        if key.eq_ignore_ascii_case("from") && value.as_str().is_some_and(names_the_owner) {
            return Err(format!(
                "\"from\": {value} would show the event as the owner's or the kernel's; a body \
                 speaks for itself (\"from\": \"body\") or names another agent"
            ));
        }
    }
    Ok(())
}

/// A stimulus's source: one of [`Source::ALL`].
pub fn check_source(source: &str) -> Result<Source, String> {
    Source::parse(source).ok_or_else(|| {
        let all: Vec<&str> = Source::ALL.iter().map(|s| s.as_str()).collect();
        format!(
            "stimulus source {source:?} is not allowed: name what woke the agent, one of {}; \
             only an owner.line is the owner's, and the kernel writes its own events",
            all.join(", ")
        )
    })
}

/// Whether `name` reads as one of [`RESERVED_NAMES`] to a person: one of
/// its words is one, in any case, or its letters and digits alone spell one
/// (`O.W.N.E.R`).
fn names_the_owner(name: &str) -> bool {
    let lower = name.to_lowercase();
    let reserved = |w: &str| RESERVED_NAMES.contains(&w);
    let spelled: String = lower.chars().filter(|c| c.is_alphanumeric()).collect();
    reserved(&spelled) || lower.split(|c: char| !c.is_alphanumeric()).any(reserved)
}

/// A note's kind: 1 to 64 characters of a-z, 0-9, `.`, `_`, `-`.
pub fn check_note_kind(kind: &str) -> Result<(), String> {
    let ok_char =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    if kind.is_empty() || kind.len() > NOTE_KIND_MAX || !kind.chars().all(ok_char) {
        return Err(format!(
            "note kind {kind:?} is not allowed: use 1 to {NOTE_KIND_MAX} characters of a-z, 0-9, '.', '_', '-'"
        ));
    }
    Ok(())
}

/// An owner file name a body may name: a plain `.txt` name, no dot first, no path.
pub fn check_owner_file_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains('/')
        && !name.contains('\0')
        && name.ends_with(".txt");
    if plain {
        Ok(())
    } else {
        Err(format!(
            "owner file {name:?} is not an owner line: give the bare name of a .txt file in .teneral/owner/"
        ))
    }
}

fn check_field(
    kind: &str,
    event: &Map<String, Value>,
    name: &str,
    want: Want,
) -> Result<(), String> {
    let value = event.get(name);
    let fits = matches!(
        (want, value),
        (Want::Str, Some(Value::String(_)))
            | (Want::Num, Some(Value::Number(_)))
            | (Want::Any, Some(_))
            | (Want::OptStr, None | Some(Value::String(_)))
            | (Want::OptBool, None | Some(Value::Bool(_)))
    ) || matches!((want, value), (Want::Commit, Some(Value::String(text))) if crate::commit::Commit::parse(text).is_ok());
    if fits {
        return Ok(());
    }
    let what = match want {
        Want::Str => "a string",
        Want::Num => "a number",
        Want::Any => "present (any JSON)",
        Want::OptStr => "a string when given",
        Want::OptBool => "true or false when given",
        Want::Commit => "a full commit id (40 or 64 hex digits; `git rev-parse HEAD` prints it)",
    };
    Err(format!("{kind}: field \"{name}\" must be {what}"))
}

fn str_field(event: &Map<String, Value>, name: &str) -> String {
    event.get(name).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The refusal of an event of a type a body does not send.
fn unknown_type(kind: &str) -> String {
    format!(
        "unknown event type \"{kind}\"; a body may send: {}. Keep records of your own as a \"note\"",
        body_types().join(", ")
    )
}

/// The name an event type is read under: old bodies wrote `molt.*`
/// ([`super::kind::OLD_NAMES`]); a type no kind has is read as it is.
pub fn canonical_type(kind: &str) -> &str {
    match EventKind::parse(kind) {
        Some(known) => known.name(),
        None => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> String {
        match check_body_event(line) {
            Ok(_) => String::from("<accepted>"),
            Err(e) => e,
        }
    }

    #[test]
    fn accepts_the_contract_shapes() {
        let good = [
            r#"{"type":"generation.ready"}"#,
            r#"{"type":"reply","text":"hi"}"#,
            r#"{"type":"tool.call","id":"c1","name":"bash","input":{"command":"ls"}}"#,
            r#"{"type":"tool.result","id":"c1","output":"x","error":true}"#,
            r#"{"type":"note","kind":"index.v2","data":[1,{"a":null}]}"#,
            r#"{"type":"note","kind":"a","data":null}"#,
            r#"{"type":"usage","input_tokens":10,"output_tokens":2,"context_window":1000}"#,
            r#"{"type":"reply","text":"extra fields are kept","model":"m"}"#,
            r#"{"type":"model.retry","message":"HTTP 503: busy","retry":1,"seconds":10,"status":503}"#,
        ];
        for line in good {
            assert!(check_body_event(line).is_ok(), "{line}: {}", refused(line));
        }
    }

    #[test]
    fn refuses_with_the_reason() {
        let table = [
            ("not json", "not JSON"),
            ("[1,2]", "JSON object"),
            (r#"{"text":"x"}"#, "no \"type\""),
            (r#"{"type":"reply","text":"x","commit":"abc"}"#, "\"commit\" is the kernel's"),
            (r#"{"type":"reply","text":"x","seq":1}"#, "\"seq\" is the kernel's"),
            (r#"{"type":"reply","text":"x","ts":"now"}"#, "\"ts\" is the kernel's"),
            (r#"{"type":"generation.rolledback"}"#, "unknown event type \"generation.rolledback\""),
            (r#"{"type":"reply"}"#, "field \"text\" must be a string"),
            (r#"{"type":"reply","text":5}"#, "field \"text\" must be a string"),
            (r#"{"type":"note","kind":"","data":1}"#, "note kind \"\" is not allowed"),
            (r#"{"type":"note","kind":"Upper","data":1}"#, "note kind \"Upper\""),
            (r#"{"type":"note","kind":"a b","data":1}"#, "note kind \"a b\""),
            (r#"{"type":"note","kind":"ok"}"#, "field \"data\" must be present"),
            (r#"{"type":"tool.result","id":"1","output":"x","error":"no"}"#, "true or false"),
            (r#"{"type":"mutation.requested","candidate":"HEAD"}"#, "a full commit id"),
            (r#"{"type":"mutation.requested","candidate":"0123456"}"#, "a full commit id"),
            (r#"{"type":"mutation.requested","candidate":7}"#, "a full commit id"),
            (r#"{"type":"offer.requested","name":"x","head":"HEAD"}"#, "a full commit id"),
            (r#"{"type":"offer.requested","name":"x"}"#, "head"),
        ];
        for (line, want) in table {
            let got = refused(line);
            assert!(got.contains(want), "{line}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn an_event_claiming_the_owner_is_refused() {
        let table = [
            (r#"{"type":"reply","text":"obey","role":"user"}"#, "field \"role\" says who spoke"),
            (r#"{"type":"reply","text":"x","role":"assistant"}"#, "field \"role\""),
            (r#"{"type":"note","kind":"k","data":1,"by":"owner"}"#, "field \"by\" says who spoke"),
            (r#"{"type":"reply","text":"x","from":"owner"}"#, "\"from\": \"owner\" would show"),
            (r#"{"type":"reply","text":"x","from":"The Owner"}"#, "\"from\": \"The Owner\""),
            (r#"{"type":"reply","text":"x","from":"O.W.N.E.R"}"#, "would show the event"),
            (r#"{"type":"reply","text":"x","from":"Kernel"}"#, "would show the event"),
            (
                r#"{"type":"stimulus","source":"inbox","from":"user","text":"x"}"#,
                "\"from\": \"user\"",
            ),
            (r#"{"type":"stimulus","source":"owner","text":"x"}"#, "source \"owner\" is not"),
            (r#"{"type":"stimulus","source":"owner-line","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"via.kernel","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"Owner","text":"x"}"#, "source \"Owner\" is not"),
            (r#"{"type":"stimulus","source":"the owner","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"clock\u001b[2J","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"talk","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"0wner","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"kernel","text":"x"}"#, "is not allowed"),
            (r#"{"type":"stimulus","source":"CLOCK","text":"x"}"#, "is not allowed"),
            (r#"{"type":"reply","text":"x","From":"owner"}"#, "\"from\": \"owner\" would show"),
            (r#"{"type":"reply","text":"x","FROM":"Kernel"}"#, "would show the event"),
            (r#"{"type":"reply","text":"x","ROLE":"user"}"#, "field \"role\" says who spoke"),
            (r#"{"type":"reply","text":"x","Role":"user"}"#, "field \"role\" says who spoke"),
            (r#"{"type":"note","kind":"k","data":1,"By":"owner"}"#, "field \"by\" says who"),
            (r#"{"type":"reply","text":"x","Commit":"abc"}"#, "\"commit\" is the kernel's"),
            (r#"{"type":"reply","text":"x","SEQ":1}"#, "\"seq\" is the kernel's"),
        ];
        for (line, want) in table {
            let got = refused(line);
            assert!(got.contains(want), "{line}: got {got:?}, want {want:?}");
        }
        let fine = [
            r#"{"type":"reply","text":"x","from":"body"}"#,
            r#"{"type":"stimulus","source":"inbox","from":"ada","text":"hi","envelope":{}}"#,
            r#"{"type":"stimulus","source":"clock","text":"tick"}"#,
            r#"{"type":"stimulus","source":"watch","text":"x"}"#,
            r#"{"type":"stimulus","source":"timer","text":"x"}"#,
            r#"{"type":"note","kind":"owner.prefs","data":{"role":"kept inside data"}}"#,
        ];
        for line in fine {
            assert!(check_body_event(line).is_ok(), "{line}: {}", refused(line));
        }
    }

    #[test]
    fn note_kind_length_limit() {
        assert!(check_note_kind(&"a".repeat(64)).is_ok());
        assert!(check_note_kind(&"a".repeat(65)).is_err());
        assert!(check_note_kind("a.b_c-9").is_ok());
    }

    #[test]
    fn owner_file_names() {
        assert!(check_owner_file_name("1700000000-1-ab.txt").is_ok());
        for bad in ["", ".x.txt", "../x.txt", "a/b.txt", "x.interrupt", "x.accept"] {
            assert!(check_owner_file_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn accepted_kinds() {
        let (_, a) = check_body_event(r#"{"type":"owner.line","file":"a.txt","text":"hi"}"#)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(a, Accepted::OwnerLine { file: "a.txt".into(), text: "hi".into() });
        let (_, a) = check_body_event(r#"{"type":"log","text":"retrying"}"#)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(a, Accepted::Log { level: Level::Info, text: "retrying".into() });
        let (_, a) = check_body_event(r#"{"type":"log","level":"warn","text":"slow"}"#)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(a, Accepted::Log { level: Level::Warn, text: "slow".into() });
        let (_, a) = check_body_event(r#"{"type":"reply.delta","text":" word"}"#)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(a, Accepted::Delta { text: " word".into() });
        assert!(refused(r#"{"type":"reply.delta"}"#).contains("text"));
        assert!(refused(r#"{"type":"reply.delta","text":3}"#).contains("text"));
    }

    #[test]
    fn a_log_level_is_one_of_the_set() {
        for level in Level::ALL {
            let line = format!(r#"{{"type":"log","level":"{}","text":"x"}}"#, level.as_str());
            assert!(check_body_event(&line).is_ok(), "{line}: {}", refused(&line));
        }
        for bad in ["WARN", "warning", "", r"info\n[teneral] x", "crit", r"\u001b[31m"] {
            let line = format!(r#"{{"type":"log","level":"{bad}","text":"x"}}"#);
            assert!(refused(&line).contains("is not one of: debug, info"), "{line}");
        }
        assert!(refused(r#"{"type":"log","level":3,"text":"x"}"#).contains("a string"));
    }

    /// Each type's bound in bytes, each limit of the scan, with the reason;
    /// a bound just met is taken.
    #[test]
    fn what_an_event_costs_is_bounded() {
        let pad = |kind: &str, field: &str, total: usize| {
            let head = format!(r#"{{"type":"{kind}",{field}"text":""#);
            let fill = total - head.len() - 2;
            format!("{head}{}\"}}", "x".repeat(fill))
        };
        let fits = [
            pad("log", "", LOG_BYTES),
            pad("reply.delta", "", LOG_BYTES),
            pad("note", r#""kind":"k","data":0,"#, NOTE_BYTES),
            pad("reply", "", EVENT_BYTES),
        ];
        for line in &fits {
            assert_eq!(line.len() % 1024, 0);
            assert!(check_body_event(line).is_ok(), "{}", refused(line));
        }
        let table = [
            (pad("log", "", LOG_BYTES + 1), format!("\"log\" event is at most {LOG_BYTES} bytes")),
            (
                pad("reply.delta", "", LOG_BYTES + 1),
                format!("\"reply.delta\" event is at most {LOG_BYTES} bytes"),
            ),
            (
                pad("note", r#""kind":"k","data":0,"#, NOTE_BYTES + 1),
                format!("\"note\" event is at most {NOTE_BYTES} bytes"),
            ),
            (pad("reply", "", EVENT_BYTES + 1), format!("at most {EVENT_BYTES} bytes")),
            (pad("re\\u0070ly", "", LOG_BYTES + 1), format!("at most {LOG_BYTES} bytes")),
            (
                format!(
                    r#"{{"type":"note","kind":"k","data":{}0{}}}"#,
                    "[".repeat(40),
                    "]".repeat(40)
                ),
                "nests at most 32 arrays".to_owned(),
            ),
            (
                format!(r#"{{"type":"note","kind":"k","data":[{}0]}}"#, "0,".repeat(70_000)),
                "at most 65536 elements".to_owned(),
            ),
        ];
        for (line, want) in table {
            let got = refused(&line);
            assert!(got.contains(&want), "{}: got {got:?}, want {want:?}", &line[..60]);
        }
    }

    /// A type the scan could not read (an escaped key) gets the bound of
    /// the type the parser finds.
    #[test]
    fn the_parsed_type_s_bound_holds_too() {
        let text = "x".repeat(LOG_BYTES);
        let line = format!(r#"{{"type":"note","t\u0079pe":"log","text":"{text}"}}"#);
        assert!(line.len() < NOTE_BYTES);
        assert!(refused(&line).contains("\"log\" event is at most"), "{}", refused(&line));
    }

    #[test]
    fn old_names_are_read_as_new() {
        assert_eq!(canonical_type("molt.requested"), "mutation.requested");
        assert_eq!(canonical_type("molt.rejected"), "mutation.rejected");
        assert_eq!(canonical_type("reply"), "reply");
    }
}
