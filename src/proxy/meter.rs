//! The kernel's count of what a provider spends: the usage each answer
//! reports, read by the proxy as the answer passes (whole or streamed),
//! held against a budget of tokens, and the provider's failures.
//!
//! Invariants: the count is the proxy's own reading of the provider's
//! answers, never a body's word; once the budget is passed or the provider
//! failed, the meter is stopped for good, every later request is refused
//! without reaching the provider, and whoever waits on [`Meter::stopped`]
//! is told why.

use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::watch;

/// The most of one answer read to find its usage; an answer longer than
/// this is still relayed whole, and its usage read from what was kept.
pub const MAX_READ_BYTES: usize = 8 << 20;

/// Why a metered run was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The provider's reported usage passed the budget.
    Overrun { used: u64, budget: u64 },
    /// The provider failed: a 5xx answer, or it could not be reached.
    Failed(String),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Overrun { used, budget } => write!(
                f,
                "budget overrun: the provider reported {used} tokens, over the budget of {budget}"
            ),
            Stopped::Failed(why) => write!(f, "provider failure: {why}"),
        }
    }
}

/// A budget of tokens and what was spent of it.
#[derive(Debug)]
pub struct Meter {
    budget: u64,
    used: Mutex<u64>,
    stop: watch::Sender<Option<Stopped>>,
}

impl Meter {
    pub fn new(budget: u64) -> Meter {
        Meter { budget, used: Mutex::new(0), stop: watch::Sender::new(None) }
    }

    /// The tokens the provider reported so far.
    pub fn used(&self) -> u64 {
        self.used.lock().map_or(0, |used| *used)
    }

    /// Why it stopped, when it did.
    pub fn stop_reason(&self) -> Option<Stopped> {
        self.stop.borrow().clone()
    }

    /// Adds `tokens` of one answer; passing the budget stops the meter.
    pub fn spend(&self, tokens: u64) {
        let used = match self.used.lock() {
            Ok(mut used) => {
                *used = used.saturating_add(tokens);
                *used
            }
            Err(_) => u64::MAX,
        };
        if over(used, self.budget) {
            self.halt(Stopped::Overrun { used, budget: self.budget });
        }
    }

    /// The provider failed as `why` says.
    pub fn fail(&self, why: String) {
        self.halt(Stopped::Failed(why));
    }

    /// The first reason stands.
    fn halt(&self, why: Stopped) {
        self.stop.send_if_modified(|now| match now {
            Some(_) => false,
            None => {
                *now = Some(why);
                true
            }
        });
    }

    /// Waits until the meter is stopped, and says why.
    pub async fn stopped(&self) -> Stopped {
        let mut seen = self.stop.subscribe();
        loop {
            if let Some(why) = seen.borrow_and_update().clone() {
                return why;
            }
            if seen.changed().await.is_err() {
                // The sender lives in `self`: not reached while it does.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Whether `used` tokens pass a budget of `budget`.
pub fn over(used: u64, budget: u64) -> bool {
    used > budget
}

/// The tokens, input and output, that one answer's bytes report: a whole
/// JSON answer (chat completions' `usage.prompt_tokens` and
/// `completion_tokens`, responses' `usage.input_tokens` and
/// `output_tokens`) or a stream of `data:` lines (the chunk with `usage`,
/// or `response.completed` with `response.usage`). 0 when none is told.
pub fn tokens_in(bytes: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(bytes);
    let streamed = text.lines().any(|l| l.starts_with("data:"));
    if !streamed {
        return serde_json::from_str::<Value>(&text).map_or(0, |v| of_object(&v));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .map(|v| of_object(&v))
        .fold(0, u64::saturating_add)
}

/// The usage of one JSON object: its own `usage`, or its `response`'s.
fn of_object(value: &Value) -> u64 {
    let usage = value
        .get("usage")
        .filter(|u| u.is_object())
        .or_else(|| value.get("response").and_then(|r| r.get("usage")));
    let Some(usage) = usage else { return 0 };
    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = n("input_tokens").max(n("prompt_tokens"));
    let output = n("output_tokens").max(n("completion_tokens"));
    input.saturating_add(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_of_answers() {
        let cases: Vec<(&str, &str, u64)> = vec![
            (
                "a whole chat answer",
                r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}"#,
                14,
            ),
            (
                "a whole responses answer",
                r#"{"output":[],"usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}}"#,
                10,
            ),
            ("no usage", r#"{"choices":[]}"#, 0),
            ("a null usage", r#"{"usage":null}"#, 0),
            ("not JSON", "oops", 0),
            (
                "a chat stream",
                "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
                 data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":2}}\n\n\
                 data: [DONE]\n\n",
                22,
            ),
            (
                "a responses stream",
                "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
                 event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":30,\"output_tokens\":5}}}\n\n",
                35,
            ),
        ];
        for (what, text, want) in cases {
            assert_eq!(tokens_in(text.as_bytes()), want, "{what}");
        }
    }

    #[test]
    fn budgets() {
        for (used, budget, want) in
            [(0, 0, false), (10, 10, false), (11, 10, true), (5, 100, false)]
        {
            assert_eq!(over(used, budget), want, "{used} of {budget}");
        }
    }

    #[tokio::test]
    async fn the_first_stop_stands() {
        let meter = Meter::new(10);
        meter.spend(6);
        assert_eq!(meter.stop_reason(), None);
        meter.spend(6);
        meter.fail("503".into());
        let want = Stopped::Overrun { used: 12, budget: 10 };
        assert_eq!(meter.stopped().await, want);
        assert_eq!(meter.used(), 12);
        let failed = Meter::new(10);
        failed.fail("the provider answered 503".into());
        assert!(failed.stopped().await.to_string().starts_with("provider failure"));
    }
}
