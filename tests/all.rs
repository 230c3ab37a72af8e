//! The kernel's integration tests: one binary, one module per concern.
mod back;
mod cage;
mod channel;
mod common;
mod gate;
mod kernel;
mod organs;
mod selfmod;
mod standin;
mod systemd;
mod talk;
