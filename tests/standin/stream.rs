//! Streamed answers over a real socket: frames leave as they are written,
//! their script's `chunk_ms` apart, on both protocols; and the official
//! `openai` Python client's stream helpers read them whole.
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Server, CHAT, RESPONSES};
use crate::common::{repo_root, skip, succeed_within};

/// The Python with the `openai` package: `TENERAL_OPENAI_PYTHON`, else the
/// virtual environment scripts/deps makes.
const VENV_PYTHON: &str = "/var/tmp/teneral-venv/bin/python3";

/// Each frame of a streamed answer and when its last line arrived.
struct Arrived {
    head: String,
    frames: Vec<(Instant, String)>,
}

fn stream(server: &Server, path: &str, body: &Value) -> Arrived {
    let mut socket = TcpStream::connect(server.addr).expect("the stand-in accepts a connection");
    let _ = socket.set_read_timeout(Some(Duration::from_secs(20)));
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer k\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr,
        body.len()
    );
    socket.write_all(format!("{head}{body}").as_bytes()).expect("the request is sent");
    let mut reader = BufReader::new(socket);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("the head is read");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    assert!(head.contains("transfer-encoding: chunked"), "a stream has no length: {head}");
    // Chunked framing: a size line, the data, a CRLF; the frames are read
    // out of the data by their blank line.
    let mut frames = Vec::new();
    let mut pending = String::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).expect("a chunk size is read");
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size is hex");
        if size == 0 {
            break;
        }
        let mut data = vec![0; size + 2];
        std::io::Read::read_exact(&mut reader, &mut data).expect("a chunk is read");
        pending.push_str(std::str::from_utf8(&data[..size]).expect("frames are UTF-8"));
        while let Some(end) = pending.find("\n\n") {
            frames.push((Instant::now(), pending[..end + 2].to_owned()));
            pending.drain(..end + 2);
        }
    }
    assert_eq!(pending, "", "the stream ends on a whole frame");
    Arrived { head, frames }
}

#[test]
fn frames_leave_as_written_their_gap_apart_on_both_protocols() {
    let gap = 40;
    let script = format!(
        "{{\"reply\":\"one two three four\",\"chunk_ms\":{gap}}}\n\
         {{\"reply\":\"five six seven eight\",\"chunk_ms\":{gap}}}\n"
    );
    let server = Server::start(Some("k"), Some(&script));
    let chat = json!({"model": "standin", "messages": [{"role": "user", "content": "hi"}],
                      "stream": true, "stream_options": {"include_usage": true}});
    let responses = json!({"model": "standin", "input": "hi", "stream": true});
    for (path, body) in [(CHAT, chat), (RESPONSES, responses)] {
        let arrived = stream(&server, path, &body);
        assert!(arrived.head.contains("content-type: text/event-stream"), "{}", arrived.head);
        let frames = &arrived.frames;
        assert!(frames.len() >= 6, "{path}: {} frames", frames.len());
        let spread = frames[frames.len() - 1].0 - frames[0].0;
        let least = Duration::from_millis(gap * (frames.len() as u64 - 1) * 8 / 10);
        assert!(
            spread >= least,
            "{path}: {} frames arrived within {spread:?}, not {gap} ms apart",
            frames.len()
        );
        let words: String = frames
            .iter()
            .filter_map(|(_, f)| f.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|e| {
                let delta = &e["choices"][0]["delta"]["content"];
                let delta = if delta.is_string() { delta } else { &e["delta"] };
                (e["type"] == "response.output_text.delta" || e["object"].is_string())
                    .then(|| delta.as_str().map(str::to_owned))
                    .flatten()
            })
            .collect();
        let expected = if path == CHAT { "one two three four" } else { "five six seven eight" };
        assert_eq!(words, expected, "{path}");
    }
    let logged: Vec<bool> =
        server.log_lines().iter().map(|l| l["body"]["stream"] == true).collect();
    assert_eq!(logged, vec![true, true], "each streamed request is logged once");
}

fn openai_python() -> Option<PathBuf> {
    let python = std::env::var_os("TENERAL_OPENAI_PYTHON")
        .map_or_else(|| PathBuf::from(VENV_PYTHON), PathBuf::from);
    let found = succeed_within(
        Command::new(&python).args(["-c", "import openai"]),
        Duration::from_secs(30),
        "importing openai",
    );
    found.is_ok().then_some(python)
}

#[test]
fn the_openai_python_client_reads_both_streams() {
    let Some(python) = openai_python() else {
        skip(&format!(
            "no Python with the openai package at {VENV_PYTHON} or TENERAL_OPENAI_PYTHON; \
             scripts/deps installs it"
        ));
        return;
    };
    let server = Server::start(
        Some("k"),
        Some(
            "{\"reply\":\"Hello from the stream, owner.\",\"tool_calls\":[{\"name\":\"bash\",\"arguments\":{\"cmd\":\"ls -la body/src\"}}],\"chunk_ms\":2}\n\
             {\"reply\":\"Second answer, on the Responses API.\",\"reasoning\":\"think first\",\"tool_calls\":[{\"name\":\"bash\",\"arguments\":{\"cmd\":\"git log\"}}]}\n",
        ),
    );
    let script = repo_root().join("tests/fixtures/openai_stream.py");
    let out = succeed_within(
        Command::new(&python).arg(&script).arg(format!("http://{}/v1", server.addr)),
        Duration::from_secs(60),
        "the openai client reading the stand-in's streams",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let read: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let chat = &read["chat"];
    assert_eq!(chat["content"], "Hello from the stream, owner.", "{read}");
    assert_eq!(chat["calls"], json!([["call_1", "bash", r#"{"cmd":"ls -la body/src"}"#]]));
    assert_eq!(chat["finish"], "tool_calls");
    assert!(chat["usage"].as_u64().is_some_and(|n| n > 0), "the usage chunk was read: {read}");
    let deltas = chat["deltas"].as_array().map_or(0, Vec::len);
    assert!(deltas >= 5, "the words came one at a time: {read}");
    let responses = &read["responses"];
    assert_eq!(responses["text"], "Second answer, on the Responses API.", "{read}");
    assert_eq!(responses["calls"], json!([["call_2", "bash", r#"{"cmd":"git log"}"#]]));
    assert_eq!(responses["status"], "completed");
    assert!(responses["usage"].as_u64().is_some_and(|n| n > 0), "{read}");
    let kinds: Vec<&str> =
        responses["kinds"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for kind in [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.output_item.done",
        "response.completed",
    ] {
        assert!(kinds.contains(&kind), "the client read no {kind}: {kinds:?}");
    }
}
