//! The body and its turns.
//!
//! A turn begins when a stimulus is in the journal (an owner line, the birth
//! letter, an envelope, the clock). Then, until the model answers without a
//! tool call: build the request from the soul and the journal, ask the model
//! for a stream (trying again when it cannot be reached), send its words to
//! the kernel as they arrive (`reply.delta`, at most one every
//! [`DELTA_EVERY`], never journaled), journal its words whole, run its tool
//! calls in order, each journaled before (`tool.call`) and after
//! (`tool.result`). The turn ends with `turn.ended`, or, when the owner
//! interrupts, with the words that had arrived (a `reply` marked
//! `interrupted`), `[interrupted]` for the call that was cut, `[not
//! started]` for the calls after it, and `turn.interrupted`. A provider that
//! refuses a stream is asked without one from then on ([`crate::stream`]).
//!
//! Everything journaled also goes into the conversation in memory, so the
//! next request sees it without reading the journal again.

use std::cell::Cell;
use std::fs;
use std::io;
use std::net::Shutdown;
use std::path::Path;
use std::sync::{mpsc, Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cancel::Cancel;
use crate::config::Config;
use crate::config::Protocol;
use crate::context::{Conversation, TooBig};
use crate::events::{Events, SendError};
use crate::model::{self, Answer, Failure, ToolCall, ToolSpec};
use crate::tools::{self, Outcome, ToolEnv};
use crate::{http, images, inbox, journal, prompt, sensors, stream};

/// How long a tool that was interrupted may take to stop before it is left
/// behind.
pub const GRACE: Duration = Duration::from_secs(2);

/// Why a request to the model ended without an answer.
enum Stop {
    /// The owner interrupted it; the reply's text that had arrived.
    Interrupted(String),
    Failed(String),
}

/// Why an exchange brought back no answer.
enum StreamError {
    /// The connection failed or was cut, or the stream ended early.
    Io(io::Error),
    /// The stream said the request failed.
    Failed(String),
}

/// What one request to the model brought back.
enum Exchange {
    /// An answer read whole: an error, or a provider that does not stream.
    Whole(http::Response),
    /// An answer read from a stream.
    Streamed(Answer),
}

/// The longest a piece of a streamed reply waits for more before it is sent
/// on to the kernel, so the owner sees words at once without one event per
/// word.
pub const DELTA_EVERY: Duration = Duration::from_millis(30);

/// The most text one `reply.delta` holds: more waiting is sent at once, in
/// pieces of this size, so that even escaped at its worst (six bytes a
/// byte) each stays within the kernel's bound on a delta (16 KiB,
/// docs/contract.md).
pub const DELTA_BYTES: usize = 2048;

pub struct Body {
    pub config: Config,
    pub events: Arc<Events>,
    pub cancel: Arc<Cancel>,
    pub conversation: Conversation,
    tools: Vec<ToolSpec>,
    /// Set by the `mutate` tool: the commit asked for.
    mutation: Arc<OnceLock<String>>,
    /// The provider refused a stream once: it is asked without one since.
    whole_only: Cell<bool>,
}

impl Body {
    /// A body with the conversation read back from the journal.
    pub fn new(config: Config, events: Arc<Events>, cancel: Arc<Cancel>) -> io::Result<Body> {
        let mut conversation = Conversation::new(config.context_chars.saturating_mul(2));
        journal::read(&config.home, |event| conversation.add(event))?;
        let mutation = Arc::new(OnceLock::new());
        let whole_only = Cell::new(false);
        Ok(Body {
            config,
            events,
            cancel,
            conversation,
            tools: tools::specs(),
            mutation,
            whole_only,
        })
    }

    /// The commit a `mutate` call asked for, if one did: the body must exit
    /// with [`crate::mutate::EXIT`] once the turn has ended.
    pub fn mutation(&self) -> Option<&str> {
        self.mutation.get().map(String::as_str)
    }

    fn home(&self) -> &Path {
        &self.config.home
    }

    /// Sends an event; once journaled it joins the conversation. `Err` is
    /// the kernel's refusal. A broken socket ends the body: without the
    /// kernel there is nothing it may do.
    pub fn journal(&mut self, event: Value) -> Result<u64, String> {
        match self.events.send(&event) {
            Ok(seq) => {
                if let Value::Object(event) = &event {
                    self.conversation.add(event);
                }
                Ok(seq.unwrap_or_default())
            }
            Err(SendError::Refused(why)) => Err(why),
            Err(broken) => {
                eprintln!("teneral-body: {broken}; stopping");
                std::process::exit(1);
            }
        }
    }

    /// Journals an event the turn goes on without, logging a refusal.
    fn record(&mut self, event: Value) {
        if let Err(why) = self.journal(event.clone()) {
            self.events.log("error", &format!("the kernel refused {event}: {why}"));
        }
    }

    /// Takes in an owner line; true when it is in the journal.
    pub fn take_line(&mut self, name: &str) -> bool {
        let path = self.home().join(sensors::OWNER_DIR).join(name);
        let text = match fs::read(&path).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return false, // taken in already
            Err(e) => {
                self.events.log("error", &format!("cannot read owner line {name}: {e}"));
                return false;
            }
            Ok(Err(_)) => {
                self.events.log("error", &format!("owner line {name} is not UTF-8; left as it is"));
                return false;
            }
        };
        match self.journal(json!({"type": "owner.line", "file": name, "text": text})) {
            Ok(_) => true,
            Err(why) => {
                let text =
                    format!("owner line {name} was refused ({why}); the file is left as it is");
                self.events.log("error", &text);
                false
            }
        }
    }

    /// Takes in an envelope from `inbox/`; true when it is in the journal.
    pub fn take_envelope(&mut self, name: &str) -> bool {
        let home = self.home().to_owned();
        let reject = |body: &Body, why: &str| {
            body.events.log("warn", &format!("inbox/{name} rejected: {why}"));
            if let Err(e) = inbox::reject(&home, name, why) {
                body.events.log("error", &format!("cannot move inbox/{name} aside: {e}"));
            }
        };
        match inbox::read(&home, name) {
            inbox::Arrival::Gone => false,
            inbox::Arrival::Invalid(why) => {
                reject(self, &why);
                false
            }
            inbox::Arrival::Valid(envelope) => {
                let text = envelope["text"].clone();
                let event = json!({"type": "stimulus", "source": "inbox", "text": text,
                    "from": envelope["from"], "envelope": envelope});
                match self.journal(event) {
                    Ok(_) => {
                        if let Err(e) = inbox::settle(&home, name) {
                            self.events.log("error", &format!("cannot move inbox/{name}: {e}"));
                        }
                        true
                    }
                    Err(why) => {
                        reject(self, &format!("the kernel refused it: {why}"));
                        false
                    }
                }
            }
        }
    }

    /// The first message of a new individual: the letter in `BIRTH.md`.
    pub fn birth(&mut self) -> bool {
        match fs::read_to_string(self.home().join("BIRTH.md")) {
            Ok(text) => self.journal(json!({"type": "birth", "text": text})).is_ok(),
            Err(e) => {
                let text = format!("BIRTH.md cannot be read ({e}); waiting for the owner instead");
                self.events.log("warn", &text);
                false
            }
        }
    }

    /// A clock stimulus; true when journaled.
    pub fn clock(&mut self, text: String) -> bool {
        self.journal(json!({"type": "stimulus", "source": "clock", "text": text})).is_ok()
    }

    /// Runs one turn over everything journaled since `mark`.
    pub fn run_turn(&mut self, mark: usize) {
        self.cancel.begin();
        self.steps(mark);
        self.cancel.end();
    }

    fn steps(&mut self, mark: usize) {
        loop {
            if self.cancel.is_cancelled() {
                return self.interrupted(0, &[]);
            }
            let system = prompt::system(self.home());
            let budget = self.config.context_chars;
            let room = budget.saturating_sub(system.chars().count());
            let items = match self.conversation.items(room, mark) {
                Ok(items) => items,
                Err(too_big) => return self.too_big(too_big),
            };
            let items = images::attach(self.home(), items);
            let c = &self.config;
            let request = model::request(
                c.protocol,
                &c.model,
                c.reasoning_effort.as_deref(),
                &system,
                &items,
                &self.tools,
            );
            let answer = match self.ask(&request) {
                Ok(answer) => answer,
                Err(Stop::Interrupted(partial)) => {
                    self.record_cut(&partial);
                    return self.interrupted(0, &[]);
                }
                Err(Stop::Failed(why)) => return self.failed(&why),
            };
            if self.cancel.is_cancelled() {
                // Its calls are never made; its words were seen.
                self.record_cut(&answer.text);
                return self.interrupted(0, &[]);
            }
            if answer.calls.is_empty() {
                self.cancel.end(); // an interrupt from now on is too late
                self.record_answer(&answer);
                return self.record(json!({"type": "turn.ended"}));
            }
            self.record_answer(&answer);
            for (index, call) in answer.calls.iter().enumerate() {
                if self.cancel.is_cancelled() {
                    return self.interrupted(index, &answer.calls[index..]);
                }
                self.record(call_event(index, call));
                let (outcome, cut) = self.run_tool(call);
                self.record(json!({"type": "tool.result", "id": call.id,
                    "output": outcome.output, "error": outcome.error}));
                if cut {
                    return self.interrupted(index + 1, &answer.calls[index + 1..]);
                }
            }
        }
    }

    fn record_answer(&mut self, answer: &Answer) {
        for text in &answer.reasoning {
            self.record(json!({"type": "reasoning", "text": text}));
        }
        if let Some((input, output)) = answer.usage {
            self.record(json!({"type": "usage", "input_tokens": input, "output_tokens": output}));
        }
        if !answer.text.is_empty() {
            self.record(json!({"type": "reply", "text": answer.text}));
        }
    }

    /// Journals the words of a reply the owner cut short, marked so.
    fn record_cut(&mut self, partial: &str) {
        if !partial.is_empty() {
            self.record(json!({"type": "reply", "text": partial, "interrupted": true}));
        }
    }

    /// Asks the model, trying again after 10 s, 1 min, 5 min, then every
    /// 15 min while it cannot be reached or a limit was hit. Each retry is
    /// logged and journaled (`model.retry`), so the owner sees it at once.
    fn ask(&self, request: &Value) -> Result<Answer, Stop> {
        let plain = request.to_string().into_bytes();
        let mut streamed = request.clone();
        crate::stream::ask_for(self.config.protocol, &mut streamed);
        let streamed = streamed.to_string().into_bytes();
        let url = self.config.endpoint();
        let mut attempt = 0;
        loop {
            let mut status = None;
            let mut partial = String::new();
            let streaming = !self.whole_only.get();
            let body = if streaming { &streamed } else { &plain };
            let failure = match self.exchange(&url, body, &mut partial) {
                Ok(Exchange::Streamed(answer)) => return Ok(answer),
                Ok(Exchange::Whole(response)) => {
                    match model::classify(response.status, &response.body) {
                        None => {
                            if streaming {
                                self.stream_refused("it answered whole");
                            }
                            match model::parse_answer(self.config.protocol, &response.body) {
                                Ok(answer) => return Ok(answer),
                                Err(why) => Failure::Fatal(why),
                            }
                        }
                        Some(_)
                            if streaming && stream::refuses(response.status, &response.body) =>
                        {
                            let why = format!("HTTP {}", response.status);
                            self.stream_refused(&why);
                            continue;
                        }
                        Some(failure) => {
                            status = Some(response.status);
                            failure
                        }
                    }
                }
                Err(StreamError::Failed(why)) => Failure::Fatal(why),
                Err(StreamError::Io(e)) => {
                    Failure::Retry(format!("{url} could not be reached: {e}"))
                }
            };
            if self.cancel.is_cancelled() {
                return Err(Stop::Interrupted(partial));
            }
            let why = match failure {
                Failure::Fatal(why) => return Err(Stop::Failed(why)),
                Failure::Retry(why) => why,
            };
            let wait = model::retry_delay(attempt, self.config.retry_scale);
            let text = format!(
                "model request failed ({why}); trying again in {:.3} s (retry {})",
                wait.as_secs_f64(),
                attempt + 1
            );
            self.events.log("warn", &text);
            // The owner sees it at once in `talk`; a refusal is only logged.
            if let Err(e) = self.events.send(&model::retry_event(status, &why, attempt + 1, wait)) {
                self.events.log("error", &format!("model.retry was not journaled: {e}"));
            }
            if !self.cancel.sleep(wait) {
                return Err(Stop::Interrupted(String::new()));
            }
            attempt += 1;
        }
    }

    /// The provider will not stream: asked without from now on, said once.
    fn stream_refused(&self, how: &str) {
        self.whole_only.set(true);
        let text = format!(
            "the model's provider does not stream replies ({how}); asking it without a stream \
             from now on"
        );
        self.events.log("notice", &text);
    }

    /// One POST, whose socket an interrupt shuts down. A streamed answer is
    /// read as it arrives, its words sent on to the kernel as `reply.delta`
    /// and kept in `partial`, so an interrupt leaves what had arrived.
    fn exchange(
        &self,
        url: &str,
        body: &[u8],
        partial: &mut String,
    ) -> Result<Exchange, StreamError> {
        let mut hook = None;
        let opened = http::open(url, &self.config.api_key, body, |stream| {
            if let Ok(stream) = stream.try_clone() {
                let shut = move || drop(stream.shutdown(Shutdown::Both));
                hook = self.cancel.on_interrupt(Box::new(shut));
            }
        });
        let result = match opened {
            Ok(opened)
                if (200..300).contains(&opened.head.status) && opened.head.is_event_stream() =>
            {
                self.read_stream(opened, partial).map(Exchange::Streamed)
            }
            Ok(mut opened) => {
                let mut bytes = Vec::new();
                match io::Read::read_to_end(&mut opened.body, &mut bytes) {
                    Ok(_) => Ok(Exchange::Whole(http::Response {
                        status: opened.head.status,
                        body: bytes,
                    })),
                    Err(e) => Err(StreamError::Io(e)),
                }
            }
            Err(e) => Err(StreamError::Io(e)),
        };
        self.cancel.forget(hook);
        result
    }

    fn read_stream(
        &self,
        opened: http::Opened,
        partial: &mut String,
    ) -> Result<Answer, StreamError> {
        let mut lines = io::BufReader::new(opened.body);
        let mut events = stream::Events::default();
        let mut reading = stream::Reading::new(self.config.protocol);
        let mut unsent = String::new();
        let mut sent_at: Option<Instant> = None;
        // A refused delta ends the deltas of this reply; it still comes whole.
        let mut muted = false;
        let mut line = String::new();
        loop {
            line.clear();
            let read = io::BufRead::read_line(&mut lines, &mut line);
            match read {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    partial.push_str(reading.text());
                    return Err(StreamError::Io(e));
                }
            }
            let Some(data) = events.line(line.trim_end_matches('\n')) else { continue };
            match reading.take(&data).map_err(StreamError::Failed)? {
                stream::Step::Text(_) if muted => {}
                stream::Step::Text(text) => {
                    unsent.push_str(&text);
                    let due = sent_at.is_none_or(|at| at.elapsed() >= DELTA_EVERY);
                    if due || unsent.len() >= DELTA_BYTES {
                        muted = !self.send_delta(&mut unsent);
                        sent_at = Some(Instant::now());
                    }
                }
                stream::Step::Quiet => {}
                stream::Step::Done if self.config.protocol == Protocol::Responses => break,
                stream::Step::Done => {}
            }
        }
        let text = reading.text().to_owned();
        match reading.finish() {
            Ok(answer) => Ok(answer),
            Err(why) => {
                partial.push_str(&text);
                Err(StreamError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, why)))
            }
        }
    }

    /// Sends the words not yet sent to the kernel, for the owner's clients;
    /// false when it did not take them. They are not journaled, so a refusal
    /// (over the rate, or a reply in progress over its size) only costs the
    /// owner a glimpse: it is logged once, and the rest of the reply comes
    /// whole.
    fn send_delta(&self, unsent: &mut String) -> bool {
        let text = std::mem::take(unsent);
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut end = rest.len().min(DELTA_BYTES);
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            let (piece, after) = rest.split_at(end);
            rest = after;
            let event = json!({"type": "reply.delta", "text": piece});
            if let Err(e) = self.events.send(&event) {
                let text = format!("{e}; the rest of this reply is shown when it is whole");
                self.events.log("warn", &text);
                return false;
            }
        }
        true
    }

    /// Runs a tool on a thread of its own; true in the second place when the
    /// owner cut it.
    fn run_tool(&self, call: &ToolCall) -> (Outcome, bool) {
        let args = match model::arguments(call) {
            Ok(args) => args,
            Err(why) => return (Outcome { output: why, error: true }, false),
        };
        let (tx, rx) = mpsc::channel::<Option<Outcome>>();
        let stop = tx.clone();
        let Some(hook) = self.cancel.on_interrupt(Box::new(move || drop(stop.send(None)))) else {
            let output = "[interrupted] the owner interrupted the turn as this call began".into();
            return (Outcome { output, error: true }, true);
        };
        let env = ToolEnv {
            home: self.config.home.clone(),
            events: Arc::clone(&self.events),
            cancel: Arc::clone(&self.cancel),
            mutation: Arc::clone(&self.mutation),
        };
        let name = call.name.clone();
        thread::spawn(move || drop(tx.send(Some(tools::run(&env, &name, &args)))));
        let result = match rx.recv() {
            Ok(Some(outcome)) => (outcome, false),
            _ => {
                let output = match rx.recv_timeout(GRACE) {
                    Ok(Some(outcome)) => format!("[interrupted] {}", outcome.output),
                    _ => "[interrupted] the tool did not stop within two seconds of the \
                          interrupt and was left behind"
                        .to_owned(),
                };
                (Outcome { output, error: true }, true)
            }
        };
        self.cancel.forget(Some(hook));
        result
    }

    /// Ends an interrupted turn: `[not started]` for `rest`, whose first is
    /// call number `first` of its answer, then `turn.interrupted`.
    fn interrupted(&mut self, first: usize, rest: &[ToolCall]) {
        for (n, call) in rest.iter().enumerate() {
            self.record(call_event(first + n, call));
            self.record(json!({"type": "tool.result", "id": call.id, "error": true,
                "output": "[not started] the owner interrupted the turn before this call began"}));
        }
        self.record(json!({"type": "turn.interrupted"}));
    }

    /// Tells the owner, in the body's words, why the turn ends early.
    fn say(&mut self, level: &str, text: &str) {
        self.events.log(level, text);
        self.record(json!({"type": "reply", "from": "body", "text": text}));
        self.record(json!({"type": "turn.ended"}));
    }

    fn failed(&mut self, why: &str) {
        let text = format!(
            "[from the body, not the model] The model refused the request, and trying again \
             would not help: {why}"
        );
        self.say("error", &text);
    }

    fn too_big(&mut self, too_big: TooBig) {
        let text = format!(
            "[from the body, not the model] The newest turn needs {} characters of context, but \
             only {} are left of TENERAL_CONTEXT_CHARS={} after the system prompt and the soul, \
             so nothing was sent to the model. Raise TENERAL_CONTEXT_CHARS in .env and restart, \
             or make the soul files or the message shorter.",
            too_big.needed, too_big.room, self.config.context_chars
        );
        self.say("warn", &text);
    }
}

/// The journal's `tool.call` for call number `index` of an answer.
fn call_event(index: usize, call: &ToolCall) -> Value {
    json!({"type": "tool.call", "id": call.id, "name": call.name,
        "input": model::input_of(call), "index": index})
}
