//! teneral: the trusted kernel of a self-rewriting agent.
//!
//! One module per concept (docs/design.md). The binaries in `src/bin/` are
//! thin: they parse arguments and call in here. What the kernel shares with
//! its clients lives in `teneral-core` (crates/core) and is named from there
//! (`teneral_core::journal`), the one spelling of each item.
pub mod cli;
pub mod confine;
pub mod egress;
pub mod evals;
pub mod events;
pub mod gate;
pub mod generation;
pub mod launcher;
pub(crate) mod lifecycle;
pub mod offer;
pub mod organs;
pub mod proxy;
pub mod replay;
pub mod repo;
pub mod runner;
pub(crate) mod scrub;
pub mod settings;
pub mod smoke;
pub mod spawn;
pub mod species;
pub mod standin;
pub mod supervisor;
pub mod sys;
