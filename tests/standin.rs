//! The stand-in model over real HTTP: both protocols, tool rounds sent back
//! in the shape they came in, the script (errors, delays, `expect`), the key,
//! the refusals, the request log and streamed answers.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use teneral::standin::{Config, Standin};

mod child;
/// What it refuses: a wrong key, malformed requests, a bad script or address.
mod refusals;
/// Answers asked for as a stream.
mod stream;

const CHAT: &str = "/v1/chat/completions";
const RESPONSES: &str = "/v1/responses";

/// A stand-in served from a thread of its own, stopped when dropped.
struct Server {
    addr: SocketAddr,
    log: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(key: Option<&str>, script: Option<&str>) -> Server {
        let dir = tempfile::tempdir().expect("a temporary directory can be made");
        let log = dir.path().join("requests.jsonl");
        let script = script.map(|text| {
            let path = dir.path().join("script.jsonl");
            std::fs::write(&path, text).expect("the script file is written");
            path
        });
        let config = Config {
            key: key.map(str::to_owned),
            script,
            log: Some(log.clone()),
            ..Config::default()
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime starts");
            runtime.block_on(async move {
                let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
                match Standin::bind(loopback, config).await {
                    Ok(standin) => {
                        let _ = ready_tx.send(Ok(standin.local_addr()));
                        // Spawned as the kernel spawns it, which also proves it is Send.
                        let task = tokio::spawn(standin.serve());
                        let _ = stop_rx.await;
                        task.abort();
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                    }
                }
            });
        });
        let addr = match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(addr)) => addr,
            other => panic!("the stand-in did not start: {other:?}"),
        };
        Server { addr, log, stop: Some(stop), thread: Some(thread), _dir: dir }
    }

    /// POSTs a JSON body with `Bearer key`.
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.request("POST", path, Some("Bearer k"), &body.to_string())
    }

    /// One request on a fresh connection; checks the answer's framing.
    fn request(&self, method: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, Value) {
        let mut stream = TcpStream::connect(self.addr).expect("the stand-in accepts a connection");
        let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
        let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{auth}\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(format!("{head}{body}").as_bytes()).expect("the request is sent");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("the answer is read to its end");
        let text = String::from_utf8(raw).expect("the answer is UTF-8");
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no blank line ends the head: {text}"));
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status code in: {head}"));
        let head = head.to_ascii_lowercase();
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        assert!(!head.contains("transfer-encoding"), "{head}");
        let json = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {body}"));
        (status, json)
    }

    fn log_lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).expect("the stand-in keeps its request log");
        text.lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l}"))
            })
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_else(|| panic!("no error message: {body}"))
}

#[test]
fn chat_text_then_a_tool_round_then_the_default() {
    let server = Server::start(
        Some("k"),
        Some(
            "# a chat conversation\n\
             {\"reply\":\"hello there\",\"reasoning\":\"greet first\"}\n\
             \n\
             {\"tool_calls\":[{\"name\":\"bash\",\"arguments\":{\"cmd\":\"ls\"}}]}\n\
             {\"expect\":\"a.txt\",\"reply\":\"I see a.txt\"}\n",
        ),
    );
    let tools = json!([{"type": "function", "function": {"name": "bash",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]);
    let mut messages = vec![
        json!({"role": "system", "content": "you are a test"}),
        json!({"role": "user", "content": "hi"}),
    ];

    let first = json!({"model": "standin", "messages": messages, "tools": tools});
    let (status, answer) = server.post(CHAT, &first);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], "standin");
    let choice = &answer["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["content"], "hello there");
    assert_eq!(choice["message"]["reasoning_content"], "greet first");
    let body_chars = first.to_string().chars().count() as u64;
    assert_eq!(answer["usage"]["prompt_tokens"], json!(body_chars / 4));
    assert_eq!(answer["usage"]["completion_tokens"], json!(("hello there".len() + 11) / 4));

    messages.push(json!({"role": "assistant", "content": "hello there"}));
    messages.push(json!({"role": "user", "content": "list the files"}));
    let (status, answer) =
        server.post(CHAT, &json!({"model": "standin", "messages": messages, "tools": tools}));
    assert_eq!(status, 200, "{answer}");
    let message = answer["choices"][0]["message"].clone();
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["content"], Value::Null);
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "call_1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}])
    );

    // The assistant message goes back exactly as it came, with the tool's answer.
    messages.push(message);
    messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"}));
    let third = json!({"model": "standin", "messages": messages, "tools": tools});
    let (status, answer) = server.post(CHAT, &third);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "I see a.txt");

    messages.push(answer["choices"][0]["message"].clone());
    messages.push(json!({"role": "user", "content": "and now?"}));
    let (status, answer) = server.post(CHAT, &json!({"model": "standin", "messages": messages}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "Stand-in model here. You said: and now?"
    );

    let log = server.log_lines();
    assert_eq!(log.len(), 4);
    assert!(log.iter().all(|l| l["path"] == CHAT && l["status"] == 200), "{log:?}");
    assert_eq!(log[0]["body"], first);
    assert_eq!(log[2]["body"], third);
    assert_eq!(
        log[2]["body"]["messages"][4]["tool_calls"][0]["function"]["arguments"],
        "{\"cmd\":\"ls\"}"
    );
}

#[test]
fn responses_text_then_a_tool_round_then_the_default() {
    let server = Server::start(
        None,
        Some(
            "{\"reply\":\"hello\",\"reasoning\":\"thinking\"}\n\
             {\"tool_calls\":[{\"name\":\"bash\",\"arguments\":{\"cmd\":\"pwd\"}},{\"name\":\"bash\",\"arguments\":{\"cmd\":\"id\"}}]}\n",
        ),
    );
    let tools = json!([{"type": "function", "name": "bash", "parameters": {"type": "object"}}]);
    let first = json!({"model": "standin", "instructions": "be brief", "input": "hi",
        "tools": tools, "reasoning": {"effort": "low", "summary": "auto"}, "store": false,
        "include": ["reasoning.encrypted_content"]});
    let (status, answer) = server.post(RESPONSES, &first);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["id"], "resp_1");
    let output = answer["output"].as_array().cloned().unwrap_or_default();
    assert_eq!(output.len(), 2, "{answer}");
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[0]["summary"], json!([{"type": "summary_text", "text": "thinking"}]));
    assert!(output[0]["encrypted_content"].is_string(), "{answer}");
    assert_eq!(
        output[1],
        json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "hello", "annotations": []}]})
    );
    let body_chars = first.to_string().chars().count() as u64;
    assert_eq!(answer["usage"]["input_tokens"], json!(body_chars / 4));

    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(output);
    input.push(json!({"role": "user", "content": [{"type": "input_text", "text": "where am I?"}]}));
    let (status, answer) = server.post(
        RESPONSES,
        &json!({"model": "standin", "input": input, "tools": tools, "store": false}),
    );
    assert_eq!(status, 200, "{answer}");
    let calls = answer["output"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        calls,
        vec![
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash",
                   "arguments": "{\"cmd\":\"pwd\"}", "status": "completed"}),
            json!({"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "bash",
                   "arguments": "{\"cmd\":\"id\"}", "status": "completed"}),
        ]
    );

    // The calls go back as they came, each with its output.
    input.extend(calls);
    input.push(json!({"type": "function_call_output", "call_id": "call_1", "output": "/home"}));
    input.push(json!({"type": "function_call_output", "call_id": "call_2", "output": "uid=0"}));
    let third = json!({"model": "standin", "input": input, "tools": tools, "store": false});
    let (status, answer) = server.post(RESPONSES, &third);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["output"][0]["content"][0]["text"],
        "Stand-in model here. The tool said: uid=0"
    );

    let log = server.log_lines();
    assert_eq!(log.len(), 3);
    let at = log[2]["at_us"].as_u64().unwrap_or_default();
    assert!(at >= log[1]["at_us"].as_u64().unwrap_or(u64::MAX), "answers are stamped in order");
    assert_eq!(log[2], json!({"path": RESPONSES, "status": 200, "body": third, "at_us": at}));
}

#[test]
fn scripted_errors_delays_and_expectations() {
    let server = Server::start(
        None,
        Some(
            "{\"error\":{\"status\":429,\"message\":\"slow down\"},\"delay_ms\":300}\n\
             {\"error\":{\"status\":500}}\n\
             {\"delay_ms\":300}\n\
             {\"expect\":\"the password\",\"reply\":\"granted\"}\n",
        ),
    );
    let chat = |text: &str| json!({"model": "m", "messages": [{"role": "user", "content": text}]});

    let started = Instant::now();
    let (status, answer) = server.post(CHAT, &chat("one"));
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!(status, 429);
    assert_eq!(answer["error"]["type"], "rate_limit_exceeded");
    assert_eq!(error_message(&answer), "slow down");

    let (status, answer) = server.post(RESPONSES, &json!({"model": "m", "input": "two"}));
    assert_eq!(status, 500);
    assert_eq!(answer["error"]["type"], "server_error");

    let started = Instant::now();
    let (status, answer) = server.post(CHAT, &chat("three"));
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!(status, 200);
    assert_eq!(answer["choices"][0]["message"]["content"], "Stand-in model here. You said: three");

    let (status, answer) = server.post(CHAT, &chat("wrong words"));
    assert_eq!(status, 409);
    let message = error_message(&answer);
    assert!(message.contains("step 4 (script line 4)"), "{message}");
    assert!(
        message.contains("\"the password\"") && message.contains("\"wrong words\""),
        "{message}"
    );

    let (status, answer) = server.post(CHAT, &chat("here is the password"));
    assert_eq!(status, 200);
    assert_eq!(answer["choices"][0]["message"]["content"], "granted");

    let statuses: Vec<Value> = server.log_lines().iter().map(|l| l["status"].clone()).collect();
    assert_eq!(statuses, vec![json!(429), json!(500), json!(200), json!(409), json!(200)]);
}
