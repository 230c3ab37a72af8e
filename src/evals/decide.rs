//! The gate's decision on the evaluations: pure, over each evaluation's
//! result on the candidate and on the running generation.
//!
//! A candidate that fails an evaluation the running generation passes is
//! refused, the evaluations named with the first failed check of each. An
//! evaluation undecided on either side (not run, out of time) decides
//! nothing and counts toward no refusal. Otherwise the candidate goes on,
//! and where it passes what the running generation failed, or passes with
//! fewer tokens or clearly less time, it is better on those.

use super::checks::Outcome;

/// A candidate's time counts as less when it is under this share of the
/// running generation's and at least [`LESS_SECONDS`] shorter: wall times
/// of caged runs vary by a tenth or so from one run to the next, and by
/// more than that share when a run lasts a fraction of a second.
pub const LESS_TIME: f64 = 0.8;
/// See [`LESS_TIME`].
pub const LESS_SECONDS: f64 = 0.5;

/// One evaluation on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub name: String,
    pub candidate: Side,
    pub running: Side,
}

/// One side's result and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub outcome: Outcome,
    /// The failed check's words, when it failed.
    pub failed_check: Option<String>,
    pub tokens: u64,
    pub seconds: f64,
}

/// What the evaluations say of the candidate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Each evaluation the candidate breaks: its name and its first failed
    /// check, with what was seen. Not empty: refuse.
    pub regressed: Vec<(String, String)>,
    /// Where the candidate is better: `passes NAME`, `fewer tokens on NAME`,
    /// `less time on NAME`.
    pub better_on: Vec<String>,
    /// Each evaluation that decided nothing, and why.
    pub undecided: Vec<(String, String)>,
}

impl Decision {
    pub fn refuses(&self) -> bool {
        !self.regressed.is_empty()
    }

    /// The refusal's words: every evaluation broken and how.
    pub fn refusal(&self) -> String {
        let each: Vec<String> =
            self.regressed.iter().map(|(name, check)| format!("{name} ({check})")).collect();
        format!(
            "the candidate fails what the running generation passes: {}; \
             make it pass them again (teneralctl evals shows each result)",
            each.join("; ")
        )
    }
}

/// The decision over every evaluation.
pub fn decide(pairs: &[Pair]) -> Decision {
    let mut decision = Decision::default();
    for pair in pairs {
        let (c, r) = (&pair.candidate, &pair.running);
        let name = pair.name.clone();
        match (&c.outcome, &r.outcome) {
            (Outcome::Undecided(why), _) => {
                decision.undecided.push((name, format!("on the candidate: {why}")))
            }
            (_, Outcome::Undecided(why)) => {
                decision.undecided.push((name, format!("on the running generation: {why}")))
            }
            (Outcome::Failed { said, .. }, Outcome::Passed) => {
                let check = c.failed_check.clone().unwrap_or_else(|| "the run".into());
                decision.regressed.push((name, format!("{check}: {said}")));
            }
            (Outcome::Passed, Outcome::Failed { .. }) => {
                decision.better_on.push(format!("passes {name}"))
            }
            (Outcome::Passed, Outcome::Passed) => {
                if c.tokens < r.tokens {
                    decision.better_on.push(format!("fewer tokens on {name}"));
                }
                if c.seconds < r.seconds * LESS_TIME && r.seconds - c.seconds >= LESS_SECONDS {
                    decision.better_on.push(format!("less time on {name}"));
                }
            }
            (Outcome::Failed { .. }, Outcome::Failed { .. }) => {}
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(outcome: &Outcome, tokens: u64, seconds: f64) -> Side {
        let failed_check =
            matches!(outcome, Outcome::Failed { .. }).then(|| "tool_called \"x\"".to_owned());
        Side { outcome: outcome.clone(), failed_check, tokens, seconds }
    }

    #[test]
    fn the_decision() {
        let pass = Outcome::Passed;
        let fail = Outcome::Failed { check: 0, said: "x was not called".into() };
        let time_up = Outcome::Undecided("the run did not end within 30 s".into());
        let pair =
            |name: &str, c: Side, r: Side| Pair { name: name.into(), candidate: c, running: r };
        type Case = (&'static str, Vec<Pair>, Vec<&'static str>, Vec<&'static str>, usize);
        let cases: Vec<Case> = vec![
            ("nothing to judge", vec![], vec![], vec![], 0),
            (
                "same results, same cost",
                vec![pair("a", side(&pass, 10, 1.0), side(&pass, 10, 1.0))],
                vec![],
                vec![],
                0,
            ),
            (
                "breaks a passing evaluation",
                vec![pair("a", side(&fail, 10, 1.0), side(&pass, 10, 1.0))],
                vec!["a"],
                vec![],
                0,
            ),
            (
                "fixes a failing evaluation",
                vec![pair("a", side(&pass, 10, 1.0), side(&fail, 10, 1.0))],
                vec![],
                vec!["passes a"],
                0,
            ),
            (
                "both fail: nothing said",
                vec![pair("a", side(&fail, 1, 0.1), side(&fail, 10, 1.0))],
                vec![],
                vec![],
                0,
            ),
            (
                "cheaper and faster",
                vec![pair("a", side(&pass, 9, 0.5), side(&pass, 10, 1.0))],
                vec![],
                vec!["fewer tokens on a", "less time on a"],
                0,
            ),
            (
                "a fraction of a second is noise",
                vec![pair("a", side(&pass, 10, 0.1), side(&pass, 10, 0.3))],
                vec![],
                vec![],
                0,
            ),
            (
                "cheaper and faster by much",
                vec![pair("a", side(&pass, 9, 2.0), side(&pass, 10, 4.0))],
                vec![],
                vec!["fewer tokens on a", "less time on a"],
                0,
            ),
            (
                "a little faster is noise",
                vec![pair("a", side(&pass, 10, 0.9), side(&pass, 10, 1.0))],
                vec![],
                vec![],
                0,
            ),
            (
                "undecided on the candidate counts for nothing",
                vec![pair("a", side(&time_up, 0, 30.0), side(&pass, 10, 1.0))],
                vec![],
                vec![],
                1,
            ),
            (
                "undecided on the running generation counts for nothing",
                vec![pair("a", side(&fail, 0, 1.0), side(&time_up, 0, 30.0))],
                vec![],
                vec![],
                1,
            ),
            (
                "one better, one broken, one undecided",
                vec![
                    pair("a", side(&pass, 10, 1.0), side(&fail, 10, 1.0)),
                    pair("b", side(&fail, 10, 1.0), side(&pass, 10, 1.0)),
                    pair("c", side(&time_up, 0, 30.0), side(&pass, 10, 1.0)),
                ],
                vec!["b"],
                vec!["passes a"],
                1,
            ),
        ];
        for (what, pairs, regressed, better, undecided) in cases {
            let d = decide(&pairs);
            let names: Vec<&str> = d.regressed.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, regressed, "{what}");
            assert_eq!(d.better_on, better, "{what}");
            assert_eq!(d.undecided.len(), undecided, "{what}");
            assert_eq!(d.refuses(), !regressed.is_empty(), "{what}");
        }
        let broken = decide(&[pair("a", side(&fail, 1, 1.0), side(&pass, 1, 1.0))]);
        assert_eq!(broken.regressed[0].1, "tool_called \"x\": x was not called");
        assert!(
            broken.refusal().contains("a (tool_called \"x\": x was not called)"),
            "{}",
            broken.refusal()
        );
    }
}
