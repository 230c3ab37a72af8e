//! The kernel's integration tests: one binary, one module per concern.
mod cage;
mod common;
mod kernel;
mod standin;
mod talk;
