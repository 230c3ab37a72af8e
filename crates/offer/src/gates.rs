//! The mutation gate's checks on an offer, as the report keeps and shows
//! them: organs, the kernel's type check, the body's format and lints, the
//! kernel's tests, the body's tests, the smoke run, each passed, reused (a
//! pass of the same tree was kept), failed, or not run (after a failure).
//!
//! The kernel runs them (`teneral offer-check`, and at the body's request)
//! in the cage, on the offer's tree as on a fresh seed; this crate only
//! holds their results, so `teneralctl` and the forge's text read the same
//! thing. Pure.

use serde_json::{json, Value};

/// The gate's steps in the order it runs and reports them.
pub const ORDER: [&str; 7] = [
    "organs",
    "typecheck-kernel",
    "format-body",
    "lint-body",
    "kernel-tests",
    "body-tests",
    "smoke",
];

/// How one gate step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// A pass of the same tree and toolchain was kept; nothing ran again.
    Reused,
    Failed,
    /// An earlier step failed, so this one was not run.
    NotRun,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Reused => "reused",
            Outcome::Failed => "failed",
            Outcome::NotRun => "not run",
        }
    }

    pub fn parse(text: &str) -> Option<Outcome> {
        [Outcome::Passed, Outcome::Reused, Outcome::Failed, Outcome::NotRun]
            .into_iter()
            .find(|r| r.as_str() == text)
    }

    fn ok(self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Reused)
    }
}

/// One gate step on an offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub result: Outcome,
    pub seconds: f64,
    /// The end of what a failed step printed, or why a reused one did not
    /// run, when the gate said.
    pub output: Option<String>,
}

/// Every gate step on an offer, in [`ORDER`] (others after).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gates {
    pub steps: Vec<Step>,
    /// How long the gates took, set-up included.
    pub seconds: f64,
}

impl Gates {
    /// Passed when at least one step ran and every step passed or was reused.
    pub fn passed(&self) -> bool {
        !self.steps.is_empty() && self.steps.iter().all(|s| s.result.ok())
    }

    /// The first step that failed.
    pub fn failed(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.result == Outcome::Failed)
    }

    /// The steps as journaled (`name`, `result`, seconds, and for a step
    /// that did not run the gate's `why`) and the gate's
    /// refusal (`check`, `output`) made into one list in [`ORDER`]: a refused
    /// step not journaled (e.g. the checkout) is added as failed, the steps
    /// of [`ORDER`] after a failure and never journaled as not run (in a
    /// passed judgement, as reused), and `organs`, journaled only when
    /// organs are pinned, as passed when anything after it ran.
    pub fn from_steps(
        journaled: &[(String, Outcome, f64, Option<String>)],
        refused: Option<(&str, &str)>,
        seconds: f64,
    ) -> Gates {
        let mut steps: Vec<Step> = journaled
            .iter()
            .map(|(name, result, seconds, why)| Step {
                name: name.clone(),
                result: *result,
                seconds: *seconds,
                output: why.clone().filter(|_| *result == Outcome::Reused),
            })
            .collect();
        if let Some((check, output)) = refused {
            match steps.iter_mut().find(|s| s.name == check) {
                Some(step) => {
                    step.result = Outcome::Failed;
                    step.output = Some(output.to_owned());
                }
                None => steps.push(Step {
                    name: check.to_owned(),
                    result: Outcome::Failed,
                    seconds: 0.0,
                    output: Some(output.to_owned()),
                }),
            }
        }
        let failed = steps.iter().any(|s| s.result == Outcome::Failed);
        let ran_after_organs =
            journaled.iter().any(|(n, ..)| n != "organs" && ORDER.contains(&n.as_str()));
        if ran_after_organs && !steps.iter().any(|s| s.name == "organs") {
            steps.push(Step {
                name: "organs".into(),
                result: Outcome::Passed,
                seconds: 0.0,
                output: Some("no organs pinned".into()),
            });
        }
        // A passed judgement in which a check was not journaled reused it
        // (the gate says nothing of checks when none of them had to run).
        let accepted = refused.is_none() && !journaled.is_empty();
        for name in ORDER {
            if (failed || accepted) && !steps.iter().any(|s| s.name == name) {
                let result = if failed { Outcome::NotRun } else { Outcome::Reused };
                steps.push(Step { name: name.into(), result, seconds: 0.0, output: None });
            }
        }
        // The gate's own steps in their place: the checkout first, the
        // crates' fetch after the organs.
        let rank = |name: &str| match name {
            "checkout" => 0,
            "fetch" => 2,
            _ => ORDER.iter().position(|o| *o == name).map_or(2 * ORDER.len(), |i| 2 * i + 1),
        };
        steps.sort_by_key(|s| rank(&s.name));
        Gates { steps, seconds }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "passed": self.passed(),
            "seconds": round(self.seconds),
            "steps": self.steps.iter().map(|s| json!({
                "name": s.name, "result": s.result.as_str(), "seconds": round(s.seconds),
                "output": s.output,
            })).collect::<Vec<_>>(),
        })
    }

    /// Reads what [`Gates::to_json`] wrote.
    pub fn from_json(value: &Value) -> Option<Gates> {
        let steps = value["steps"].as_array()?;
        let steps = steps
            .iter()
            .map(|s| {
                Some(Step {
                    name: s["name"].as_str()?.to_owned(),
                    result: Outcome::parse(s["result"].as_str()?)?,
                    seconds: s["seconds"].as_f64().unwrap_or(0.0),
                    output: s["output"].as_str().map(str::to_owned),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Gates { steps, seconds: value["seconds"].as_f64().unwrap_or(0.0) })
    }

    /// One line a step, as printed: `ok   body-tests (12.3 s)`.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for s in &self.steps {
            let mark = match s.result {
                Outcome::Passed | Outcome::Reused => "ok  ",
                Outcome::Failed => "FAIL",
                Outcome::NotRun => "--  ",
            };
            let how = match s.result {
                Outcome::Passed => format!("{:.1} s", s.seconds),
                Outcome::Reused => format!(
                    "reused: {}",
                    s.output.as_deref().unwrap_or("a pass of the same tree is kept")
                ),
                Outcome::Failed => format!("failed after {:.1} s", s.seconds),
                Outcome::NotRun => "not run: an earlier gate failed".to_owned(),
            };
            lines.push(format!("{mark} gate {} ({how})", s.name));
            if s.result == Outcome::Failed {
                for line in tail(s.output.as_deref().unwrap_or(""), 15) {
                    lines.push(format!("     | {line}"));
                }
            }
        }
        lines
    }

    /// The steps in a few words for the pull request's block and a witness
    /// report: `organs passed, typecheck-kernel reused, ...`.
    pub fn summary(&self) -> String {
        let steps: Vec<String> =
            self.steps.iter().map(|s| format!("{} {}", s.name, s.result.as_str())).collect();
        steps.join(", ")
    }
}

/// What a witness's extra command (`--also '<command>'`) did, run in the
/// gate's cage on the pull request's tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Also {
    pub command: String,
    pub passed: bool,
    /// The exit status as said (`exit status 3`, ...).
    pub exit: String,
    pub seconds: f64,
    /// The end of what it printed: kept here, never posted.
    pub output: String,
}

impl Also {
    pub fn to_json(&self) -> Value {
        json!({"command": self.command, "passed": self.passed, "exit": self.exit,
               "seconds": round(self.seconds), "output": self.output})
    }

    pub fn from_json(v: &Value) -> Option<Also> {
        Some(Also {
            command: v["command"].as_str()?.to_owned(),
            passed: v["passed"].as_bool()?,
            exit: v["exit"].as_str().unwrap_or("").to_owned(),
            seconds: v["seconds"].as_f64().unwrap_or(0.0),
            output: v["output"].as_str().unwrap_or("").to_owned(),
        })
    }

    /// Its line of a posted report: the command, pass or fail, the exit status.
    pub fn line(&self) -> String {
        let mark = if self.passed { "pass" } else { "FAIL" };
        format!(
            "{mark} the owner's command `{}` ({}, {:.1} s)",
            self.command, self.exit, self.seconds
        )
    }
}

/// The pull request block's line on the gates, from a kept report's `gates`.
pub fn block_line(gates: &Value) -> String {
    match Gates::from_json(gates) {
        Some(g) if g.passed() => format!(
            "- the mutation gate's checks, in the cage, on this branch as on a fresh seed: {}\n",
            g.summary()
        ),
        Some(g) => format!("- the mutation gate's checks FAILED: {}\n", g.summary()),
        None => {
            "- not checked by its install: the mutation gates (organs, type check, tests, smoke) \
                 on this branch\n"
                .to_owned()
        }
    }
}

fn round(s: f64) -> f64 {
    (s * 100.0).round() / 100.0
}

/// The last `n` non-empty lines of `text`.
fn tail(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, result: Outcome) -> (String, Outcome, f64, Option<String>) {
        (name.to_owned(), result, 1.0, None)
    }

    #[test]
    fn the_steps_and_the_refusal_make_one_list_in_order() {
        type Case<'a> = (
            Vec<(String, Outcome, f64, Option<String>)>,
            Option<(&'a str, &'a str)>,
            Vec<&'a str>,
            bool,
        );
        let cases: Vec<Case<'_>> = vec![
            // All passed, organs unpinned: organs counted passed.
            (
                ORDER[1..].iter().map(|n| step(n, Outcome::Passed)).collect(),
                None,
                vec!["organs passed", "typecheck-kernel passed", "smoke passed"],
                true,
            ),
            // The body's tests failed: named, the smoke run not run.
            (
                vec![
                    step("typecheck-kernel", Outcome::Reused),
                    step("format-body", Outcome::Passed),
                    step("lint-body", Outcome::Passed),
                    step("kernel-tests", Outcome::Reused),
                    step("body-tests", Outcome::Failed),
                ],
                Some(("body-tests", "test result: FAILED")),
                vec!["body-tests failed", "smoke not run", "kernel-tests reused"],
                false,
            ),
            // A refusal before any step: the checkout.
            (
                vec![],
                Some(("checkout", "no space")),
                vec!["checkout failed", "organs not run"],
                false,
            ),
            // Organs pinned and failing: nothing after ran.
            (
                vec![step("organs", Outcome::Failed)],
                Some(("organs", "hash mismatch")),
                vec!["organs failed", "body-tests not run"],
                false,
            ),
            // Nothing at all: not a pass.
            (vec![], None, vec![], false),
            // Every check's pass kept: only the smoke run is journaled.
            (
                vec![step("smoke", Outcome::Passed)],
                None,
                vec!["organs passed", "typecheck-kernel reused", "body-tests reused"],
                true,
            ),
        ];
        for (journaled, refused, want, passed) in cases {
            let gates = Gates::from_steps(&journaled, refused, 3.0);
            let summary = gates.summary();
            for w in want {
                assert!(summary.contains(w), "{w:?} in {summary}");
            }
            assert_eq!(gates.passed(), passed, "{summary}");
            assert_eq!(Gates::from_json(&gates.to_json()), Some(gates.clone()), "round trip");
        }
    }

    #[test]
    fn a_reused_step_says_why_it_did_not_run() {
        let said = ("typecheck-kernel".to_owned(), Outcome::Reused, 0.0, Some("why not".into()));
        let gates = Gates::from_steps(&[said, step("smoke", Outcome::Passed)], None, 1.0);
        let lines = gates.lines().join("\n");
        assert!(lines.contains("ok   gate typecheck-kernel (reused: why not)"), "{lines}");
        assert!(
            lines.contains("ok   gate kernel-tests (reused: a pass of the same tree is kept)"),
            "{lines}"
        );
        assert_eq!(Gates::from_json(&gates.to_json()), Some(gates.clone()), "round trip");
    }

    #[test]
    fn a_failed_step_shows_the_end_of_its_output_and_the_block_says_failed() {
        let gates = Gates::from_steps(
            &[step("body-tests", Outcome::Failed)],
            Some(("body-tests", "line one\n\ntest it_works ... FAILED\n")),
            2.0,
        );
        let lines = gates.lines().join("\n");
        assert!(lines.contains("FAIL gate body-tests (failed after 1.0 s)"), "{lines}");
        assert!(lines.contains("     | test it_works ... FAILED"), "{lines}");
        assert!(lines.contains("--   gate smoke (not run"), "{lines}");
        assert!(block_line(&gates.to_json()).contains("FAILED: "));
        assert!(block_line(&Value::Null).contains("not checked by its install"));
    }
}
