//! The kernel's integration tests: one binary, one module per concern.
mod common;
mod kernel;
mod standin;
mod systemd;
mod talk;
