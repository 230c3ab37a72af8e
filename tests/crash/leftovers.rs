//! What killed writers leave below `.teneral/`'s top level: the start
//! removes every temporary file of the one pattern, at any depth, and
//! nothing else; and a send-back request whose client is gone.

use super::SHORT;
use crate::common::*;

#[test]
fn the_start_removes_temporary_files_a_kill_left_at_any_depth() -> TestResult {
    let ind = Individual::new("", &[])?;
    let teneral = ind.path().join(".teneral");
    let left =
        ["kernels/.running.tmp-99991", "gate/.memo.json.tmp-99992", "requests/.back.taken.tmp-3"];
    let kept = ["kernels/.running.tmp", "gate/memo.json.tmp-4"];
    for name in left.iter().chain(&kept) {
        let path = teneral.join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(&teneral))?;
        std::fs::write(&path, "half written")?;
    }
    let _kernel = ind.start()?;
    ind.wait_for("the generation ready", SHORT, |e| e["type"] == "generation.ready")?;
    for name in left {
        assert!(!teneral.join(name).exists(), "{name} is removed:\n{}", ind.kernel_log());
    }
    for name in kept {
        assert!(teneral.join(name).exists(), "{name} is not the pattern's and stays");
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
