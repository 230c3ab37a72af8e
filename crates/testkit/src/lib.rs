//! What the tests of this workspace's crates share, each once: the one way
//! a test skips ([`skip`]) and the switch of the system tests
//! ([`system_tests`]), a time limit on every external command a test runs
//! ([`run_within`]), the stand-in model ([`standin::Standin`]), bare git
//! repositories served over HTTP ([`git_http::GitServer`]), a stand-in
//! forge ([`forge::Forge`]), a terminal driven through tmux
//! ([`tmux::Tmux`]), and a small image ([`PNG`]).
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

pub use limit::{run_fed_within, run_within, succeed_within, Within, QUICK, SLOW};
pub use skip::{skip, system_tests};

/// A 1×1 PNG, for the tests of images.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
