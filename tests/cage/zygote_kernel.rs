//! The kernel with `TENERAL_CAGE_ZYGOTE=on`: its generation is forked by the
//! cage's zygote, gets ready, answers the owner, and is caged as ever (a
//! network namespace of its own).

use std::time::Duration;

use super::*;

const SCRIPT: &str = r#"{"reply": "Hello. I have just been born."}
{"expect": "ping", "reply": "pong through the zygote"}
"#;

fn net_ns(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

#[test]
fn a_kernel_whose_cage_forks_from_the_zygote_runs_and_answers_its_generation() -> TestResult {
    if !require_cage()? {
        return Ok(());
    }
    let env = ["TENERAL_RUNNER=direct", "TENERAL_CAGE_ZYGOTE=on"];
    let ind = Individual::new(SCRIPT, &env)?;
    let _kernel = ind.start()?;
    ind.wait_for("the birth reply", Duration::from_secs(240), |e| e["type"] == "reply")?;
    let (status, out, err) = talk(ind.path(), "ping\n", 120)?;
    assert_eq!(status, Some(0), "talk: {out}\n{err}\nlog:\n{}", ind.kernel_log());
    assert!(out.contains("pong through the zygote"), "talk printed:\n{out}");

    let log = ind.kernel_log();
    assert!(log.contains("confined launches are forked by the cage's zygote"), "{log}");
    assert!(!log.contains("zygote did not start"), "{log}");
    let ours = net_ns(std::process::id()).ok_or("no network namespace of our own")?;
    let body = processes_under(ind.path());
    let caged: Vec<_> =
        body.iter().filter(|(pid, _)| net_ns(*pid).is_some_and(|ns| ns != ours)).collect();
    assert!(!caged.is_empty(), "no process of the individual has a network of its own: {body:?}");
    Ok(())
}
