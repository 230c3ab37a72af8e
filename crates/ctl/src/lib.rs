//! `teneralctl`: the owner's commands. It links the shared crate
//! (`teneral-core`: the journal, the owner's channel, state, status, lock),
//! never the kernel: nothing of the supervisor, the gate or the cage is in
//! the program an owner runs at a terminal.
pub mod accept;
pub mod back;
pub mod cli;
pub mod evals;
pub mod fleet;
pub mod generations_card;
pub mod generations_fleet;
pub mod generations_plot;
pub mod individual;
pub mod offer;
pub mod reference;
pub mod replay;
pub mod report;
pub mod setup;
pub mod talk;
pub mod when;

pub use teneral_core::{
    back_request, commit, fsutil, generations, journal, lock, log, owner, scorecard, state, status,
};
