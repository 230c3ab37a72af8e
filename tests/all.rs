//! The kernel's integration tests: one binary, one module per concern.
// All of this crate is tests, helpers included; clippy.toml's test allowances
// reach only #[test] functions, so they are given to the whole crate here.
#![allow(clippy::expect_used, clippy::panic)]
mod back;
mod cage;
mod channel;
mod common;
mod crash;
mod directory;
mod docs;
mod egress;
mod evals;
mod fetch;
mod gate;
mod kernel;
mod kube;
mod launcher;
mod offer;
mod organs;
mod replay;
mod selfmod;
mod showcase;
mod species;
mod standin;
mod systemd;
mod talk;
