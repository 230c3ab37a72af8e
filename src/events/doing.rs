//! What the kernel says it is doing after each thing a body sent.

use super::Seen;
use teneral_core::status::Doing;

impl Seen {
    /// What the agent does after the body sent this, when that changes it.
    pub fn doing(&self) -> Option<Doing> {
        match self {
            Seen::Ready | Seen::TurnEnded | Seen::Interrupted => Some(Doing::Resting),
            Seen::Thinking | Seen::OwnerLine => Some(Doing::Thinking),
            Seen::Tool(name) => Some(Doing::RunningTool(name.clone())),
            Seen::Replied | Seen::MutationRequested { .. } | Seen::OfferRequested { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_body_sends_moves_the_status() {
        let table = [
            (Seen::Ready, Some(Doing::Resting)),
            (Seen::Thinking, Some(Doing::Thinking)),
            (Seen::Tool("shell".into()), Some(Doing::RunningTool("shell".into()))),
            (Seen::TurnEnded, Some(Doing::Resting)),
            (Seen::Interrupted, Some(Doing::Resting)),
            (Seen::Replied, None),
        ];
        for (seen, want) in table {
            assert_eq!(seen.doing(), want, "{seen:?}");
        }
    }
}
