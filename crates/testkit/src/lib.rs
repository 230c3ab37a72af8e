//! What the tests of this workspace's crates share, each once: the one way
//! a test skips ([`skip`]) and the switch of the system tests
//! ([`system_tests`]), a time limit on every external command a test runs
//! ([`run_within`]), the stand-in model ([`standin::Standin`]), bare git
//! repositories served over HTTP ([`git_http::GitServer`]), a stand-in
//! forge ([`forge::Forge`]), and a terminal driven through tmux
//! ([`tmux::Tmux`]).
//!
//! A dev-dependency only: the kernel's integration tests (`tests/`) and the
//! owner's client's (`crates/ctl/tests`) use it; no crate's build does. It
//! links none of this workspace's crates, so each test binary gets the one
//! copy of the crate it tests.
// All of this crate is for tests: a failed expectation panics, as in a
// test (clippy.toml's test allowances reach only #[test] functions).
#![allow(clippy::expect_used, clippy::panic)]

pub mod forge;
pub mod git_http;
mod limit;
pub mod skip;
pub mod standin;
pub mod tmux;

pub use limit::{run_within, succeed_within, QUICK};
pub use skip::{skip, system_tests};
