//! teneral: the trusted kernel of a self-rewriting agent.
//!
//! One module per concept (docs/design.md). The binaries in `src/bin/` are
//! thin: they parse arguments and call in here.
pub mod confine;
pub mod events;
pub mod fsutil;
pub mod generation;
pub mod journal;
pub mod lifecycle;
pub mod lock;
pub mod log;
pub mod owner;
pub mod proxy;
pub mod repo;
pub mod settings;
pub mod spawn;
pub mod standin;
pub mod state;
pub mod supervisor;
pub mod sys;
pub mod talk;
