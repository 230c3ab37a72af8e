//! The clients against a running kernel on the stand-in model: the piped
//! client shows the gate's steps as they start and end, and the full
//! client in a real terminal sends images that reach the model, interrupts
//! a slow turn, and shows a streamed reply as it grows.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{system_tests, talk as piped, Individual, TestResult};
use teneral_testkit::tmux::Tmux;
use teneral_testkit::PNG;

/// Commits what `edit` does to the agent's workspace, as an agent would;
/// returns the commit.
fn workspace_commit(
    home: &Path,
    edit: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<String, Box<dyn std::error::Error>> {
    use git2::{IndexAddOption, Repository, Signature};
    let workspace = home.join(".teneral/candidate");
    edit(&workspace)?;
    let repo = Repository::open(&workspace)?;
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("agent", "agent@localhost")?;
    let parent = repo.head()?.peel_to_commit()?;
    Ok(repo.commit(Some("HEAD"), &sig, &sig, "a mutation", &tree, &[&parent])?.to_string())
}

/// The piped client against a kernel on the stand-in whose fixture body asks
/// for a mutation: each step of the gate is printed when it starts (from the
/// kernel's status) and again when it ends (from the journal), in that order.
#[test]
fn piped_the_gate_steps_are_shown_as_they_start_and_end() -> TestResult {
    let ind = Individual::with_mode("mutate", "", &[])?;
    let _kernel = ind.start()?;
    let long = Duration::from_secs(300);
    ind.wait_for("the birth turn", long, |e| e["type"] == "turn.ended")?;
    let next = workspace_commit(ind.path(), |w| {
        let main = w.join("body/src/main.rs");
        let text = fs::read_to_string(&main)?;
        let normal =
            text.replace("const MODE: &str = \"mutate\";", "const MODE: &str = \"normal\";");
        fs::write(main, normal)
    })?;
    // The commit asks for the mutation; the second line is answered by the
    // generation that comes after the gate.
    let (status, out, err) = piped(ind.path(), &format!("{next}\nwho are you now?\n"), 300)?;
    let log = ind.kernel_log();
    assert_eq!(status, Some(0), "stdout:\n{out}\nstderr:\n{err}\nkernel log:\n{log}");
    assert!(out.contains("stepped aside for its mutation"), "not a crash: {out}");
    let at = |text: &str| out.find(text);
    let smoke = (at("[gate] smoke: started"), at("[gate] smoke: passed ("));
    assert!(matches!(smoke, (Some(a), Some(b)) if a < b), "smoke starts, then ends:\n{out}");
    // Every step said to start is said once, and ends after it.
    let lines: Vec<&str> = out.lines().collect();
    let started: Vec<&str> =
        lines.iter().filter_map(|l| l.strip_prefix("[gate] ")?.strip_suffix(": started")).collect();
    assert!(started.len() >= 2, "the gate's steps as they start:\n{out}");
    for step in &started {
        let said = format!("[gate] {step}: started");
        assert_eq!(lines.iter().filter(|l| **l == said).count(), 1, "{out}");
        let first = format!("[gate] {}: ", step.split(", ").next().unwrap_or(step));
        let start = lines.iter().position(|l| *l == said);
        let end = lines.iter().position(|l| l.starts_with(&first) && !l.ends_with(": started"));
        assert!(start.is_some() && start < end, "{step} ends after it starts:\n{out}");
    }
    assert!(at("[mutation] accepted").is_some(), "{out}");
    assert!(out.rfind("who are you now?") > at("[mutation] accepted"), "{out}");
    Ok(())
}

/// A GIF header is enough for the magic bytes and the size.
const GIF: &[u8] = b"GIF89a\x02\x00\x03\x00\x00\x00\x00;";

/// `teneralctl talk` (the full client) in a tmux of its own, killed when dropped.
fn terminal(home: &Path) -> Tmux {
    let line = format!(
        "env -u NO_COLOR LANG=C.UTF-8 LC_ALL= {} talk -d {}; sleep 600",
        crate::common::teneralctl().display(),
        home.display()
    );
    Tmux::start("talk-kernel", 100, 30, &line)
}

/// The images of the last request to the stand-in that carries any, as
/// data URLs, read from the stand-in's log in the shape of `protocol`.
fn images_sent(home: &Path, protocol: &str) -> Vec<String> {
    let log = fs::read_to_string(home.join("standin.jsonl")).unwrap_or_default();
    let urls = |request: &Value| -> Vec<String> {
        let list = match protocol {
            "chat" => &request["body"]["messages"],
            _ => &request["body"]["input"],
        };
        let items = list.as_array().into_iter().flatten();
        let parts = items.flat_map(|m| m["content"].as_array().cloned().unwrap_or_default());
        parts
            .filter_map(|p| {
                let url = match protocol {
                    "chat" if p["type"] == "image_url" => p["image_url"]["url"].as_str(),
                    "responses" if p["type"] == "input_image" => p["image_url"].as_str(),
                    _ => None,
                };
                url.map(str::to_owned)
            })
            .collect()
    };
    let requests = log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    requests.rev().map(|r| urls(&r)).find(|u| !u.is_empty()).unwrap_or_default()
}

/// An image followed all the way: attached in the full client in a real
/// terminal, by a pasted path and by `/image`, sent with a line, taken in
/// by the seed body through a running kernel, and shown to the stand-in
/// model in each protocol's own shape, which the stand-in checks. Then a
/// slow turn (the stand-in waits a minute): the live region says what the
/// agent does and that Esc stops it, and Esc does. A system test (tmux,
/// the seed body).
#[test]
fn the_full_client_sends_images_to_the_model_and_interrupts_a_slow_turn() -> TestResult {
    use base64::Engine;
    if !system_tests() {
        return Ok(());
    }
    let files = tempfile::tempdir()?;
    let shot = files.path().join("my shot.png");
    fs::write(&shot, PNG)?;
    let anim = files.path().join("anim.gif");
    fs::write(&anim, GIF)?;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let want = [
        format!("data:image/png;base64,{}", b64(PNG)),
        format!("data:image/gif;base64,{}", b64(GIF)),
    ];
    let script = "{\"reply\": \"Hello.\"}\n{\"reply\": \"two small pictures\"}\n\
                  {\"delay_ms\": 60000, \"reply\": \"too late\"}\n";
    for protocol in ["chat", "responses"] {
        let wire = format!("TENERAL_STANDIN_PROTOCOL={protocol}");
        let ind = Individual::seed(script, &["TENERAL_STANDIN_LOG=standin.jsonl", &wire])?;
        let _kernel = ind.start()?;
        ind.wait_for("the birth turn", Duration::from_secs(600), |e| e["type"] == "turn.ended")?;
        let term = terminal(ind.path());
        let within = Duration::from_secs(60);
        term.wait_for_within("lists the commands", within);
        term.paste(&format!("'{}'", shot.display()));
        term.wait_for_within("[image 1 · png · 1×1 · 70 B]", within);
        term.enter(&format!("/image {}", anim.display()));
        term.wait_for_within("[image 2 · gif · 2×3 · 14 B]", within);
        term.enter("what are these?");
        let screen = term.wait_for_within("two small pictures", within);
        assert!(screen.contains("› what are these?"), "{protocol}: {screen}");
        let sent = images_sent(ind.path(), protocol);
        assert_eq!(sent, want, "{protocol}: the stand-in's log\n{}", ind.kernel_log());

        term.enter("take your time");
        term.wait_for_within("◆ thinking", within);
        term.wait_for_within("esc to interrupt", within);
        assert!(term.run(&["send-keys", "-t", "0", "Escape"]).status.success());
        term.wait_for_within("interrupted by you", within);
        ind.wait_for("the interrupt", within, |e| e["type"] == "turn.interrupted")?;
        assert!(!term.screen(false).contains("too late"), "{protocol}: the slow reply never came");
    }
    Ok(())
}

/// A reply streamed all the way: the seed body asks the stand-in for a
/// stream, whose words come 150 ms apart; the full client in a real
/// terminal shows the words growing in its live region (markdown still
/// raw) before the reply is whole, then the whole reply laid out. Then Esc
/// in the middle of a long streamed reply ends the turn within a second, and
/// the journal holds the words that had arrived, marked interrupted. A
/// system test (tmux, the seed body).
#[test]
fn the_full_client_shows_a_streamed_reply_growing_and_esc_cuts_it_short() -> TestResult {
    if !system_tests() {
        return Ok(());
    }
    let greek = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omega";
    let long: Vec<String> = (1..=60).map(|n| format!("word{n}")).collect();
    let long = long.join(" ");
    let script = format!(
        "{{\"reply\": \"Hello.\"}}\n\
         {{\"reply\": \"**Bold** start, {greek}\", \"chunk_ms\": 150}}\n\
         {{\"reply\": \"{long}\", \"chunk_ms\": 150}}\n"
    );
    let ind = Individual::seed(&script, &["TENERAL_STANDIN_LOG=standin.jsonl"])?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth turn", Duration::from_secs(600), |e| e["type"] == "turn.ended")?;
    let term = terminal(ind.path());
    let within = Duration::from_secs(60);
    term.wait_for_within("lists the commands", within);
    term.enter("tell me in greek");
    // Growing: the first words are on screen, raw, before the last is sent.
    let growing = term.wait_for_within("**Bold** start", within);
    assert!(!growing.contains("omega"), "the whole reply came at once:\n{growing}");
    assert!(ind.events("reply").len() == 1, "the journal has only the birth reply so far");
    // Whole: laid out as markdown (no asterisks), printed once.
    let whole = term.wait_for_within("omega", within);
    let laid_out = wait_until_screen(&term, within, |s| {
        s.contains("Bold start, alpha") && !s.contains("**Bold**")
    });
    assert_eq!(laid_out.matches("lambda omega").count(), 1, "{whole}\n---\n{laid_out}");

    term.enter("count for me");
    term.wait_for_within("word3 ", within);
    let cut_at = std::time::Instant::now();
    assert!(term.run(&["send-keys", "-t", "0", "Escape"]).status.success());
    ind.wait_for("the interrupt", Duration::from_secs(1), |e| e["type"] == "turn.interrupted")?;
    let took = cut_at.elapsed();
    assert!(took < Duration::from_secs(1), "Esc took {took:?} to end the stream");
    let replies = ind.events("reply");
    let cut = replies.last().cloned().unwrap_or_default();
    assert_eq!(cut["interrupted"], true, "{cut}");
    let text = cut["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("word1 word2 word3") && long.starts_with(text), "{text:?}");
    assert!(text.len() < long.len(), "the reply was cut short: {text:?}");
    term.wait_for_within("cut short", within);
    Ok(())
}

/// Waits until `check` holds for the screen; returns it.
fn wait_until_screen(term: &Tmux, within: Duration, check: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + within;
    loop {
        let screen = term.screen(false);
        if check(&screen) {
            return screen;
        }
        assert!(std::time::Instant::now() < deadline, "the screen never settled:\n{screen}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
