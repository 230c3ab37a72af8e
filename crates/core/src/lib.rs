//! What the kernel (`teneral`) and its clients (`teneralctl`) share, and
//! nothing of the supervisor: the journal (its rules, writer and reader),
//! the owner's channel, the state and status files, the individual's lock,
//! the log, the lineage as the journal tells it, the owner's request to go
//! back, and a commit's names. A client links this crate, never the kernel.
pub mod back_request;
pub mod chatgpt;
pub mod commit;
pub mod crash;
pub mod dotenv;
pub mod evals;
pub mod fsutil;
pub mod generations;
pub mod journal;
pub mod live;
pub mod lock;
pub mod log;
pub mod owner;
pub mod scorecard;
pub mod setting;
pub mod state;
pub mod status;
