//! The body's tests: one binary, one module per concern. Most drive the
//! real body binary against the kernel's event channel and the stand-in
//! model (see `common`); `shapes` and `context` test pure code directly.

// All of this crate is tests, helpers included; clippy.toml's test allowances
// reach only #[test] functions, so they are given to the whole crate here.
#![allow(clippy::expect_used, clippy::panic)]

mod common;

mod basics;
mod context;
mod images;
mod inbox;
mod interrupts;
mod mutate;
mod retries;
mod shapes;
mod streams;
mod tools;
