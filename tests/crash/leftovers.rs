//! What killed writers leave below `.teneral/`'s top level: the start
//! removes every temporary file of the one pattern whose writer is gone, at
//! any depth, and nothing else; a send-back request whose client is gone;
//! and the words of a reply a killed kernel was streaming.

use super::SHORT;
use crate::common::*;

#[test]
fn the_start_removes_temporary_files_a_kill_left_at_any_depth() -> TestResult {
    let ind = Individual::new("", &[])?;
    let teneral = ind.path().join(".teneral");
    // Written by processes that are gone (one reaped child's id); a live
    // writer's file is its write under way and stays.
    let mut child = std::process::Command::new("true").spawn()?;
    let gone = child.id();
    child.wait()?;
    let left = [
        format!("kernels/.running.tmp-{gone}"),
        format!("gate/.memo.json.tmp-{gone}"),
        format!("requests/.back.taken.tmp-{gone}"),
    ];
    let live_write = format!("requests/.back.json.tmp-{}", std::process::id());
    let kept = ["kernels/.running.tmp", "gate/memo.json.tmp-4", live_write.as_str()];
    for name in left.iter().map(String::as_str).chain(kept) {
        let path = teneral.join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(&teneral))?;
        std::fs::write(&path, "half written")?;
    }
    let _kernel = ind.start()?;
    ind.wait_for("the generation ready", SHORT, |e| e["type"] == "generation.ready")?;
    for name in &left {
        assert!(!teneral.join(name).exists(), "{name} is removed:\n{}", ind.kernel_log());
    }
    for name in kept {
        assert!(
            teneral.join(name).exists(),
            "{name} is not the pattern's, or its writer lives, and stays"
        );
    }
    Ok(())
}

/// A `teneralctl back` killed after it left its request and before it
/// signalled the kernel: the request must not wait for a later SIGHUP.
#[test]
fn the_start_removes_a_send_back_request_whose_client_is_gone() -> TestResult {
    let ind = Individual::new("", &[])?;
    let request = ind.path().join(teneral_core::back_request::BACK_REQUEST);
    std::fs::create_dir_all(request.parent().unwrap_or(ind.path()))?;
    std::fs::write(&request, serde_json::json!({"to": ind.head()?}).to_string())?;
    let _kernel = ind.start()?;
    ind.wait_for("the generation ready", SHORT, |e| e["type"] == "generation.ready")?;
    assert!(!request.exists(), "the request is removed:\n{}", ind.kernel_log());
    assert!(ind.kernel_log().contains("removed a send-back request"), "{}", ind.kernel_log());
    Ok(())
}

/// A kernel killed while a body streamed a reply: its words stay in the
/// reply-in-progress file, and the next start empties it (the turn is
/// taken again), so the owner's client never shows them as being written.
#[test]
fn the_start_empties_the_reply_a_killed_kernel_was_streaming() -> TestResult {
    let ind = Individual::new("", &[])?;
    let live = ind.path().join(teneral_core::live::LIVE_PATH);
    std::fs::create_dir_all(live.parent().unwrap_or(ind.path()))?;
    std::fs::write(&live, "{\"text\":\"half a rep\"}\n")?;
    let _kernel = ind.start()?;
    ind.wait_for("the generation ready", SHORT, |e| e["type"] == "generation.ready")?;
    assert_eq!(std::fs::read(&live)?, b"", "the words in progress are gone:\n{}", ind.kernel_log());
    Ok(())
}
