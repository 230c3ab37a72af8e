//! What the stand-in reads from a request and what it answers, in neither
//! protocol's shape: the newest input, the model's turn, the token counts.
//!
//! Invariants: token counts are a pure function of the request body and the
//! turn (characters / 4, at least 1), so a test can predict them; the default
//! reply quotes at most [`QUOTE_CHARS`] characters of the input.

/// How many characters of the input the default reply quotes.
pub const QUOTE_CHARS: usize = 200;

/// The newest user or tool input of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Newest {
    /// Text the user wrote.
    User(String),
    /// What a tool returned.
    Tool(String),
    /// The request holds neither.
    Nothing,
}

impl Newest {
    /// The text, whichever kind it is.
    pub fn text(&self) -> &str {
        match self {
            Newest::User(text) | Newest::Tool(text) => text,
            Newest::Nothing => "",
        }
    }
}

/// The answer when no script step says otherwise.
pub fn default_reply(newest: &Newest) -> String {
    let quote: String = newest.text().chars().take(QUOTE_CHARS).collect();
    match newest {
        Newest::Tool(_) => format!("Stand-in model here. The tool said: {quote}"),
        Newest::User(_) | Newest::Nothing => format!("Stand-in model here. You said: {quote}"),
    }
}

/// One tool call the model makes. `n` numbers it across the server's life:
/// chat shows it as `call_<n>`, Responses as `fc_<n>` with call id `call_<n>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub n: u64,
    pub name: String,
    /// A JSON document, as text.
    pub arguments: String,
}

impl Call {
    pub fn call_id(&self) -> String {
        format!("call_{}", self.n)
    }
}

/// The model's turn: any of text, a reasoning summary, tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Turn {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub calls: Vec<Call>,
}

/// Token counts of one exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    /// The part of `output` spent on reasoning.
    pub reasoning: u64,
}

impl Usage {
    /// Counts for a request body of `body_chars` characters answered by `turn`.
    pub fn of(body_chars: usize, turn: &Turn) -> Usage {
        let text = turn.text.as_deref().map_or(0, count);
        let reasoning = turn.reasoning.as_deref().map_or(0, count);
        let calls: usize = turn.calls.iter().map(|c| count(&c.name) + count(&c.arguments)).sum();
        Usage {
            input: tokens(body_chars),
            output: tokens(text + reasoning + calls),
            reasoning: (reasoning / 4) as u64,
        }
    }

    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

fn count(text: &str) -> usize {
    text.chars().count()
}

fn tokens(chars: usize) -> u64 {
    ((chars / 4) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_reply_quotes_the_newest_input() {
        assert_eq!(
            default_reply(&Newest::User("hello".into())),
            "Stand-in model here. You said: hello"
        );
        assert_eq!(
            default_reply(&Newest::Tool("exit 0".into())),
            "Stand-in model here. The tool said: exit 0"
        );
        assert_eq!(default_reply(&Newest::Nothing), "Stand-in model here. You said: ");
        let long = "é".repeat(300);
        let reply = default_reply(&Newest::User(long));
        assert_eq!(reply.chars().count(), "Stand-in model here. You said: ".len() + 200);
    }

    #[test]
    fn usage_is_characters_over_four() {
        let turn = Turn {
            text: Some("12345678".into()),
            reasoning: Some("abcd".into()),
            calls: vec![Call { n: 1, name: "ab".into(), arguments: "{}".into() }],
        };
        let usage = Usage::of(40, &turn);
        assert_eq!(usage, Usage { input: 10, output: 4, reasoning: 1 });
        assert_eq!(usage.total(), 14);
        assert_eq!(Usage::of(0, &Turn::default()), Usage { input: 1, output: 1, reasoning: 0 });
    }
}
