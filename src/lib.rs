//! teneral: the trusted kernel of a self-rewriting agent.
//!
//! One module per concept (docs/design.md). The binaries in `src/bin/` are
//! thin: they parse arguments and call in here.
pub mod back;
pub mod commit;
pub mod confine;
pub mod crash;
pub mod events;
pub mod fsutil;
pub mod gate;
pub mod generation;
pub mod generations;
pub mod journal;
pub mod lifecycle;
pub mod lock;
pub mod log;
pub mod organs;
pub mod owner;
pub mod proxy;
pub mod repo;
pub mod runner;
pub mod settings;
pub mod spawn;
pub mod standin;
pub mod state;
pub mod status;
pub mod supervisor;
pub mod sys;
pub mod talk;
